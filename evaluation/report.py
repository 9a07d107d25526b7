"""Report over a results directory: tables in the paper's layout with bootstrap CIs,
paired differences, failure counts, the paper's published numbers next to ours, and
the figures (P/R/F1 bars, Figures 3, 4, 5 and 9).

    python -m evaluation.report RESULTS_DIR [--output DIR] [--n_bootstrap 1000] [--seed 0]

Reads every directory under RESULTS_DIR holding a run.json (grouped by the model and
setting it names), recomputes every number from the per-instance files, and writes
report.md, report.csv, PNG figures and report.html to --output (default RESULTS_DIR).
"""
from __future__ import annotations

import argparse
import csv
import io
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from evaluation import analysis as A
from evaluation.data import INSTANCE_TYPES, safe_name
from evaluation.metrics import micro_inference
from evaluation.published import display_name, lookup, paper_model_name, scorer_kind
from evaluation.figures import plotter as _plotter
from evaluation.figures import pyplot as _pyplot
from evaluation.report_gaps import Gap, find_gaps, gaps_markdown
from evaluation.report_html import write_html_report
from utils.io import atomic_write_text

# The evaluator (matcher, decomposer, judge) behind every published number (§2.3): a fact of
# the paper, not a setting, so it does not follow config.DEFAULT_EVALUATOR.
PAPER_EVALUATOR = "gpt-4o-2024-11-20"

CSV_COLUMNS = [
    "model", "paper_model", "setting", "scorer", "evaluator", "matcher", "instance_type",
    "instance_files",
    "inference_evaluated", "inference_failed", "inference_missing", "inference_skipped",
    "precision", "precision_low", "precision_high",
    "recall", "recall_low", "recall_high",
    "f1", "f1_low", "f1_high",
    "n_predicted_matched", "n_predicted", "n_true_matched", "n_true",
    "macro_precision", "macro_precision_low", "macro_precision_high",
    "macro_recall", "macro_recall_low", "macro_recall_high",
    "macro_f1", "macro_f1_low", "macro_f1_high",
    "generation_evaluated", "generation_failed", "generation_missing", "generation_skipped",
    "score", "score_low", "score_high",
    "paper_table_inference", "paper_precision", "paper_recall", "paper_f1",
    "paper_table_generation", "paper_score",
    "n_bootstrap", "seed", "run_dirs",
]

GROUPS = ("all",) + INSTANCE_TYPES
# A figure's point or bin resting on fewer instances is drawn hollow (Figure 3) or merged
# into fewer bins (Figure 9): one instance must not look like a trend.
DEFAULT_MIN_BIN_SIZE = 5
TYPE_TITLES = {"all": "All", "consistent": "Consistent", "contrastive": "Contrastive",
               "changing": "Changing"}


# =======================================================================================
# Formatting
# =======================================================================================
def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _with_ci(est: A.Estimate | None, fmt: Callable[[float | None], str]) -> str:
    if est is None or est.value is None:
        return "—"
    if est.low is None:
        return fmt(est.value)
    return f"{fmt(est.value)} [{fmt(est.low)}, {fmt(est.high)}]"


def _p(value: float | None, n_bootstrap: int) -> str:
    if value is None:
        return "—"
    return f"< {1 / n_bootstrap:.3g}" if value == 0 else f"{value:.3f}"


def _r(corr: A.Correlation) -> str:
    if corr.r is None:
        return f"r = n/a ({corr.note}; n = {corr.n})"
    p = "" if corr.p_value is None else (", p < 0.001" if corr.p_value < 0.001 else f", p = {corr.p_value:.3f}")
    note = f"; {corr.note}" if corr.note else ""
    return f"r = {corr.r:.3f}{p} (n = {corr.n}{note})"


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return round(value, 6)
    return value


# =======================================================================================
# The computation
# =======================================================================================
@dataclass
class Cell:
    """One (run, scorer, instance type): everything the tables and the CSV show."""
    run: A.Run
    scorer: str
    group: str
    instance_files: int
    inference: A.Outcome | None = None
    micro: dict[str, A.Estimate] = field(default_factory=dict)
    macro: dict[str, A.Estimate] = field(default_factory=dict)
    pooled: dict | None = None
    generation: A.Outcome | None = None
    score: A.Estimate | None = None


