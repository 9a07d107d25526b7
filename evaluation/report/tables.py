"""The report's markdown tables: inference and generation in the paper's layouts with the
published numbers beside ours, coverage (what was evaluated, failed, missing) and paired
differences between strategies and models."""
from __future__ import annotations

from collections import Counter

from ..aggregate import answer_endings
from ..console import endings_line
from . import statistics as S
from .analysis import Analysis
from .format import (FLAG, GROUPS, PAPER_EVALUATOR, fmt_ci, fmt_p, fmt_pct, fmt_score,
                     md_table)
from .published import lookup, paper_model_name, scorer_kind
from .results import Outcome, Run


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
    return {"oracle": "Oracle", "oracle_preference": "Oracle preference"}.get(setting, group.capitalize())


def _n_cell(outcome: Outcome) -> str:
    flagged = f" {FLAG}{len(outcome.flagged)}" if outcome.flagged else ""
    return f"{outcome.n}/{outcome.n_applicable}{flagged}"


def _model_cells(an: Analysis, model: str, scorer: str, columns: list[tuple[str, str]], task: str) -> list:
    """The model's cell of each column under ``scorer``, None where it has no ``task`` results."""
    cells = []
    for setting, group in columns:
        run = an.run(model, setting)
        cell = an.cell(run, scorer, group) if run and scorer in run.scorers else None
        cells.append(cell if cell and cell.instance_files and getattr(cell, task) is not None else None)
    return cells


def inference_table(an: Analysis, scorer: str, layout: str, kind: str = "micro") -> str | None:
    gpt_table, pm_table, columns = INFERENCE_LAYOUTS[layout]
    _, matcher = an.scorer_parts(scorer)
    paper_scorer = scorer_kind(scorer, matcher)
    paper_table = pm_table if paper_scorer == "prefmatcher" else gpt_table
    if "+" in scorer and paper_scorer != "prefmatcher":
        paper_table = None  # a matcher the paper never used
    header = ["Model"] + [f"{_column_title(*c)} {m}" for c in columns for m in ("P", "R", "F1", "n")]
    rows = []
    for model in an.models():
        cells = _model_cells(an, model, scorer, columns, "inference")
        if not any(cells):
            continue
        rows.append([an.label(model)] + [text for cell in cells for text in (
            ["—"] * 4 if cell is None else [fmt_ci((cell.micro if kind == "micro" else cell.macro)[m], fmt_pct)
                                             for m in S.INFERENCE_METRICS] + [_n_cell(cell.inference)])])
        paper = paper_model_name(model)
        # The paper says only "averaged across all instances", not micro or macro, so its
        # row stands under both tables.
        if paper and paper_table:
            paper_cells = []
            for setting, group in columns:
                published = lookup(paper, "inference", setting, group, paper_scorer)
                values = published["values"] if published else {}
                paper_cells += [f"{values[m]:.1f}" if m in values else "—" for m in S.INFERENCE_METRICS] + [""]
            rows.append([_paper_label(paper_table, an, scorer)] + paper_cells)
    return md_table(header, rows) if rows else None


def _paper_label(paper_table: str, an: Analysis, scorer: str) -> str:
    """`↳ paper (Table N)`, flagged when our evaluator is not the one the paper used, so a
    reader does not take a gap between judges for a gap between models."""
    evaluator, _ = an.scorer_parts(scorer)
    if evaluator != PAPER_EVALUATOR:
        return f"↳ paper ({paper_table}; evaluator {PAPER_EVALUATOR}, ours {evaluator})"
    return f"↳ paper ({paper_table})"


def generation_table(an: Analysis, scorer: str, layout: str) -> str | None:
    paper_table, columns = GENERATION_LAYOUTS[layout]
    header = ["Model"] + [f"{_column_title(*c)}{suffix}" for c in columns for suffix in ("", " n")]
    rows = []
    for model in an.models():
        cells = _model_cells(an, model, scorer, columns, "generation")
        if not any(cells):
            continue
        rows.append([an.label(model)] + [text for cell in cells for text in (
            ["—", "—"] if cell is None else [fmt_ci(cell.score, fmt_score), _n_cell(cell.generation)])])
        paper = paper_model_name(model)
        if paper:
            paper_cells = []
            for setting, group in columns:
                published = lookup(paper, "generation", setting, group, "gpt-4o")
                paper_cells += [f"{published['values']['score']:.2f}" if published else "—", ""]
            rows.append([_paper_label(paper_table, an, scorer)] + paper_cells)
    return md_table(header, rows) if rows else None


