"""Figure 10's matrix (evaluation/report/self_enhancement.py) on the fixture results, whose
instances differ: a cell's F1 is the micro F1 (pooled counts, as the paper's tables), not the
mean of the instances' F1; its score the mean judge score; each with its n and what failed."""
from __future__ import annotations

import pytest

from cupid.evaluation.report import self_enhancement as M
from fixtures_results import CLAUDE, FAILED, GPT4O, GPT4O_DEFAULT, MISSING, build_results_dir


def prf(pm, npred, tm, ntrue):
    p, r = pm / npred, tm / ntrue
    return p, r, (0.0 if p + r == 0 else 2 * p * r / (p + r))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return build_results_dir(tmp_path_factory.mktemp("se") / "results")


def test_a_cell_holds_the_micro_f1_and_the_mean_judge_score(results, tmp_path):
    scored = [v for v in GPT4O_DEFAULT.values() if v[0] not in (FAILED, MISSING)]
    pooled = [sum(c[0][k] for c in scored) for k in range(4)]
    micro = prf(*pooled)[2]
    macro = sum(prf(*c[0])[2] for c in scored) / len(scored)
    assert abs(micro - macro) > 0.02            # the fixture tells the two apart
    scores = [v[2] for v in GPT4O_DEFAULT.values() if isinstance(v[2], int)]

    out = M.matrix([M.Side(GPT4O, "openai"), M.Side(CLAUDE, "anthropic"), M.Side("absent/model", "absent")],
                   [M.DataSet(GPT4O, "openai", results, 9), M.DataSet("nowhere", "x", tmp_path / "no", 3)],
                   n_bootstrap=50, seed=1)
    cells = {(c["model"], c["data"]): c for c in out["cells"]}
    cell = cells[(GPT4O, GPT4O)]
    assert cell["f1"]["value"] == pytest.approx(micro)
    assert cell["f1"]["n"] == len(scored)
    assert cell["f1"]["low"] <= micro <= cell["f1"]["high"]
    assert cell["score"]["value"] == pytest.approx(sum(scores) / len(scores)) and cell["score"]["n"] == len(scores)
    assert cell["same_family"] is True and cell["instances"] == 9
    assert cell["failed"] == {"f1": {"instances": 1, "steps": {"infer": 1}},
                              "score": {"instances": 1, "steps": {"generate": 1}}}
    assert cells[(CLAUDE, GPT4O)]["same_family"] is False and cells[(CLAUDE, GPT4O)]["f1"] is not None
    assert cells[("absent/model", GPT4O)]["f1"] is None and cells[("absent/model", GPT4O)]["score"] is None
    assert cells[(GPT4O, "nowhere")] == {"model": GPT4O, "data": "nowhere", "same_family": False, "f1": None,
                                         "score": None, "instances": 3, "failed": {}}
    assert out["n_bootstrap"] == 50 and out["seed"] == 1
    assert out["models"][0] == {"label": GPT4O, "family": "openai"}
    assert out["datasets"][0] == {"label": GPT4O, "family": "openai", "instances": 9, "results_dir": str(results)}


def test_cell_text_shows_value_interval_n_and_failures():
    value = {"value": 0.5, "low": 0.25, "high": 0.75, "n": 7}
    assert M.cell_text(value, 100, 1) == "50.0 [25.0, 75.0] (n=7)"
    assert M.cell_text({**value, "low": None, "high": None}, 1, 2) == "0.50 (n=7)"
    failed = {"instances": 2, "steps": {"infer": 1, "match_recall": 1}}
    assert M.cell_text(value, 100, 1, failed) == "50.0 [25.0, 75.0] (n=7; 2 failed at infer, match_recall)"
    assert M.cell_text(None, 100, 1, failed) == "— (2 failed at infer, match_recall)"
    assert M.cell_text(None, 100, 1) == "—"
