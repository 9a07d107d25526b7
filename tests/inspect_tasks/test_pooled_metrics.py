"""The inference task's metrics: the pooled figures are evaluation/metrics.py's, and their
persona-clustered standard errors are the delta method's for a function of the pooled totals,
computed here independently (numerical gradient of precision, recall and F1 in the four
totals, times each persona's totals)."""
from __future__ import annotations

import numpy as np
import pytest

from inspect_runs import require_inspect

require_inspect()

from inspect_ai.scorer import SampleScore, Score, stderr  # noqa: E402

from cupid.evaluation.metrics import InferenceCounts, f1_score, micro_inference  # noqa: E402
from cupid.inspect_tasks.pooled_metrics import macro, micro, micro_stderr  # noqa: E402

# (persona, matched against the truth, inferred entries, truth entries matched, truth entries)
ROWS = [("a", 1.5, 2, 1.0, 3), ("a", 0.0, 1, 2.0, 2), ("a", 3.0, 4, 0.5, 3),
        ("b", 2.5, 3, 3.0, 4), ("b", 1.0, 2, 1.0, 1),
        ("c", 0.5, 2, 2.5, 3), ("c", 2.0, 2, 0.0, 2), ("d", 1.0, 3, 1.5, 2)]


def scores(rows=ROWS) -> list[SampleScore]:
    out = []
    for number, (persona, matched, predicted, true_matched, true) in enumerate(rows):
        counts = InferenceCounts(matched, predicted, true_matched, true)
        out.append(SampleScore(score=Score(value={"precision": counts.precision, "recall": counts.recall,
                                                  "f1": counts.f1}, metadata={"counts": counts.as_dict()}),
                               sample_id=str(number), sample_metadata={"persona_id": persona}))
    return out


def figures(totals: np.ndarray) -> np.ndarray:
    matched, predicted, true_matched, true = totals
    precision, recall = matched / predicted, true_matched / true
    return np.array([precision, recall, f1_score(precision, recall)])


def delta_method(rows) -> dict:
    """sqrt(C/(C-1) sum over personas (gradient . (persona's totals - totals / C))^2)."""
    totals = np.array([sum(r[k] for r in rows) for k in range(1, 5)], dtype=float)
    personas = sorted({r[0] for r in rows})
    gradient = np.zeros((3, 4))
    for k in range(4):
        step = np.zeros(4)
        step[k] = 1e-6 * totals[k]
        gradient[:, k] = (figures(totals + step) - figures(totals - step)) / (2 * step[k])
    spread = [gradient @ (np.array([sum(r[k] for r in rows if r[0] == p) for k in range(1, 5)]) - totals / len(personas))
              for p in personas]
    c = len(personas)
    variance = c / (c - 1) * np.sum(np.square(spread), axis=0)
    return dict(zip(("precision_stderr", "recall_stderr", "f1_stderr"), np.sqrt(variance)))


def test_the_pooled_and_averaged_figures_are_cupid_evals():
    counts = [InferenceCounts(*row[1:]) for row in ROWS]
    pooled = micro_inference(counts)
    assert micro()(scores()) == {name: pooled[name] for name in ("precision", "recall", "f1")}
    assert micro()(scores())["precision"] == pytest.approx(11.5 / 19)
    averaged = macro()(scores())
    assert averaged["precision_macro"] == pytest.approx(np.mean([r[1] / r[2] for r in ROWS]))


def test_the_clustered_standard_errors_are_the_delta_methods():
    got = micro_stderr()(scores())
    expected = delta_method(ROWS)
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-6), name
    assert all(value > 0 for value in got.values())


def test_with_equal_checklists_and_one_instance_per_persona_it_is_inspects_plain_standard_error():
    rows = [(f"p{n}", matched, 3, true_matched, 2) for n, (matched, true_matched) in
            enumerate([(3.0, 1.0), (1.5, 2.0), (0.0, 0.5), (2.5, 1.5), (1.0, 0.0)])]
    got = micro_stderr()(scores(rows))
    for name in ("precision", "recall"):
        plain = stderr()([SampleScore(score=Score(value=s.score.value[name]), sample_id=s.sample_id)
                          for s in scores(rows)])
        assert got[f"{name}_stderr"] == pytest.approx(plain, rel=1e-12)


def test_a_persona_whose_instances_agree_widens_the_interval():
    """Three copies of each persona's instance: clustered, the standard error is that of the
    personas alone (the copies add no information), wider than it would be if they were
    independent."""
    once = [(f"p{n}", m, 2, t, 2) for n, (m, t) in enumerate([(2.0, 1.0), (0.5, 1.5), (1.0, 0.0), (1.5, 2.0)])]
    got = micro_stderr()(scores([row for row in once for _ in range(3)]))
    independent = micro_stderr()(scores([(f"{row[0]}-{copy}", *row[1:]) for row in once for copy in range(3)]))
    alone = micro_stderr()(scores(once))
    for name in ("precision_stderr", "recall_stderr", "f1_stderr"):
        assert got[name] == pytest.approx(alone[name], rel=1e-12)
        assert got[name] > independent[name]
