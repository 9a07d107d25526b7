"""The report's PNG figures (matplotlib, Agg), drawn from figure_data.FigureData payloads.

Rules every figure keeps, so that a reader can trust it at a glance:
* fixed, honest axes: F1 and P/R from 0 to 100 %, the judge score from 1 to 10, whatever
  the data; a zoomed axis would make one instance look like a jump;
* every series visible: with one model there is no separate "all models" line to hide it;
  with several, the average is drawn dashed beneath the models;
* n on every point or bar, and a point resting on fewer than ``min_n`` values drawn hollow
  (and said so in the legend);
* a legend wherever there are several series, in every panel;
* a correlation that cannot be computed is said in words, not "r = n/a".
"""
from __future__ import annotations

from pathlib import Path

from .format import fmt_r
from .statistics import Correlation

F1_LIMITS = (0, 100)
JUDGE_LIMITS = (1, 10)
HOLLOW_NOTE = "hollow: fewer than {n} values"


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(plt, fig, path: Path, rect: tuple = (0, 0, 1, 1)) -> None:
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _pad(limits: tuple[float, float], share: float = 0.04) -> tuple[float, float]:
    """The range with a margin; more above, where a top point's n label sits."""
    span = limits[1] - limits[0]
    return limits[0] - share * span, limits[1] + 2.5 * share * span


def _corr_text(corr: Correlation) -> str:
    return f"r not computed: {corr.note} (n = {corr.n})" if corr.r is None else fmt_r(corr)


def _points(ax, points: list[tuple], *, color, min_n: int, label: str | None, marker="o", size=6,
            annotate=True, linestyle="-", linewidth=1.5, zorder=3, label_below=False) -> bool:
    """A line through the points (x, y, n), filled markers where n >= min_n and hollow ones
    below, each point labelled with its n (above it, or below for a background series).
    Whether a point is hollow."""
    if not points:
        return False
    xs, ys, _ = zip(*points)
    ax.plot(xs, ys, linestyle=linestyle, linewidth=linewidth, color=color, zorder=zorder, label=label,
            marker=marker, markersize=size, markeredgewidth=1.5)
    few = [(x, y) for x, y, n in points if n < min_n]
    if few:
        ax.plot([x for x, _ in few], [y for _, y in few], marker=marker, markersize=size, color=color,
                markerfacecolor="white", markeredgewidth=1.5, linestyle="none", zorder=zorder + 1)
    if annotate:
        for x, y, n in points:
            ax.annotate(f"n={n}", (x, y), textcoords="offset points", xytext=(0, -12 if label_below else 6),
                        ha="center", fontsize=6.5, color=color)
    return bool(few)


def _yerr(estimates, scale: float) -> list[list[float]]:
    """The error bars below and above each estimate (none without an interval)."""
    values = [e.value or 0 for e in estimates]
    return [[scale * (v - (v if e.low is None else e.low)) for v, e in zip(values, estimates)],
            [scale * ((v if e.high is None else e.high) - v) for v, e in zip(values, estimates)]]


