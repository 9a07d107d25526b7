"""What report.html's compare view needs beyond the per-instance scores: the paired
differences with their intervals, taken from the same ``Analysis.paired`` computation as
the summary's paired-differences table, so the two show the same numbers.

A pair is computed for two runs under one scorer when they share the model or the setting
(the comparisons the summary makes, over every scorer), and for one run under two scorers.
Other pairs (another model in another setting) get per-instance differences only: their
paired interval would mix two effects, and computing every pair grows with the square of
the runs.
"""
from __future__ import annotations

from typing import Any

from . import statistics as S
from .analysis import Analysis
from .format import fmt_ci, fmt_p, fmt_pct, fmt_score
from .results import Run

TASKS = (("inference", "f1", fmt_pct), ("generation", "j", fmt_score))


def _side(d: S.PairedDifference, fmt, n_bootstrap: int, reverse: bool) -> dict[str, Any]:
    """A − B as the page shows it, or B − A when ``reverse``."""
    sign = -1 if reverse else 1
    low, high = (d.high, d.low) if reverse else (d.low, d.high)
    est = S.Estimate(*(None if v is None else sign * v for v in (d.difference, low, high)), d.n)
    value_a, value_b = (d.value_b, d.value_a) if reverse else (d.value_a, d.value_b)
    return {"n": d.n, "a": fmt(value_a), "b": fmt(value_b), "d": fmt_ci(est, fmt),
            "p": fmt_p(d.p_value, n_bootstrap), "diff": est.value, "low": est.low, "high": est.high}


def paired_entries(an: Analysis, runs: list[Run], scorers: list[str]) -> dict[str, Any]:
    """``{"pairs": {"ra:sa|rb:sb": {...}}, "rows": [...]}`` over the page's run and scorer
    indices (ra:sa before rb:sb in page order; "_rev" holds B − A). ``rows`` names the
    pair of each row of the summary's paired-differences table, in table order."""
    position = {run.key: k for k, run in enumerate(runs)}
    scorer_index = {s: k for k, s in enumerate(scorers)}
    pairs: dict[str, Any] = {}

    def add(run_a: Run, scorer_a: str, run_b: Run, scorer_b: str) -> None:
        entry = {}
        for task, key, fmt in TASKS:
            d = an.paired(run_a, scorer_a, run_b, scorer_b, task)
            if d is not None and d.n:
                entry[key] = _side(d, fmt, an.n_bootstrap, False)
                entry[key + "_rev"] = _side(d, fmt, an.n_bootstrap, True)
        if entry:
            a, b = f"{position[run_a.key]}:{scorer_index[scorer_a]}", f"{position[run_b.key]}:{scorer_index[scorer_b]}"
            pairs[f"{a}|{b}"] = entry

    for i, run_a in enumerate(runs):
        own = sorted(run_a.scorers, key=scorer_index.get)
        for k, scorer_a in enumerate(own):
            for scorer_b in own[k + 1:]:
                add(run_a, scorer_a, run_a, scorer_b)
            for run_b in runs[i + 1:]:
                if scorer_a in run_b.scorers and (run_a.model == run_b.model or run_a.setting == run_b.setting):
                    add(run_a, scorer_a, run_b, scorer_a)
    rows = [{"a": [position[run_a.key], scorer_index[scorer_a]], "b": [position[run_b.key], scorer_index[scorer_b]],
             "m": "f1" if task == "inference" else "j"}
            for run_a, scorer_a, run_b, scorer_b, task in getattr(an, "difference_rows", [])]
    return {"pairs": pairs, "rows": rows}