class Analysis:
    """Everything computed from a results directory, with outcome caches."""

    def __init__(self, results_dir: str | Path, n_bootstrap: int = A.DEFAULT_N_BOOTSTRAP,
                 seed: int = 0, n_length_bins: int = 5, min_bin_size: int = DEFAULT_MIN_BIN_SIZE):
        self.results_dir = Path(results_dir)
        self.n_bootstrap = n_bootstrap
        self.seed = seed
        self.n_length_bins = n_length_bins
        self.min_bin_size = min_bin_size
        self.ignored: list[str] = []   # directories with a run.json that are not evaluation runs
        self.runs = A.load_runs(self.results_dir, self.ignored)
        self._outcomes: dict[tuple, A.Outcome] = {}
        self._cells: dict[tuple, Cell] = {}
        self.labels = self._labels()

    # --- basics ------------------------------------------------------------------------
    def _labels(self) -> dict[str, str]:
        models = sorted({run.model for run in self.runs})
        names = {m: display_name(m) for m in models}
        counts = Counter(names.values())
        return {m: (names[m] if counts[names[m]] == 1 else m) for m in models}

    def label(self, model: str) -> str:
        return self.labels.get(model, model)

    def models(self) -> list[str]:
        """Models in the paper's row order (known ones first), then by name."""
        from evaluation.published import PAPER_MODELS
        def order(model: str):
            paper = paper_model_name(model)
            return (0, PAPER_MODELS.index(paper), model) if paper else (1, 0, model)
        return sorted({run.model for run in self.runs}, key=order)

    def run(self, model: str, setting: str) -> A.Run | None:
        for run in self.runs:
            if run.model == model and run.setting == setting:
                return run
        return None

    def outcome(self, run: A.Run, scorer: str, task: str) -> A.Outcome:
        key = (run.key, scorer, task)
        if key not in self._outcomes:
            self._outcomes[key] = A.outcome(run, scorer, task)
        return self._outcomes[key]

    def groups(self, run: A.Run) -> list[str]:
        present = {run.instance_type(i) for i in run.ids()}
        extra = sorted(present - set(INSTANCE_TYPES))
        return ["all"] + [t for t in INSTANCE_TYPES if t in present] + extra

    def boot(self, items, metric: str) -> A.Estimate:
        return A.bootstrap(items, metric, n_bootstrap=self.n_bootstrap, seed=self.seed)

    def cell(self, run: A.Run, scorer: str, group: str) -> Cell:
        key = (run.key, scorer, group)
        if key in self._cells:
            return self._cells[key]
        ids = run.ids(group)
        cell = Cell(run, scorer, group, len(ids))
        if run.has_task("inference", scorer):
            out = self.outcome(run, scorer, "inference").restrict(ids)
            counts = [out.values[i] for i in sorted(out.values)]
            cell.inference = out
            cell.micro = A.bootstrap_inference(counts, "micro", n_bootstrap=self.n_bootstrap, seed=self.seed)
            cell.macro = A.bootstrap_inference(counts, "macro", n_bootstrap=self.n_bootstrap, seed=self.seed)
            cell.pooled = micro_inference(counts)
        if run.has_task("generation", scorer):
            out = self.outcome(run, scorer, "generation").restrict(ids)
            cell.generation = out
            cell.score = self.boot([out.values[i] for i in sorted(out.values)], "mean")
        self._cells[key] = cell
        return cell

    # --- scorers -----------------------------------------------------------------------
    def scorer_parts(self, scorer: str) -> tuple[str, str]:
        for run in self.runs:
            for data in run.instances.values():
                entry = (data.get("evaluations") or {}).get(scorer)
                if isinstance(entry, dict) and entry.get("evaluator"):
                    return str(entry["evaluator"]), str(entry.get("matcher") or entry["evaluator"])
        evaluator, _, matcher = scorer.partition("+")
        return evaluator, matcher or evaluator

    def scorers(self, task: str) -> list[str]:
        found = {s for run in self.runs for s in run.scorers if run.has_task(task, s)}
        return sorted(found, key=lambda s: ("+" in s, s))

    def primary_scorer(self, task: str) -> str | None:
        """The plain (evaluator-matched) scorer most runs have; model-level figures use it."""
        counts = Counter(s for run in self.runs for s in run.scorers
                         if run.has_task(task, s) and "+" not in s)
        if not counts:
            counts = Counter(s for run in self.runs for s in run.scorers if run.has_task(task, s))
        if not counts:
            return None
        return sorted(counts, key=lambda s: (-counts[s], s))[0]

    def matcher_pairs(self) -> list[tuple[str, str]]:
        """(evaluator scorer, evaluator+matcher scorer) pairs found in the same runs."""
        pairs = set()
        for run in self.runs:
            names = set(run.scorers)
            for scorer in names:
                base = scorer.partition("+")[0]
                if "+" in scorer and base in names:
                    pairs.add((base, scorer))
        return sorted(pairs)

    # --- CSV rows ----------------------------------------------------------------------
    def csv_rows(self) -> list[dict]:
        rows = []
        for model in self.models():
            for run in [r for r in self.runs if r.model == model]:
                for scorer in (run.scorers or ["(none)"]):
                    evaluator, matcher = self.scorer_parts(scorer)
                    for group in self.groups(run):
                        rows.append(self._csv_row(run, scorer, evaluator, matcher, group))
        return rows

    def _csv_row(self, run: A.Run, scorer: str, evaluator: str, matcher: str, group: str) -> dict:
        cell = self.cell(run, scorer, group)
        paper = paper_model_name(run.model)
        row: dict[str, Any] = {
            "model": run.model, "paper_model": paper, "setting": run.setting, "scorer": scorer,
            "evaluator": evaluator, "matcher": matcher, "instance_type": group,
            "instance_files": cell.instance_files, "n_bootstrap": self.n_bootstrap, "seed": self.seed,
            "run_dirs": ";".join(str(d) for d in run.directories),
        }
        if cell.inference is not None:
            row.update(inference_evaluated=cell.inference.n, inference_failed=len(cell.inference.failed),
                       inference_missing=len(cell.inference.missing),
                       inference_skipped=len(cell.inference.skipped))
            for name in A.INFERENCE_METRICS:
                for prefix, ests in (("", cell.micro), ("macro_", cell.macro)):
                    est = ests[name]
                    row[f"{prefix}{name}"], row[f"{prefix}{name}_low"], row[f"{prefix}{name}_high"] = \
                        est.value, est.low, est.high
            for key in ("n_predicted_matched", "n_predicted", "n_true_matched", "n_true"):
                row[key] = cell.pooled[key]
            published = lookup(paper, "inference", run.setting, group, scorer_kind(scorer, matcher))
            if published:
                row["paper_table_inference"] = published["table"]
                for name in A.INFERENCE_METRICS:
                    row[f"paper_{name}"] = published["values"][name] / 100
        if cell.generation is not None:
            row.update(generation_evaluated=cell.generation.n, generation_failed=len(cell.generation.failed),
                       generation_missing=len(cell.generation.missing),
                       generation_skipped=len(cell.generation.skipped),
                       score=cell.score.value, score_low=cell.score.low, score_high=cell.score.high)
            published = lookup(paper, "generation", run.setting, group, "gpt-4o")
            if published:
                row["paper_table_generation"] = published["table"]
                row["paper_score"] = published["values"]["score"]
        return row


