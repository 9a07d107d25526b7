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

from cupid.evaluation.report import statistics as S
from cupid.evaluation.report.analysis import Analysis
from cupid.evaluation.report.format import fmt_ci, fmt_p, fmt_pct, fmt_score
from cupid.evaluation.report.results import Run

TASKS = (("inference", "f1", fmt_pct), ("generation", "j", fmt_score))


def _side(d: S.PairedDifference, fmt, n_bootstrap: int, reverse: bool) -> dict[str, Any]:
    if reverse:
        value_a, value_b = d.value_b, d.value_a
        est = S.Estimate(None if d.difference is None else -d.difference,
                         None if d.high is None else -d.high, None if d.low is None else -d.low, d.n)
    else:
        value_a, value_b = d.value_a, d.value_b
        est = S.Estimate(d.difference, d.low, d.high, d.n)
    return {"n": d.n, "a": fmt(value_a), "b": fmt(value_b), "d": fmt_ci(est, fmt),
            "p": fmt_p(d.p_value, n_bootstrap), "diff": est.value, "low": est.low, "high": est.high}


def _entry(an: Analysis, run_a: Run, scorer_a: str, run_b: Run, scorer_b: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for task, key, fmt in TASKS:
        d = an.paired(run_a, scorer_a, run_b, scorer_b, task)
        if d is not None and d.n:
            out[key] = _side(d, fmt, an.n_bootstrap, False)
            out[key + "_rev"] = _side(d, fmt, an.n_bootstrap, True)
    return out


def paired_entries(an: Analysis, runs: list[Run], scorers: list[str]) -> dict[str, Any]:
    """``{"pairs": {"ra:sa|rb:sb": {...}}, "rows": [...]}`` over the page's run and scorer
    indices (ra:sa before rb:sb in page order; "_rev" holds B − A). ``rows`` names the
    pair of each row of the summary's paired-differences table, in table order."""
    position = {run.key: k for k, run in enumerate(runs)}
    scorer_index = {s: k for k, s in enumerate(scorers)}
    pairs: dict[str, Any] = {}

    def key(ra: int, sa: int, rb: int, sb: int) -> tuple[str, bool]:
        first, second = (ra, sa), (rb, sb)
        if first <= second:
            return f"{ra}:{sa}|{rb}:{sb}", False
        return f"{rb}:{sb}|{ra}:{sa}", True

    def add(run_a: Run, scorer_a: str, run_b: Run, scorer_b: str) -> None:
        ra, rb = position[run_a.key], position[run_b.key]
        sa, sb = scorer_index[scorer_a], scorer_index[scorer_b]
        name, swapped = key(ra, sa, rb, sb)
        if name in pairs:
            return
        if swapped:
            run_a, scorer_a, run_b, scorer_b = run_b, scorer_b, run_a, scorer_a
        entry = _entry(an, run_a, scorer_a, run_b, scorer_b)
        if entry:
            pairs[name] = entry

    for i, run_a in enumerate(runs):
        for scorer_a in run_a.scorers:
            for scorer_b in run_a.scorers:
                if scorer_a < scorer_b:
                    add(run_a, scorer_a, run_a, scorer_b)
            for run_b in runs[i + 1:]:
                if scorer_a in run_b.scorers and (run_a.model == run_b.model or run_a.setting == run_b.setting):
                    add(run_a, scorer_a, run_b, scorer_a)
    rows = []
    for run_a, scorer_a, run_b, scorer_b, task in getattr(an, "difference_rows", []):
        if run_a.key not in position or run_b.key not in position:
            rows.append(None)
            continue
        rows.append({"a": [position[run_a.key], scorer_index[scorer_a]],
                     "b": [position[run_b.key], scorer_index[scorer_b]],
                     "m": "f1" if task == "inference" else "j"})
    return {"pairs": pairs, "rows": rows}