def coverage_section(an: Analysis) -> str:
    header = ["Model", "Setting", "Scorer", "Task", "Instance files", "Expected (results.json)",
              "Evaluated", "Failed", "Missing", "Skipped", "Failed at step",
              "Filtered or refused" + (" (left out)" if an.exclude_filtered else "")]
    rows, errors, endings = [], [], []
    for model in an.models():
        for run in [r for r in an.runs if r.model == model]:
            expected = run.expected_instances
            for scorer in run.scorers or ["(none)"]:
                ended = answer_endings(run.instances.values(), scorer)
                if ended["answers"]:
                    endings.append(f"- {an.label(model)} / {run.setting} / {scorer}: {endings_line(ended)}")
                for task in ("inference", "generation"):
                    if not run.has_task(task, scorer):
                        continue
                    out = an.outcome(run, scorer, task)
                    steps = ", ".join(f"{s}: {c}" for s, c in sorted(out.failed_by_step().items())) or "—"
                    flagged = ", ".join(f"{k}: {c}" for k, c in sorted(Counter(out.flagged.values()).items()))
                    rows.append([an.label(model), run.setting_label, scorer, task, str(len(run.instances)),
                                 "—" if expected is None else str(expected), str(out.n),
                                 str(len(out.failed)), str(len(out.missing)), str(len(out.skipped)), steps,
                                 f"{len(out.flagged)} ({flagged})" if flagged else "0"])
                    for (step, error), count in sorted(Counter(out.failed.values()).items()):
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
        parts.append(md_table(header, rows))
    for run in an.runs:
        if (run.expected_instances or 0) > len(run.instances):
            parts.append(f"\n- {an.label(run.model)} / {run.setting}: results.json counts {run.expected_instances} "
                         f"instances but only {len(run.instances)} instance files exist.")
    if errors:
        parts += ["", "Failure reasons:", ""] + errors
    if endings:
        parts += ["", "How the answers ended (every answer the steps received, re-asks included; "
                      "a filtered, refused, blocked or empty answer without text is asked again once):",
                  ""] + endings
    warnings = [f"- {w}" for run in an.runs for w in run.warnings]
    if warnings:
        parts += ["", "Warnings while reading:", ""] + warnings
    return "\n".join(parts)


def differences_section(an: Analysis) -> str:
    """The paired-differences table. Each row's pair is kept in ``an.difference_rows`` (in
    table order) so that report.html can link the row to its compare view."""
    inf_scorer = an.primary_scorer("inference")
    gen_scorer = an.primary_scorer("generation")
    rows = []
    an.difference_rows = []
    tasks = (("inference", inf_scorer, fmt_pct, "F1 (micro)"), ("generation", gen_scorer, fmt_score, "judge score"))

    def add(label_a: str, label_b: str, what: str, run_a: Run | None, scorer_a: str | None,
            run_b: Run | None, scorer_b: str | None, task: str, fmt) -> None:
        if run_a is None or run_b is None or scorer_a is None or scorer_b is None:
            return
        d = an.paired(run_a, scorer_a, run_b, scorer_b, task)
        if d is None or d.n == 0:
            return
        rows.append([label_a, label_b, what, str(d.n), fmt(d.value_a), fmt(d.value_b),
                     fmt_ci(S.Estimate(d.difference, d.low, d.high, d.n), fmt), fmt_p(d.p_value, an.n_bootstrap)])
        an.difference_rows.append((run_a, scorer_a, run_b, scorer_b, task))

    # Settings (context strategies) against the default setting, per model.
    for model in an.models():
        base = an.run(model, "default")
        for other in [r for r in an.runs if r.model == model and r.setting != "default"]:
            for task, scorer, fmt, what in tasks:
                add(f"{an.label(model)} {other.setting_label}", f"{an.label(model)} default", what, other, scorer, base,
                    scorer, task, fmt)
    # Matcher scorer against the evaluator scorer, same inferred preferences.
    for base_scorer, matcher_scorer in an.matcher_pairs():
        for run in an.runs:
            add(f"{an.label(run.model)} {run.setting} [{matcher_scorer}]", f"same, [{base_scorer}]", "F1 (micro)",
                run, matcher_scorer, run, base_scorer, "inference", fmt_pct)
    # Models against each other, default setting.
    models = [m for m in an.models() if an.run(m, "default")]
    for i, ma in enumerate(models):
        for mb in models[i + 1:]:
            for task, scorer, fmt, what in tasks:
                add(an.label(ma), an.label(mb), what, an.run(ma, "default"), scorer, an.run(mb, "default"), scorer,
                    task, fmt)
    parts = ["## Paired differences", "",
             f"A − B on the instances both have (paired by instance_id), with a paired bootstrap "
             f"95% CI clustered by persona (each resample draws personas, the same for A and B; "
             f"{an.n_bootstrap} resamples, seed {an.seed}) and a two-sided bootstrap p-value. "
             f"Inference uses scorer `{inf_scorer}`, generation `{gen_scorer}` unless named.", ""]
    if rows:
        parts.append(md_table(["A", "B", "Metric", "n paired", "A", "B", "A − B [95% CI]", "p"], rows))
    else:
        parts.append("No pairs to compare.")
    return "\n".join(parts)