# =======================================================================================
# Markdown sections
# =======================================================================================
INFERENCE_LAYOUTS = {
    # name: (paper table for gpt-4o scorer, for prefmatcher scorer, columns)
    "main": ("Table 1", "Table 11", [("default", g) for g in GROUPS] + [("oracle", "all")]),
    "summary": ("Table 9", None, [("summary", g) for g in GROUPS]),
}
GENERATION_LAYOUTS = {
    "main": ("Table 3", [("default", g) for g in GROUPS] + [("oracle", "all"), ("oracle_preference", "all")]),
    "summary": ("Table 10", [("summary", g) for g in GROUPS]),
}


def _column_title(setting: str, group: str) -> str:
    if setting == "oracle":
        return "Oracle"
    if setting == "oracle_preference":
        return "Oracle preference"
    return TYPE_TITLES.get(group, group)


def _n_cell(outcome: A.Outcome | None) -> str:
    return "—" if outcome is None else f"{outcome.n}/{outcome.n_applicable}"


def inference_table(an: Analysis, scorer: str, layout: str, kind: str = "micro") -> str | None:
    gpt_table, pm_table, columns = INFERENCE_LAYOUTS[layout]
    _, matcher = an.scorer_parts(scorer)
    paper_scorer = scorer_kind(scorer, matcher)
    paper_table = pm_table if paper_scorer == "prefmatcher" else gpt_table
    if "+" in scorer and paper_scorer != "prefmatcher":
        paper_table = None  # a matcher the paper never used
    header = ["Model"]
    for setting, group in columns:
        title = _column_title(setting, group)
        header += [f"{title} P", f"{title} R", f"{title} F1", f"{title} n"]
    rows = []
    for model in an.models():
        cells = []
        any_data = False
        for setting, group in columns:
            run = an.run(model, setting)
            cell = an.cell(run, scorer, group) if run and scorer in run.scorers else None
            if cell is None or cell.inference is None or cell.instance_files == 0:
                cells += ["—"] * 4
                continue
            any_data = True
            ests = cell.micro if kind == "micro" else cell.macro
            cells += [_with_ci(ests[m], _pct) for m in A.INFERENCE_METRICS]
            cells.append(_n_cell(cell.inference))
        if not any_data:
            continue
        rows.append([an.label(model)] + cells)
        paper = paper_model_name(model)
        # The paper says only "averaged across all instances", not micro or macro, so its
        # row stands under both tables.
        if paper and paper_table:
            paper_cells = []
            for setting, group in columns:
                published = lookup(paper, "inference", setting, group, paper_scorer)
                values = published["values"] if published else {}
                paper_cells += [f"{values[m]:.1f}" if m in values else "—" for m in A.INFERENCE_METRICS] + [""]
            rows.append([_paper_label(paper_table, an, scorer)] + paper_cells)
    if not rows:
        return None
    return _md_table(header, rows)


def _paper_label(paper_table: str, an: Analysis, scorer: str) -> str:
    """`↳ paper (Table N)`, flagged when our evaluator is not the one the paper used, so a
    reader does not take a gap between judges for a gap between models."""
    evaluator, _ = an.scorer_parts(scorer)
    if evaluator != PAPER_EVALUATOR:
        return f"↳ paper ({paper_table}; evaluator {PAPER_EVALUATOR}, ours {evaluator})"
    return f"↳ paper ({paper_table})"