def _n_ranges(series: list[list[tuple]], n_positions: int) -> list[str | None]:
    """Per x position, the n of its points as "low–high" (None where no series has one)."""
    out: list[str | None] = []
    for k in range(n_positions):
        ns = sorted({values[k][1] for values in series if values[k][0] is not None})
        out.append(None if not ns else (str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"))
    return out


def _shared_ns(series: list[list[tuple]], n_positions: int) -> list[str | None] | None:
    """``_n_ranges`` when every series shares its position's n, else None (each point then
    carries its own n)."""
    ranges = _n_ranges(series, n_positions)
    return None if any(r and "–" in r for r in ranges) else ranges


def _n_row(ax, xs, ns, text: str = "n={n}") -> None:
    """The n of each x position, written once along the bottom of the axes."""
    for x, n in zip(xs, ns):
        if n is not None:
            ax.annotate(text.format(n=n), (x, 0.015), xycoords=("data", "axes fraction"), ha="center",
                        va="bottom", fontsize=6.5, color="dimgray")


def _few_note(ax, any_few: bool, min_n: int) -> None:
    if any_few:
        ax.text(0.99, 0.99, HOLLOW_NOTE.format(n=min_n), transform=ax.transAxes, ha="right",
                va="top", fontsize=7, color="dimgray")


# ---------------------------------------------------------------------------------------
def plot_prf_bars(data, path: Path) -> None:
    import numpy as np
    plt = pyplot()
    bars = data.payload["bars"]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(bars) + 2), 4.5))
    x = np.arange(len(bars))
    width = 0.26
    for k, (metric, color) in enumerate((("precision", "#4C72B0"), ("recall", "#DD8452"), ("f1", "#55A868"))):
        values = [100 * (b[metric].value or 0) for b in bars]
        rects = ax.bar(x + (k - 1) * width, values, width, yerr=_yerr([b[metric] for b in bars], 100), capsize=3,
                       color=color, label={"precision": "Precision", "recall": "Recall", "f1": "F1"}[metric])
        for rect, value in zip(rects, values):
            ax.annotate(f"{value:.0f}", (rect.get_x() + rect.get_width() / 2, 1), ha="center",
                        va="bottom", fontsize=6.5, color="white" if value > 8 else "black")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{b['label']}\n(n={b['n']} instances)" for b in bars], rotation=20, ha="right",
                       fontsize=8)
    ax.set_ylabel("%")
    ax.set_ylim(*F1_LIMITS)
    ax.set_title("Inference: P / R / F1 per model\n(95% persona-clustered bootstrap CI)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    _save(plt, fig, path)


def plot_position(data, path: Path) -> None:
    """Figure 3. With one model its own line is the figure; with several, the models are
    drawn over a dashed average ("All models", n = model x instance results)."""
    plt = pyplot()
    xs = data.payload["x"]
    min_n = data.payload.get("min_n", 1)
    per_model = data.payload["per_model"]
    fig, ax = plt.subplots(figsize=(9, 4.8))
    any_few = False
    several = len(per_model) > 1
    # With several models sharing each position's n, the n is written once per position.
    shared = _shared_ns(list(per_model.values()), len(xs)) if several else None
    if several:
        any_few |= _points(ax, [(x, 100 * v, n) for x, (v, n) in zip(xs, data.payload["overall"]) if v is not None],
                           color="black", min_n=min_n, label="All models (mean)", linestyle="--", linewidth=2.5,
                           size=8, zorder=2, label_below=True, annotate=shared is None)
    for i, (label, values) in enumerate(per_model.items()):
        any_few |= _points(ax, [(x, 100 * v, n) for x, (v, n) in zip(xs, values) if v is not None],
                           color=f"C{i}", min_n=min_n, label=label, annotate=shared is None, zorder=4)
    if shared is not None:
        _n_row(ax, xs, shared, "n={n}\neach")
    ax.set_xlabel("Mean position of the relevant sessions in the history (1 = oldest)")
    ax.set_ylabel("Mean per-instance F1 (%)")
    ax.set_ylim(*_pad(F1_LIMITS))
    if xs:
        ax.set_xlim(min(0.5, min(xs) - 0.5), max(8.5, max(xs) + 0.5))
    ax.set_title("Figure 3: F1 against the position of the relevant sessions")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title=("n: instances per model at each position" if shared is not None else
                     "n per point: instances" + (" (model × instance for the mean)" if several else "")),
              title_fontsize=6.5)
    _few_note(ax, any_few, min_n)
    _save(plt, fig, path)


def plot_length(data, path: Path) -> None:
    """Figure 9: one panel per task, each with its legend and n on every point."""
    plt = pyplot()
    bins = data.payload["bins"]
    min_n = data.payload.get("min_n", 1)
    labels = [(f"{b.low:g}" if b.low == b.high else f"{b.low:g}–{b.high:g}") + f"\n({b.n} inst.)" for b in bins]
    panels = [(task, values) for task, values in data.payload["panels"].items() if values]
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(6.5 * max(1, len(panels)), 5.6), squeeze=False)
    for ax, (task, lines) in zip(axes[0], panels):
        scale, limits, ylabel = ((100, F1_LIMITS, "Mean per-instance F1 (%)") if task == "inference"
                                 else (1, JUDGE_LIMITS, "Mean judge score (1-10)"))
        any_few = False
        shared = _shared_ns(list(lines.values()), len(bins)) if len(lines) > 1 else None
        # One series: n beside each point. Several: n along the bottom, once per bin (a range
        # when the series differ), since labels on every point overlap.
        for i, (label, values) in enumerate(lines.items()):
            any_few |= _points(ax, [(k, scale * v, n) for k, (v, n) in enumerate(values) if v is not None],
                               color=f"C{i}", min_n=min_n, label=label, annotate=len(lines) == 1)
        if shared is not None:
            _n_row(ax, range(len(bins)), shared, "n={n} each")
        elif len(lines) > 1:
            _n_row(ax, range(len(bins)), _n_ranges(list(lines.values()), len(bins)), "n={n}")
        ax.set_xticks(range(len(bins)))
        ax.set_xticklabels(labels, fontsize=7.5)
        ax.set_xlim(-0.5, len(bins) - 0.5)
        ax.set_ylim(*_pad(limits))
        ax.set_xlabel("History length (estimated tokens), equal-size bins")
        ax.set_ylabel(ylabel)
        ax.set_title(f"Figure 9: {task} against history length", fontsize=10)
        ax.grid(alpha=0.3)
        # Below the panel, where it can never cover a point.
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(4, max(1, len(lines))),
                  title="model (n = instances behind a point)" if len(lines) == 1 else "model (n per bin along the bottom)",
                  title_fontsize=6.5)
        _few_note(ax, any_few, min_n)
    _save(plt, fig, path)


