"""What each figure shows, computed from an Analysis: the points, bins, captions and the
table printed under each figure. Drawing them is figures.py's job."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...utils.dataset import safe_name
from ..metrics import micro_inference
from . import statistics as S
from .analysis import Analysis
from .format import fmt_ci, fmt_pct, fmt_r, fmt_score, md_table
from .published import lookup, paper_model_name
from .results import Outcome, Run, history_of


@dataclass
class FigureData:
    name: str
    title: str
    caption: str
    table: str = ""
    payload: dict = field(default_factory=dict)
    skipped: str | None = None


def _default_runs(an: Analysis, scorer: str | None, task: str) -> tuple[list[Run], list[str]]:
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


def _inference_figure(an: Analysis, name: str, title: str) -> tuple[FigureData, str | None, list[Run], list[str]]:
    """A figure over the default-setting inference runs under the primary scorer (skipped,
    with the reason, when there are none), the scorer, those runs and the models left out."""
    scorer = an.primary_scorer("inference")
    runs, left = _default_runs(an, scorer, "inference")
    fig = FigureData(name, title, "")
    if not runs:
        fig.skipped = "no default-setting inference results"
    return fig, scorer, runs, left


def _instance_f1(outcome: Outcome) -> dict[str, float]:
    return {i: S.instance_prf(c)[2] for i, c in outcome.values.items()}


def prf_bars_data(an: Analysis) -> FigureData:
    fig, scorer, runs, left = _inference_figure(
        an, "fig_prf1", "Precision, recall and F1 per model (default setting, all instances)")
    if fig.skipped:
        return fig
    bars = []
    for run in runs:
        cell = an.cell(run, scorer, "all")
        bars.append({"label": an.label(run.model), "n": cell.inference.n, "files": cell.inference.n_applicable,
                     **{m: cell.micro[m] for m in S.INFERENCE_METRICS}})
    fig.payload = {"bars": bars}
    n_total = sum(b["n"] for b in bars)
    fig.caption = (f"Micro P/R/F1 with 95% persona-clustered bootstrap CIs, scorer `{scorer}`. Rests on {n_total} instance "
                   f"results from {len(bars)} model(s) (" +
                   ", ".join(f"{b['label']}: {b['n']}/{b['files']}" for b in bars) + ")." +
                   (f" Left out (no results under this scorer): {', '.join(left)}." if left else ""))
    return fig


def position_data(an: Analysis) -> FigureData:
    """Figure 3: mean F1 across models against the mean position of relevant sessions."""
    fig, scorer, runs, left_models = _inference_figure(
        an, "fig3_position", "Figure 3: F1 against the mean position of relevant sessions")
    if fig.skipped:
        return fig
    points: dict[tuple[str, str], float] = {}   # (model, instance) -> position
    f1s: dict[tuple[str, str], float] = {}
    no_relevant = 0
    for run in runs:
        out = an.outcome(run, scorer, "inference")
        f1 = _instance_f1(out)
        for instance_id in out.values:
            position = S.mean_position(history_of(run.instances[instance_id]).get("relevant_positions"))
            if position is None:
                no_relevant += 1
                continue
            points[(run.model, instance_id)] = position
            f1s[(run.model, instance_id)] = f1[instance_id]
    groups = S.group_by_value(points, 0.5)
    overall = S.bin_means(groups, f1s)
    per_model = {}
    for run in runs:
        mine = {k: v for k, v in f1s.items() if k[0] == run.model}
        per_model[an.label(run.model)] = S.bin_means(groups, mine)
    header = ["Mean position", "n (model × instance)", "Mean F1, all models"] + list(per_model)
    rows = []
    for i, g in enumerate(groups):
        rows.append([f"{g.low:g}", str(overall[i][1]), fmt_pct(overall[i][0])] +
                    [f"{fmt_pct(v[i][0])} (n={v[i][1]})" for v in per_model.values()])
    fig.table = md_table(header, rows)
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
            value = history_of(data).get("history_tokens")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                tokens.setdefault(instance_id, float(value))
            else:
                no_length.add(instance_id)
    no_length -= set(tokens)
    n_bins = max(1, min(an.n_length_bins, len(tokens) // an.min_bin_size))
    bins = S.equal_size_bins(tokens, n_bins)
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
            lines[an.label(run.model)] = S.bin_means(bins, ys)
        panels[task] = lines
    header = ["Bin (history tokens)", "Instances"]
    header += [f"{m} F1" for m in panels["inference"]] + [f"{m} score" for m in panels["generation"]]
    rows = []
    for i, b in enumerate(bins):
        row = [f"{b.low:g}" if b.low == b.high else f"{b.low:g}–{b.high:g}", str(b.n)]
        row += [f"{fmt_pct(v[i][0])} (n={v[i][1]})" for v in panels["inference"].values()]
        row += [f"{fmt_score(v[i][0])} (n={v[i][1]})" for v in panels["generation"].values()]
        rows.append(row)
    fig.table = md_table(header, rows)
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
                    instance_x.append(S.instance_prf(a.values[i])[2])
                    instance_y.append(S.instance_prf(b.values[i])[2])
        if not cell_points:
            fig.skipped = "no instance has results under both scorers"
            figures.append(fig)
            continue
        r_models = S.pearson([p[1] for p in model_points], [p[2] for p in model_points])
        r_cells = S.pearson([p[3] for p in cell_points], [p[4] for p in cell_points])
        r_instances = S.pearson(instance_x, instance_y)
        rows = [[m, s, g, fmt_pct(x), fmt_pct(y), str(n)] for m, s, g, x, y, n in cell_points]
        fig.table = (f"- Model-wise (default setting, all instances): {fmt_r(r_models)}\n"
                     f"- Every (model, setting, instance type) cell: {fmt_r(r_cells)}\n"
                     f"- Per instance (per-instance F1, all runs): {fmt_r(r_instances)}\n\n" +
                     md_table(["Model", "Setting", "Instances", f"F1 `{base}`", f"F1 `{other}`", "n"], rows))
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
    judged = {run.key for run in _default_runs(an, gen_scorer, "generation")[0]}
    for run in _default_runs(an, inf_scorer, "inference")[0]:
        f1 = an.cell(run, inf_scorer, "all")
        score = an.cell(run, gen_scorer, "all") if run.key in judged else None
        if score is not None and f1.micro["f1"].value is not None and score.score.value is not None:
            points.append((an.label(run.model), f1.micro["f1"].value, score.score.value,
                           f1.inference.n, score.generation.n))
    if not points:
        fig.skipped = "no model has both inference and generation results in the default setting"
        return fig
    corr = S.pearson([p[1] for p in points], [p[2] for p in points])
    fig.table = f"- {fmt_r(corr)}\n\n" + md_table(
        ["Model", "F1 (micro)", "Judge score", "n inference", "n generation"],
        [[m, fmt_pct(x), fmt_score(y), str(ni), str(ng)] for m, x, y, ni, ng in points])
    fig.payload = {"points": points, "corr": corr}
    fig.caption = (f"One point per model (default setting, all instances; F1 scorer `{inf_scorer}`, judge "
                   f"`{gen_scorer}`). Rests on {len(points)} model(s), "
                   f"{sum(p[3] for p in points)} inference and {sum(p[4] for p in points)} generation "
                   f"results. The paper reports r = 0.764 (p = 0.010) over its 10 models.")
    return fig


def summaries_data(an: Analysis) -> FigureData:
    """Figure 6: each model with the full prior sessions (default setting) beside the same
    model with their summaries (summary setting), inference F1 and judge score."""
    fig = FigureData("fig6_summaries", "Figure 6: full prior sessions against their summaries", "")
    panels: dict[str, list[dict]] = {"inference": [], "generation": []}
    rows = []
    for task, metric, fmt, key, scale in (("inference", "F1 (micro)", fmt_pct, "f1", 100),
                                          ("generation", "judge score", fmt_score, "score", 1)):
        scorer = an.primary_scorer(task)
        for model in an.models():
            runs = (an.run(model, "default"), an.run(model, "summary"))
            if scorer is None or not all(r and scorer in r.scorers and r.has_task(task, scorer) for r in runs):
                continue
            cells = [an.cell(r, scorer, "all") for r in runs]
            estimates = [c.micro["f1"] if task == "inference" else c.score for c in cells]
            if any(e.value is None for e in estimates):
                continue
            paired = an.paired(runs[1], scorer, runs[0], scorer, task)
            paper = [lookup(paper_model_name(model), task, setting) for setting in ("default", "summary")]
            paper_values = [p["values"][key] / scale if p else None for p in paper]
            panels[task].append({"label": an.label(model), "full": estimates[0], "summaries": estimates[1],
                                 "paper": paper_values})
            rows.append([an.label(model), metric, fmt_ci(estimates[0], fmt), fmt_ci(estimates[1], fmt),
                         fmt_ci(S.Estimate(paired.difference, paired.low, paired.high, paired.n), fmt),
                         str(paired.n)] + [fmt(v) for v in paper_values])
    if not rows:
        fig.skipped = "no model has both a default-setting and a summary-setting run with results"
        return fig
    fig.payload = {"panels": {task: points for task, points in panels.items() if points}, "min_n": an.min_bin_size}
    fig.table = md_table(["Model", "Metric", "Full sessions [95% CI]", "Summaries [95% CI]",
                          "Summaries − full [95% CI]", "n paired", "paper full", "paper summaries"], rows)
    fig.caption = (f"Each model in the default setting (all prior sessions) and in the summary setting (Figure 23's "
                   f"summaries in their place): micro F1 (scorer `{an.primary_scorer('inference')}`) and mean judge "
                   f"score (`{an.primary_scorer('generation')}`) over all instances, with 95% persona-clustered "
                   f"bootstrap intervals; the difference is paired on the instances both settings evaluated, "
                   f"resampling personas. The paper's columns are its Tables 1 and 9 (F1) and 3 and 10 (score); it "
                   f"reports that summaries lift the weaker models (Mistral 7B by 13 F1 points) and slightly lower "
                   f"the reasoning models.")
    return fig