def generation_table(an: Analysis, scorer: str, layout: str) -> str | None:
    paper_table, columns = GENERATION_LAYOUTS[layout]
    header = ["Model"]
    for setting, group in columns:
        title = _column_title(setting, group)
        header += [title, f"{title} n"]
    rows = []
    for model in an.models():
        cells, any_data = [], False
        for setting, group in columns:
            run = an.run(model, setting)
            cell = an.cell(run, scorer, group) if run and scorer in run.scorers else None
            if cell is None or cell.generation is None or cell.instance_files == 0:
                cells += ["—", "—"]
                continue
            any_data = True
            cells += [_with_ci(cell.score, _score), _n_cell(cell.generation)]
        if not any_data:
            continue
        rows.append([an.label(model)] + cells)
        paper = paper_model_name(model)
        if paper:
            paper_cells = []
            for setting, group in columns:
                published = lookup(paper, "generation", setting, group, "gpt-4o")
                paper_cells += [f"{published['values']['score']:.2f}" if published else "—", ""]
            rows.append([_paper_label(paper_table, an, scorer)] + paper_cells)
    if not rows:
        return None
    return _md_table(header, rows)


def coverage_section(an: Analysis) -> str:
    header = ["Model", "Setting", "Scorer", "Task", "Instance files", "Expected (results.json)",
              "Evaluated", "Failed", "Missing", "Skipped", "Failed at step"]
    rows, errors = [], []
    for model in an.models():
        for run in [r for r in an.runs if r.model == model]:
            expected = run.expected_instances
            for scorer in run.scorers or ["(none)"]:
                for task in ("inference", "generation"):
                    if not run.has_task(task, scorer):
                        continue
                    out = an.outcome(run, scorer, task)
                    steps = ", ".join(f"{s}: {c}" for s, c in sorted(out.failed_by_step().items())) or "—"
                    rows.append([an.label(model), run.setting, scorer, task, str(len(run.instances)),
                                 "—" if expected is None else str(expected), str(out.n),
                                 str(len(out.failed)), str(len(out.missing)), str(len(out.skipped)), steps])
                    for (step, error), count in sorted(out.errors().items()):
                        short = " ".join(error.split())[:160] or "(no error text)"
                        errors.append(f"- {an.label(model)} / {run.setting} / {scorer} / {task}: "
                                      f"`{step}` failed on {count} instance(s): {short}")
    parts = ["## Coverage and failures", "",
             "Every number in this report rests only on the instances whose steps are all done "
             "(\"Evaluated\"). Instances whose steps failed (\"Failed\") or have not run yet "
             "(\"Missing\") are left out and counted here; \"Skipped\" instances are those the "
             "setting does not apply to (oracle: no prior session holds the current preference). "
             "Table cells give `n` = evaluated / (instance files − skipped).", ""]
    if rows:
        parts.append(_md_table(header, rows))
    incomplete = [(r, r.expected_instances) for r in an.runs
                  if r.expected_instances is not None and r.expected_instances > len(r.instances)]
    for run, expected in incomplete:
        parts.append(f"\n- {an.label(run.model)} / {run.setting}: results.json counts {expected} "
                     f"instances but only {len(run.instances)} instance files exist.")
    if errors:
        parts += ["", "Failure reasons:", ""] + errors
    warnings = [f"- {w}" for run in an.runs for w in run.warnings]
    if warnings:
        parts += ["", "Warnings while reading:", ""] + warnings
    return "\n".join(parts)


def differences_section(an: Analysis) -> str:
    inf_scorer = an.primary_scorer("inference")
    gen_scorer = an.primary_scorer("generation")
    rows = []

    def add(label_a: str, label_b: str, what: str, a: dict, b: dict, metric: str, fmt):
        d = A.paired_bootstrap(a, b, metric, n_bootstrap=an.n_bootstrap, seed=an.seed)
        if d.n == 0:
            return
        rows.append([label_a, label_b, what, str(d.n), fmt(d.value_a), fmt(d.value_b),
                     _with_ci(A.Estimate(d.difference, d.low, d.high, d.n), fmt), _p(d.p_value, an.n_bootstrap)])

    def values(run: A.Run | None, scorer: str | None, task: str) -> dict | None:
        if run is None or scorer is None or not run.has_task(task, scorer) or scorer not in run.scorers:
            return None
        return an.outcome(run, scorer, task).values

    # Settings against the default setting, per model.
    for model in an.models():
        base = an.run(model, "default")
        for setting in ("oracle", "summary", "oracle_preference"):
            other = an.run(model, setting)
            if base is None or other is None:
                continue
            for task, scorer, metric, fmt, what in (
                    ("inference", inf_scorer, "micro_f1", _pct, "F1 (micro)"),
                    ("generation", gen_scorer, "mean", _score, "judge score")):
                a, b = values(other, scorer, task), values(base, scorer, task)
                if a and b:
                    add(f"{an.label(model)} {setting}", f"{an.label(model)} default", what, a, b, metric, fmt)
    # Matcher scorer against the evaluator scorer, same inferred preferences.
    for base_scorer, matcher_scorer in an.matcher_pairs():
        for run in an.runs:
            a, b = values(run, matcher_scorer, "inference"), values(run, base_scorer, "inference")
            if a and b:
                add(f"{an.label(run.model)} {run.setting} [{matcher_scorer}]",
                    f"same, [{base_scorer}]", "F1 (micro)", a, b, "micro_f1", _pct)
    # Models against each other, default setting.
    models = [m for m in an.models() if an.run(m, "default")]
    for i, ma in enumerate(models):
        for mb in models[i + 1:]:
            ra, rb = an.run(ma, "default"), an.run(mb, "default")
            for task, scorer, metric, fmt, what in (
                    ("inference", inf_scorer, "micro_f1", _pct, "F1 (micro)"),
                    ("generation", gen_scorer, "mean", _score, "judge score")):
                a, b = values(ra, scorer, task), values(rb, scorer, task)
                if a and b:
                    add(an.label(ma), an.label(mb), what, a, b, metric, fmt)
    parts = ["## Paired differences", "",
             f"A − B on the instances both have (paired by instance_id), with a paired bootstrap "
             f"95% CI ({an.n_bootstrap} resamples, seed {an.seed}) and a two-sided bootstrap p-value. "
             f"Inference uses scorer `{inf_scorer}`, generation `{gen_scorer}` unless named.", ""]
    if rows:
        parts.append(_md_table(["A", "B", "Metric", "n paired", "A", "B", "A − B [95% CI]", "p"], rows))
    else:
        parts.append("No pairs to compare.")
    return "\n".join(parts)