def plot_matcher(data, path: Path) -> None:
    """Figure 4: F1 under the two matchers, model-wise and per instance, on 0-100 axes."""
    plt = pyplot()
    p = data.payload
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.2))
    ax = axes[0]
    for i, (label, x, y, n) in enumerate(p["models"]):
        ax.scatter(100 * x, 100 * y, s=36, color=f"C{i}", label=f"{label} (n={n})", zorder=3)
    if p["models"]:
        ax.legend(fontsize=7, loc="lower right")
    ax.set_title("Model-wise F1 (default setting): " + _corr_text(p["r_models"]), fontsize=9)
    ax = axes[1]
    xs, ys = p["instances"]
    ax.scatter([100 * v for v in xs], [100 * v for v in ys], s=12, alpha=0.4, label=f"instances (n={len(xs)})")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("Per-instance F1: " + _corr_text(p["r_instances"]), fontsize=9)
    for ax in axes:
        ax.plot([0, 100], [0, 100], linestyle="--", color="grey", linewidth=1, zorder=1)
        ax.set_xlabel(f"F1 (%) with {p['base']}", fontsize=8)
        ax.set_ylabel(f"F1 (%) with {p['other']}", fontsize=8)
        ax.set_xlim(*_pad(F1_LIMITS))
        ax.set_ylim(*_pad(F1_LIMITS))
        ax.set_aspect("equal", adjustable="box")
        ax.grid(alpha=0.3)
    _save(plt, fig, path)


