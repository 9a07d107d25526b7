"""The report's context strategies (docs/strategies.md): what each strategy kept of the prior
sessions (session recall and precision, measured apart from what the model made of it) and
each model x strategy compared with the default setting (the floor: every session) and the
oracle (the ceiling: only the relevant ones), as paired differences with persona-clustered
intervals; and the figure's data."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import statistics as S
from .format import fmt_ci, fmt_pct, fmt_score, md_table
from .results import Run

if TYPE_CHECKING:
    from .analysis import Analysis
    from .figure_data import FigureData

def _models_with_strategies(an: "Analysis") -> list[str]:
    return [m for m in an.models() if sum(r.model == m for r in an.runs) > 1]


def _runs_of(an: "Analysis", model: str) -> list[Run]:
    """A model's runs: the default (floor) first, then the strategies, the oracle (ceiling) last."""
    runs = [r for r in an.runs if r.model == model]
    return sorted(runs, key=lambda r: (r.setting != "default", r.setting == "oracle", r.setting == "oracle_preference"))


def strategies_section(an: "Analysis") -> str | None:
    """report.md's "Context strategies"; None when no model was run with more than one."""
    models = _models_with_strategies(an)
    if not models:
        return None
    parts = ["## Context strategies", "",
             "What each strategy showed the model of the prior sessions, measured apart from what the "
             "model made of it: **session recall** is the share of an instance's relevant sessions (those "
             "holding the current preference) that were shown, averaged over the instances that have one; "
             "**session precision** the share of the shown sessions that are relevant. \"History tokens\" "
             "estimates the history text shown (4 characters a token); \"model input tokens\" are the "
             "evaluated model's prompt tokens per instance as its provider counted them (infer, generate, "
             "summarize). Brackets: 95% intervals resampling personas. A strategy that only renders "
             "text names no sessions (—). \"(uses labels)\": a strategy that read the instances' labels "
             "(the oracle's relevant sessions, the true preference), not a blind one.", "", "### What each strategy kept", ""]
    header = ["Models", "Strategy", "Sessions shown", "Session recall"] + \
             [f"Recall {g}" for g in ("consistent", "contrastive", "changing")] + \
             ["Session precision", "History tokens", "Instances"]
    rows: dict[tuple, list[str]] = {}  # a strategy's row, with the models it is the same for
    for model in models:
        for run in _runs_of(an, model):
            cell = an.cell(run, (run.scorers or [""])[0], "all")
            s = cell.selection
            by_type = [fmt_ci(an.cell(run, (run.scorers or [""])[0], g).selection["recall"], fmt_pct)
                       if run.ids(g) else "—" for g in ("consistent", "contrastive", "changing")]
            shown = "—" if s["sessions_shown"].value is None else f"{s['sessions_shown'].value:.1f}"
            row = (_strategy_cell(run), shown, fmt_ci(s["recall"], fmt_pct), *by_type,
                   fmt_ci(s["precision"], fmt_pct), _tokens(s["history_tokens"].value), str(cell.instance_files))
            rows.setdefault(row, []).append(an.label(model))
    parts += [md_table(header, [[", ".join(names), *row] for row, names in rows.items()]), ""]
    inf_scorer, gen_scorer = an.primary_scorer("inference"), an.primary_scorer("generation")
    parts += [f"### Strategies compared — F1 scorer `{inf_scorer}`, judge `{gen_scorer}`", "",
              "Each strategy against the default setting (the floor: all sessions) and the oracle (the "
              "ceiling: only the relevant sessions) of the same model: A − B on the instances both have, "
              "with a paired 95% interval resampling personas (the same for both sides). Percentages "
              "for F1, points for the judge score (1-10).", ""]
    header = ["Model", "Strategy", "Session recall", "F1", "F1 − default", "F1 − oracle", "Judge",
              "Judge − default", "Judge − oracle", "Model input tokens / instance"]
    rows = []
    for model in models:
        floor, ceiling = an.run(model, "default"), an.run(model, "oracle")
        for run in _runs_of(an, model):
            f1, score, selection = _estimates(an, run)
            rows.append([an.label(model), _strategy_cell(run), fmt_ci(selection["recall"], fmt_pct), fmt_ci(f1, fmt_pct),
                         _paired(an, run, floor, inf_scorer, "inference"),
                         _paired(an, run, ceiling, inf_scorer, "inference"), fmt_ci(score, fmt_score),
                         _paired(an, run, floor, gen_scorer, "generation"),
                         _paired(an, run, ceiling, gen_scorer, "generation"),
                         _tokens(selection["model_input_tokens"].value)])
    parts += [md_table(header, rows)]
    return "\n".join(parts)