# =======================================================================================
# Figure data
# =======================================================================================
@dataclass
class FigureData:
    name: str
    title: str
    caption: str
    table: str = ""
    payload: dict = field(default_factory=dict)
    file: str | None = None
    skipped: str | None = None


def _default_runs(an: Analysis, scorer: str | None, task: str) -> tuple[list[A.Run], list[str]]:
    used, left = [], []
    for model in an.models():
        run = an.run(model, "default")
        if run is None:
            continue
        if scorer and scorer in run.scorers and run.has_task(task, scorer):
            used.append(run)
        else:
            left.append(an.label(model))
    return used, left


def _instance_f1(outcome: A.Outcome) -> dict[str, float]:
    return {i: A.instance_prf(c)[2] for i, c in outcome.values.items()}


def prf_bars_data(an: Analysis) -> FigureData:
    scorer = an.primary_scorer("inference")
    runs, left = _default_runs(an, scorer, "inference")
    fig = FigureData("fig_prf1", "Precision, recall and F1 per model (default setting, all instances)", "")
    if not runs:
        fig.skipped = "no default-setting inference results"
        return fig
    bars = []
    for run in runs:
        cell = an.cell(run, scorer, "all")
        bars.append({"label": an.label(run.model), "n": cell.inference.n, "files": cell.inference.n_applicable,
                     **{m: cell.micro[m] for m in A.INFERENCE_METRICS}})
    fig.payload = {"bars": bars}
    n_total = sum(b["n"] for b in bars)
    fig.caption = (f"Micro P/R/F1 with 95% bootstrap CIs, scorer `{scorer}`. Rests on {n_total} instance "
                   f"results from {len(bars)} model(s) (" +
                   ", ".join(f"{b['label']}: {b['n']}/{b['files']}" for b in bars) + ")." +
                   (f" Left out (no results under this scorer): {', '.join(left)}." if left else ""))
    return fig


def position_data(an: Analysis) -> FigureData:
    """Figure 3: mean F1 across models against the mean position of relevant sessions."""
    scorer = an.primary_scorer("inference")
    runs, left_models = _default_runs(an, scorer, "inference")
    fig = FigureData("fig3_position", "Figure 3: F1 against the mean position of relevant sessions", "")
    if not runs:
        fig.skipped = "no default-setting inference results"
        return fig
    points: dict[tuple[str, str], float] = {}   # (model, instance) -> position
    f1s: dict[tuple[str, str], float] = {}
    no_relevant = 0
    for run in runs:
        out = an.outcome(run, scorer, "inference")
        f1 = _instance_f1(out)
        for instance_id in out.values:
            position = A.mean_position(A.history_of(run.instances[instance_id]).get("relevant_positions"))
            if position is None:
                no_relevant += 1
                continue
            points[(run.model, instance_id)] = position
            f1s[(run.model, instance_id)] = f1[instance_id]
    groups = A.group_by_value(points, 0.5)
    overall = A.bin_means(groups, f1s)
    per_model = {}
    for run in runs:
        mine = {k: v for k, v in f1s.items() if k[0] == run.model}
        per_model[an.label(run.model)] = A.bin_means(groups, mine)
    header = ["Mean position", "n (model × instance)", "Mean F1, all models"] + list(per_model)
    rows = []
    for i, g in enumerate(groups):
        rows.append([f"{g.low:g}", str(overall[i][1]), _pct(overall[i][0])] +
                    [f"{_pct(v[i][0])} (n={v[i][1]})" for v in per_model.values()])
    fig.table = _md_table(header, rows)
    fig.payload = {"x": [g.low for g in groups], "overall": overall, "per_model": per_model,
                   "min_n": an.min_bin_size}
    fig.caption = (f"Per-instance F1 (scorer `{scorer}`, default setting) averaged over models and "
                   f"instances, grouped by the mean 1-based position of the sessions that hold the "
                   f"current preference (rounded to 0.5). Rests on {len(points)} (model × instance) "
                   f"results from {len(runs)} model(s); {no_relevant} left out because their history "
                   f"has no relevant session. Points resting on fewer than {an.min_bin_size} "
                   f"instances are drawn hollow." +
                   (f" Models left out (no results under this scorer): {', '.join(left_models)}." if left_models else ""))
    return fig