def plot_inference_generation(data, path: Path) -> None:
    """Figure 5: one point per model on the full F1 and judge ranges; with too few models
    the title says so instead of showing an r."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5.2))
    points = data.payload["points"]
    for i, (label, x, y, n_inf, n_gen) in enumerate(points):
        ax.scatter(100 * x, y, s=40, color=f"C{i}", zorder=3,
                   label=f"{label} (n={n_inf} inf., {n_gen} gen.)")
        if len(points) <= 3:
            ax.annotate(f"{label}\nn={n_inf}/{n_gen}", (100 * x, y), textcoords="offset points",
                        xytext=(6, 4), fontsize=7)
    corr = data.payload["corr"]
    ax.set_xlabel("Inference F1 (%, micro)")
    ax.set_ylabel("Generation judge score (1-10)")
    ax.set_xlim(*_pad(F1_LIMITS))
    ax.set_ylim(*_pad(JUDGE_LIMITS))
    title = "Figure 5: inference vs generation, " + _corr_text(corr)
    ax.set_title(title, fontsize=9.5)
    if corr.r is None:
        # In a corner, where it does not cover a point (F1 near 0 with a judge score of 10
        # does not occur in practice).
        ax.text(0.02, 0.97, f"{len(points)} model(s): too few for a correlation (needs at least 3)",
                transform=ax.transAxes, ha="left", va="top", fontsize=9, color="dimgray",
                bbox={"facecolor": "white", "edgecolor": "lightgray", "alpha": 0.85})
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    _save(plt, fig, path)


def plot_summaries(data, path: Path) -> None:
    """Figure 6: per model, the full-sessions point beside the summaries point with their
    95% intervals, one panel per task (inference left, generation right), the paper's values
    as crosses where it has the model; the legend below, where it covers no point."""
    plt = pyplot()
    panels = data.payload["panels"]
    min_n = data.payload.get("min_n", 1)
    width = max(len(points) for points in panels.values())
    fig, axes = plt.subplots(1, len(panels), figsize=(max(5.5, 1.1 * width + 3) * len(panels), 6.2), squeeze=False)
    settings = (("full", "Full prior sessions (default setting)", "#4C72B0", "o", -0.17),
                ("summaries", "Summaries (summary setting)", "#DD8452", "s", 0.17))
    for ax, (task, points) in zip(axes[0], panels.items()):
        scale, limits, ylabel, tables = ((100, F1_LIMITS, "Inference F1 (%, micro)", "1 and 9") if task == "inference"
                                         else (1, JUDGE_LIMITS, "Generation judge score (1-10)", "3 and 10"))
        any_few, labelled = False, set()
        for k, point in enumerate(points):
            ax.plot([k + settings[0][4], k + settings[1][4]], [scale * point["full"].value, scale * point["summaries"].value],
                    color="lightgray", linewidth=1, zorder=1)
            for (key, label, color, marker, offset), paper in zip(settings, point["paper"]):
                est, x = point[key], k + offset
                any_few |= est.n < min_n
                ax.errorbar(x, scale * est.value, yerr=_yerr([est], scale),
                            fmt=marker, color=color, markerfacecolor="white" if est.n < min_n else color, capsize=3,
                            markersize=7, label=None if key in labelled else label, zorder=3)
                labelled.add(key)
                ax.annotate(f"n={est.n}", (x, scale * (est.value if est.high is None else est.high)), textcoords="offset points", xytext=(0, 4), ha="center",
                            fontsize=6.5, color=color)
                if paper is not None:
                    ax.plot(x, scale * paper, marker="x", color="black", markersize=6, linestyle="none", zorder=4,
                            label=None if "paper" in labelled else f"the paper's value (Tables {tables})")
                    labelled.add("paper")
        ax.set_xticks(range(len(points)))
        ax.set_xticklabels([p["label"] for p in points], rotation=20, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(points) - 0.4)
        ax.set_ylim(*_pad(limits))
        ax.set_ylabel(ylabel)
        ax.set_title(f"Figure 6: {task}, full sessions vs summaries", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        order = sorted(range(len(labels)), key=lambda i: labels[i].startswith("the paper"))
        ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=7, loc="upper center",
                  bbox_to_anchor=(0.5, -0.2), title="95% persona-clustered bootstrap CI; n = instances",
                  title_fontsize=6.5)
        _few_note(ax, any_few, min_n)
    _save(plt, fig, path)


def plot_strategies(data, path: Path) -> None:
    """F1, judge score and session recall per strategy: one panel each (those with values), one
    colour per model, the default setting (floor) first and the oracle (ceiling) last; the n of
    each strategy along the bottom, the legend below the panels."""
    plt = pyplot()
    settings, series = data.payload["settings"], data.payload["series"]
    panels = [(key, title, scale, limits) for key, title, scale, limits in (
        ("f1", "Inference F1 (%, micro)", 100, F1_LIMITS), ("score", "Judge score (1-10)", 1, JUDGE_LIMITS),
        ("recall", "Session recall (%): relevant sessions shown", 100, F1_LIMITS))
        if any((p.get(key) is not None and p[key].value is not None) for points in series.values() for p in points.values())]
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=((0.8 * len(settings) + 2) * max(1, len(panels)), 5.0),
                             squeeze=False)
    labels = [s + ("\n(floor)" if s == "default" else "\n(ceiling)" if s == "oracle" else "") for s in settings]
    for ax, (key, title, scale, limits) in zip(axes[0], panels):
        ns = []
        for i, (model, points) in enumerate(series.items()):
            offset = (i - (len(series) - 1) / 2) * 0.15
            values = [(points.get(s) or {}).get(key) for s in settings]
            ns.append([(e.value, e.n) if e is not None and e.value is not None else (None, 0) for e in values])
            drawn = [(k, e) for k, e in enumerate(values) if e is not None and e.value is not None]
            ax.errorbar([k + offset for k, _ in drawn], [scale * e.value for _, e in drawn],
                        yerr=_yerr([e for _, e in drawn], scale), fmt="o", linestyle="none",
                        color=f"C{i}", capsize=3, label=model)
        _n_row(ax, range(len(settings)), _n_ranges(ns, len(settings)), "n={n}")
        ax.set_xticks(range(len(settings)))
        ax.set_xticklabels(labels, fontsize=7.5, rotation=20, ha="right")
        ax.set_xlim(-0.5, len(settings) - 0.5)
        ax.set_ylim(*_pad(limits))
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=min(6, max(1, len(names))), fontsize=8,
               title="model: point and 95% interval (personas resampled); n = instances", title_fontsize=7)
    _save(plt, fig, path, rect=(0, 0.12, 1, 1))


PLOTTERS = {"fig_prf1": plot_prf_bars, "fig_strategies": plot_strategies, "fig3_position": plot_position,
            "fig9_length": plot_length, "fig5_inference_vs_generation": plot_inference_generation,
            "fig6_summaries": plot_summaries}


def plotter(name: str):
    return plot_matcher if name.startswith("fig4_matcher") else PLOTTERS[name]