def _estimates(an: "Analysis", run: Run) -> tuple[S.Estimate | None, S.Estimate | None, dict[str, S.Estimate]]:
    """The run's F1 and judge score under the primary scorers (None without them) and what it kept."""
    inf_scorer, gen_scorer = an.primary_scorer("inference"), an.primary_scorer("generation")
    inf = an.cell(run, inf_scorer, "all") if inf_scorer in run.scorers else None
    gen = an.cell(run, gen_scorer, "all") if gen_scorer in run.scorers else None
    return (inf.micro["f1"] if inf and inf.inference else None, gen.score if gen and gen.generation else None,
            an.cell(run, (run.scorers or [""])[0], "all").selection)


def memory_cost_section(an: "Analysis") -> str | None:
    """report.md's "Memory cost": the calls an LLM-backed strategy made to its own model
    (the instance files' ``shown.model_usage``), apart from the evaluated model's; None when
    no run has any."""
    from ..strategy_model import add_usage
    from ...utils.models.usage import cost_of

    rows = []
    for run in an.runs:
        total: dict = {}
        instances = 0
        for data in run.instances.values():
            usage = (data.get("shown") or {}).get("model_usage") if isinstance(data.get("shown"), dict) else None
            if isinstance(usage, dict):
                instances += 1
                add_usage(total, usage)
        if not instances:
            continue
        models = sorted({str((r.get("settings") or {}).get("strategy_model")) for r in run.results
                         if (r.get("settings") or {}).get("strategy_model")})
        model = models[-1] if models else None
        cost = cost_of(model, total) if model else None
        rows.append([an.label(run.model), _strategy_cell(run), ", ".join(f"`{m}`" for m in models) or "—",
                     str(instances), str(total["calls"]), _tokens(total["prompt_tokens"]),
                     _tokens(total["completion_tokens"]), "—" if cost is None else f"${cost:,.4f}",
                     _tokens((total["prompt_tokens"] + total["completion_tokens"]) / instances)])
    if not rows:
        return None
    return "\n".join(["## Memory cost", "",
                      "The calls an LLM-backed strategy made to its own model (docs/strategies.md), apart from "
                      "the evaluated model's and the evaluator's: as recorded in the instance files, so a call two "
                      "instances share (the second answered from the cache) counts for both.", "",
                      md_table(["Model", "Strategy", "Strategy model", "Instances", "Calls", "Input tokens",
                                "Output tokens", "Estimated cost", "Tokens / instance"], rows)])


def _strategy_cell(run: Run) -> str:
    """A strategy's name, marked when it read the instances' labels."""
    return f"`{run.setting}`" + (" (uses labels)" if run.uses_labels else "")


def _tokens(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _paired(an: "Analysis", run: Run, other: Run | None, scorer: str | None, task: str) -> str:
    if other is None or other is run or scorer is None:
        return "—"
    d = an.paired(run, scorer, other, scorer, task)
    if d is None or d.n == 0 or d.difference is None:
        return "—"
    fmt = fmt_pct if task == "inference" else fmt_score
    sign = "+" if d.difference > 0 else ""
    return f"{sign}{fmt_ci(S.Estimate(d.difference, d.low, d.high, d.n), fmt)} (n={d.n})"


def strategies_figure_data(an: "Analysis") -> "FigureData":
    """Per model and strategy: F1, the judge score and the session recall with their intervals."""
    from .figure_data import FigureData

    fig = FigureData("fig_strategies", "Context strategies: F1, judge score and session recall per strategy", "")
    models = _models_with_strategies(an)
    if not models:
        fig.skipped = "no model was run with more than one context strategy"
        return fig
    inf_scorer, gen_scorer = an.primary_scorer("inference"), an.primary_scorer("generation")
    settings: list[str] = []
    series = {}
    for model in models:
        points = {}
        for run in _runs_of(an, model):
            if run.setting not in settings:
                settings.append(run.setting)
            f1, score, selection = _estimates(an, run)
            points[run.setting] = {"f1": f1, "score": score, "recall": selection["recall"]}
        series[an.label(model)] = points
    order = ["default"] + [s for s in settings if s not in ("default", "oracle", "oracle_preference")] + \
            [s for s in ("oracle", "oracle_preference") if s in settings]
    fig.payload = {"settings": order, "series": series}
    labelled = [s for s in order if any(r.uses_labels for r in an.runs if r.setting == s and r.model in models)]
    fig.caption = (f"Each point a model under a strategy, with its 95% interval resampling personas (F1: scorer "
                   f"`{inf_scorer}`, micro; judge: `{gen_scorer}`). The default setting (all sessions) is the "
                   f"floor and the oracle (only the relevant sessions) the ceiling; session recall is what the "
                   f"strategy kept, whatever the model made of it. The paired differences are in the table above."
                   + (f" Uses labels (not blind): {', '.join(f'`{s}`' for s in labelled)}." if labelled else ""))
    return fig