def length_data(an: Analysis) -> FigureData:
    """Figure 9: per-model F1 and judge score against history length, equal-size bins."""
    inf_scorer, gen_scorer = an.primary_scorer("inference"), an.primary_scorer("generation")
    inf_runs, _ = _default_runs(an, inf_scorer, "inference")
    gen_runs, _ = _default_runs(an, gen_scorer, "generation")
    fig = FigureData("fig9_length", "Figure 9: results against the length of the prior sessions", "")
    if not inf_runs and not gen_runs:
        fig.skipped = "no default-setting results"
        return fig
    tokens: dict[str, float] = {}
    no_length = set()
    for run in {r.key: r for r in inf_runs + gen_runs}.values():
        for instance_id, data in run.instances.items():
            value = A.history_of(data).get("history_tokens")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                tokens.setdefault(instance_id, float(value))
            else:
                no_length.add(instance_id)
    no_length -= set(tokens)
    n_bins = max(1, min(an.n_length_bins, len(tokens) // an.min_bin_size))
    bins = A.equal_size_bins(tokens, n_bins)
    bins_note = "" if n_bins == an.n_length_bins else (
        f" {an.n_length_bins} bins were asked for; {n_bins} drawn so that a bin holds at least "
        f"{an.min_bin_size} instances ({len(tokens)} here; `--min_bin_size` sets the floor).")
    small = [b for b in bins if b.n < an.min_bin_size]
    if small:
        bins_note += (f" {len(small)} bin(s) hold fewer than {an.min_bin_size} instances (too few "
                      f"instances, or ties at a boundary); their points are drawn hollow.")
    panels = {}
    for task, runs, scorer in (("inference", inf_runs, inf_scorer), ("generation", gen_runs, gen_scorer)):
        lines = {}
        for run in runs:
            out = an.outcome(run, scorer, task)
            ys = _instance_f1(out) if task == "inference" else dict(out.values)
            lines[an.label(run.model)] = A.bin_means(bins, ys)
        panels[task] = lines
    header = ["Bin (history tokens)", "Instances"]
    header += [f"{m} F1" for m in panels["inference"]] + [f"{m} score" for m in panels["generation"]]
    rows = []
    for i, b in enumerate(bins):
        row = [f"{b.low:g}" if b.low == b.high else f"{b.low:g}–{b.high:g}", str(b.n)]
        row += [f"{_pct(v[i][0])} (n={v[i][1]})" for v in panels["inference"].values()]
        row += [f"{_score(v[i][0])} (n={v[i][1]})" for v in panels["generation"].values()]
        rows.append(row)
    fig.table = _md_table(header, rows)
    fig.payload = {"bins": bins, "panels": panels, "min_n": an.min_bin_size}
    n_inf = sum(n for v in panels["inference"].values() for _, n in v)
    n_gen = sum(n for v in panels["generation"].values() for _, n in v)
    fig.caption = (f"Instances split into {len(bins)} equal-size bins by history length (each bin's "
                   f"lengths exceed the previous bin's maximum; Appendix F.4); per bin, the mean per-instance "
                   f"F1 (scorer `{inf_scorer}`) and mean judge score (`{gen_scorer}`) per model, default "
                   f"setting. Rests on {n_inf} inference and {n_gen} generation results over "
                   f"{len(tokens)} instances; {len(no_length)} instance(s) without a history length left out."
                   + bins_note)
    return fig


def matcher_data(an: Analysis) -> list[FigureData]:
    """Figure 4 / Table 11: F1 with the evaluator as matcher against F1 with another matcher."""
    figures = []
    for base, other in an.matcher_pairs():
        fig = FigureData(f"fig4_matcher_{safe_name(other.partition('+')[2] or other)}",
                         f"Figure 4: F1 with `{base}` vs `{other}`", "")
        model_points, cell_points = [], []
        instance_x, instance_y = [], []
        for model in an.models():
            for run in [r for r in an.runs if r.model == model]:
                if base not in run.scorers or other not in run.scorers:
                    continue
                a, b = an.outcome(run, base, "inference"), an.outcome(run, other, "inference")
                common = sorted(set(a.values) & set(b.values))
                if not common:
                    continue
                for group in an.groups(run):
                    ids = [i for i in common if group == "all" or run.instance_type(i) == group]
                    if ids:
                        fa = micro_inference([a.values[i] for i in ids])["f1"]
                        fb = micro_inference([b.values[i] for i in ids])["f1"]
                        cell_points.append((an.label(model), run.setting, group, fa, fb, len(ids)))
                        if group == "all" and run.setting == "default":
                            model_points.append((an.label(model), fa, fb, len(ids)))
                for i in common:
                    instance_x.append(A.instance_prf(a.values[i])[2])
                    instance_y.append(A.instance_prf(b.values[i])[2])
        if not cell_points:
            fig.skipped = "no instance has results under both scorers"
            figures.append(fig)
            continue
        r_models = A.pearson([p[1] for p in model_points], [p[2] for p in model_points])
        r_cells = A.pearson([p[3] for p in cell_points], [p[4] for p in cell_points])
        r_instances = A.pearson(instance_x, instance_y)
        rows = [[m, s, g, _pct(x), _pct(y), str(n)] for m, s, g, x, y, n in cell_points]
        fig.table = (f"- Model-wise (default setting, all instances): {_r(r_models)}\n"
                     f"- Every (model, setting, instance type) cell: {_r(r_cells)}\n"
                     f"- Per instance (per-instance F1, all runs): {_r(r_instances)}\n\n" +
                     _md_table(["Model", "Setting", "Instances", f"F1 `{base}`", f"F1 `{other}`", "n"], rows))
        fig.payload = {"models": model_points, "instances": (instance_x, instance_y),
                       "r_models": r_models, "r_instances": r_instances, "base": base, "other": other}
        fig.caption = (f"Micro F1 of the same inferred preferences matched by `{base}` and by `{other}`, on "
                       f"the instances both scored. Rests on {len(model_points)} model(s) (model-wise r) and "
                       f"{len(instance_x)} instance results (per-instance r). The paper reports r = 0.997 "
                       f"model-wise for GPT-4o vs PrefMatcher-7B.")
        figures.append(fig)
    return figures


def inference_generation_data(an: Analysis) -> FigureData:
    """Figure 5: model-wise inference F1 against generation score."""
    inf_scorer, gen_scorer = an.primary_scorer("inference"), an.primary_scorer("generation")
    fig = FigureData("fig5_inference_vs_generation", "Figure 5: inference F1 against generation score", "")
    points = []
    for model in an.models():
        run = an.run(model, "default")
        if run is None or inf_scorer not in run.scorers or gen_scorer not in run.scorers:
            continue
        if not (run.has_task("inference", inf_scorer) and run.has_task("generation", gen_scorer)):
            continue
        f1 = an.cell(run, inf_scorer, "all")
        score = an.cell(run, gen_scorer, "all")
        if f1.micro["f1"].value is None or score.score.value is None:
            continue
        points.append((an.label(model), f1.micro["f1"].value, score.score.value,
                       f1.inference.n, score.generation.n))
    if not points:
        fig.skipped = "no model has both inference and generation results in the default setting"
        return fig
    corr = A.pearson([p[1] for p in points], [p[2] for p in points])
    fig.table = f"- {_r(corr)}\n\n" + _md_table(
        ["Model", "F1 (micro)", "Judge score", "n inference", "n generation"],
        [[m, _pct(x), _score(y), str(ni), str(ng)] for m, x, y, ni, ng in points])
    fig.payload = {"points": points, "corr": corr}
    fig.caption = (f"One point per model (default setting, all instances; F1 scorer `{inf_scorer}`, judge "
                   f"`{gen_scorer}`). Rests on {len(points)} model(s), "
                   f"{sum(p[3] for p in points)} inference and {sum(p[4] for p in points)} generation "
                   f"results. The paper reports r = 0.764 (p = 0.010) over its 10 models.")
    return fig


# =======================================================================================
# Assembly
# =======================================================================================
@dataclass
class ReportFiles:
    markdown: Path
    csv: Path
    figures: list[Path]
    analysis: Analysis | None = None
    gaps: list[Gap] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def render_csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in CSV_COLUMNS})
    return buffer.getvalue()


def build_report(results_dir: str | Path, output_dir: str | Path | None = None, *,
                 n_bootstrap: int = A.DEFAULT_N_BOOTSTRAP, seed: int = 0,
                 n_length_bins: int = 5, min_bin_size: int = DEFAULT_MIN_BIN_SIZE,
                 figures: bool = True) -> ReportFiles:
    results_dir = Path(results_dir)
    output = Path(output_dir) if output_dir is not None else results_dir
    an = Analysis(results_dir, n_bootstrap=n_bootstrap, seed=seed, n_length_bins=n_length_bins,
                  min_bin_size=min_bin_size)
    if not an.runs:
        notes = f" ({'; '.join(an.ignored)})" if an.ignored else ""
        raise FileNotFoundError(f"{results_dir}: no evaluation run directories (no run.json of an "
                                f"evaluation run found){notes}")
    gaps = find_gaps(an, results_dir)
    output.mkdir(parents=True, exist_ok=True)

    md = ["# CUPID evaluation report", "",
          f"Results: `{results_dir}` · generated {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
          "",
          f"All numbers are recomputed from the per-instance files. Inference P/R/F1 are percentages; "
          f"**micro** pools the match sums and checklist sizes over instances (as the released "
          f"results.json), **macro** averages per-instance scores (the paper's §2.3 formula). Brackets "
          f"are 95% percentile bootstrap intervals over instances ({n_bootstrap} resamples, seed {seed}). "
          f"`n` = evaluated instances / instances that apply (see Coverage). Rows `↳ paper` hold the published numbers "
          f"(only for the exact model versions of the paper's Table 8; the paper used 756 instances and "
          f"{PAPER_EVALUATOR} as evaluator; the label says so when ours differs). The paper reports its inference "
          f"numbers \"averaged across all instances\" without saying micro or macro, so its row stands under both.", ""]

    md += ["## Runs", ""]
    md.append(_md_table(["Model", "Paper name", "Setting", "Instance files", "Scorers", "Tasks", "Directory"],
                        [[r.model, paper_model_name(r.model) or "—", r.setting, str(len(r.instances)),
                          ", ".join(f"`{s}`" for s in r.scorers) or "—", ", ".join(sorted(r.tasks)) or "—",
                          "; ".join(str(d.relative_to(results_dir)) if d != results_dir else "."
                                    for d in r.directories)]
                         for m in an.models() for r in an.runs if r.model == m]))
    md += ["", coverage_section(an), "", gaps_markdown(gaps, an.ignored), ""]

    md += ["## Inference", ""]
    for scorer in an.scorers("inference"):
        _, matcher = an.scorer_parts(scorer)
        kind = scorer_kind(scorer, matcher)
        main = "Table 11" if kind == "prefmatcher" else "Table 1"
        for layout, title in (("main", f"{main} layout"), ("summary", "Table 9 layout (summary setting)")):
            if layout == "summary" and "+" in scorer:
                title = "Summary setting"
            for avg in ("micro", "macro"):
                table = inference_table(an, scorer, layout, avg)
                if table:
                    md += [f"### {title} — scorer `{scorer}`, {avg}", "", table, ""]
    md += ["## Generation", ""]
    gen_scorers = an.scorers("generation")
    for scorer in gen_scorers:
        if "+" in scorer and scorer.partition("+")[0] in gen_scorers:
            continue  # the same judge as the evaluator's own scorer
        for layout, title in (("main", "Table 3 layout"), ("summary", "Table 10 layout (summary setting)")):
            table = generation_table(an, scorer, layout)
            if table:
                md += [f"### {title} — judge `{scorer}`", "", table, ""]

    md += [differences_section(an), ""]

    figure_data = [prf_bars_data(an), position_data(an), length_data(an), *matcher_data(an),
                   inference_generation_data(an)]
    written: list[Path] = []
    plot_error = None
    if figures:
        try:
            _pyplot()
        except ImportError as exc:
            plot_error = f"figures not drawn: matplotlib is not installed ({exc})"
    md += ["## Figures", ""]
    if plot_error:
        md += [plot_error, ""]
    for data in figure_data:
        md += [f"### {data.title}", ""]
        if data.skipped:
            md += [f"Not drawn: {data.skipped}.", ""]
            continue
        if figures and not plot_error:
            path = output / f"{data.name}.png"
            _plotter(data.name)(data, path)
            written.append(path)
            md += [f"![{data.title}]({path.name})", ""]
        md += [data.caption, ""]
        if data.table:
            md += [data.table, ""]

    md_path, csv_path = output / "report.md", output / "report.csv"
    atomic_write_text(csv_path, render_csv(an.csv_rows()))
    atomic_write_text(md_path, "\n".join(md).rstrip() + "\n")
    return ReportFiles(md_path, csv_path, written, an, gaps, an.ignored)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", help="a results directory (searched recursively for run.json)")
    parser.add_argument("--output", default=None, help="where to write report.md, report.csv and the "
                                                       "figures (default: RESULTS_DIR)")
    parser.add_argument("--n_bootstrap", type=int, default=A.DEFAULT_N_BOOTSTRAP,
                        help="bootstrap resamples for the confidence intervals (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument("--n_length_bins", type=int, default=5,
                        help="equal-size bins of history length for Figure 9 (default 5)")
    parser.add_argument("--min_bin_size", type=int, default=DEFAULT_MIN_BIN_SIZE,
                        help="fewest instances behind a figure's bin or point before it is merged "
                             f"(Figure 9) or drawn hollow (default {DEFAULT_MIN_BIN_SIZE})")
    parser.add_argument("--no_figures", action="store_true", help="write report.md and report.csv only")
    parser.add_argument("--no_html", action="store_true", help="do not write report.html")
    parser.add_argument("--data_dir", "--data", dest="data", action="append", default=None,
                        help="the instances the runs evaluated, for report.html's sessions and ground "
                             "truth (default: each run.json's data_source)")
    args = parser.parse_args(argv)
    if args.n_bootstrap < 1:
        parser.error("--n_bootstrap must be at least 1")
    if args.n_length_bins < 1:
        parser.error("--n_length_bins must be at least 1")
    if args.min_bin_size < 1:
        parser.error("--min_bin_size must be at least 1")
    if not Path(args.results_dir).is_dir():
        parser.error(f"{args.results_dir}: not a directory")
    try:
        files = build_report(args.results_dir, args.output, n_bootstrap=args.n_bootstrap, seed=args.seed,
                             n_length_bins=args.n_length_bins, min_bin_size=args.min_bin_size,
                             figures=not args.no_figures)
        html = None if args.no_html else write_html_report(
            args.results_dir, files.markdown.parent, runs=files.analysis.runs,
            model_order=files.analysis.models(), labels=files.analysis.labels, data_paths=args.data)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {files.markdown}")
    print(f"wrote {files.csv}")
    for path in files.figures:
        print(f"wrote {path}")
    if html is not None:
        print(f"wrote {html}")
    for note in files.ignored:
        print(f"note: {note}")
    if files.gaps:
        print(f"\nNot in this report ({len(files.gaps)}; see report.md, \"What this report cannot show yet\"):")
        for gap in files.gaps:
            print("\n".join(gap.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
