"""Figure 10 (§F.5): every model evaluated on every model's data set, as a matrix of
inference F1 and judge score, the cells where a model meets data of its own family framed.

Each data set's runs are read as the report reads any results directory (``Analysis``):
micro F1 and the mean judge score, with 95% persona-clustered bootstrap intervals, recomputed
from the instance files.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from .analysis import Analysis
from .figures import F1_LIMITS, JUDGE_LIMITS, _save, pyplot
from .format import md_table
from .statistics import DEFAULT_N_BOOTSTRAP, Estimate
from ...utils.io import atomic_write_text

FAMILY_FRAME = "red"


@dataclass(frozen=True)
class Side:
    """A row (an evaluated model) or a column (a data set, by the model that made it)."""
    label: str    # the model's label, as its run directory names it
    family: str


@dataclass(frozen=True)
class DataSet(Side):
    results_dir: Path = Path()   # where every model's run on this data set is
    instances: int = 0           # how many instances the data set holds


def matrix(models: list[Side], datasets: list[DataSet], *, n_bootstrap: int = DEFAULT_N_BOOTSTRAP,
           seed: int = 0) -> dict:
    """{"cells": [...], ...}: one cell per (evaluated model, data set) with its F1 and judge
    score (value, low, high, n) and whether the two are of one family."""
    cells = []
    for data in datasets:
        an = Analysis(data.results_dir, n_bootstrap=n_bootstrap, seed=seed, keep_raw=False) \
            if data.results_dir.is_dir() else None
        for model in models:
            run = an.run(model.label, "default") if an else None
            f1 = score = None
            failed = {}
            if run is not None:
                inf, gen = an.primary_scorer("inference"), an.primary_scorer("generation")
                if inf and run.has_task("inference", inf):
                    f1 = an.cell(run, inf, "all").micro["f1"]
                    failed["f1"] = an.outcome(run, inf, "inference").failed_by_step()
                if gen and run.has_task("generation", gen):
                    score = an.cell(run, gen, "all").score
                    failed["score"] = an.outcome(run, gen, "generation").failed_by_step()
            cells.append({"model": model.label, "data": data.label, "same_family": model.family == data.family,
                          "f1": _as_dict(f1), "score": _as_dict(score), "instances": data.instances,
                          # per value, the instances whose steps failed and at which step
                          "failed": {key: {"instances": sum(steps.values()), "steps": dict(steps)}
                                     for key, steps in failed.items() if steps}})
    return {"models": [{"label": m.label, "family": m.family} for m in models],
            "datasets": [{"label": d.label, "family": d.family, "instances": d.instances,
                          "results_dir": str(d.results_dir)} for d in datasets],
            "cells": cells, "n_bootstrap": n_bootstrap, "seed": seed}


def _as_dict(estimate: Estimate | None) -> dict | None:
    return None if estimate is None or estimate.value is None else asdict(estimate)


def cell_text(value: dict | None, scale: float, digits: int, failed: dict | None = None) -> str:
    """The value with its interval and n, and the instances that failed and where."""
    where = f"{failed['instances']} failed at {', '.join(failed['steps'])}" if failed else ""
    if value is None:
        return f"— ({where})" if where else "—"
    low, high = value["low"], value["high"]
    interval = "" if low is None else f" [{scale * low:.{digits}f}, {scale * high:.{digits}f}]"
    return f"{scale * value['value']:.{digits}f}{interval} (n={value['n']}{f'; {where}' if where else ''})"


def markdown(data: dict, png_name: str | None) -> str:
    labels = [d["label"] for d in data["datasets"]]
    lines = ["# Self-enhancement (the paper's §F.5, Figure 10)", "",
             "Rows: the evaluated model; columns: the data set, by the model that synthesized it. "
             "Inference: micro F1 (%); generation: mean judge score (1-10); brackets: 95% bootstrap "
             f"intervals clustered by persona ({data['n_bootstrap']} resamples, seed {data['seed']}); n: the "
             "instances the value rests on. **bold**: the model and the data's maker are of one family "
             "(framed in red in the figure).", ""]
    if png_name:
        lines += [f"![Figure 10]({png_name})", ""]
    for task, key, scale, digits in (("Inference F1 (%)", "f1", 100, 1), ("Judge score", "score", 1, 2)):
        rows = []
        for model in data["models"]:
            row = [f"{model['label']} ({model['family']})"]
            for label in labels:
                cell = next(c for c in data["cells"] if c["model"] == model["label"] and c["data"] == label)
                text = cell_text(cell[key], scale, digits, cell.get("failed", {}).get(key))
                row.append(f"**{text}**" if cell["same_family"] else text)
            rows.append(row)
        header = [f"{task}: model ↓, data by →"] + [f"{d['label']} ({d['family']}, {d['instances']} inst.)"
                                                  for d in data["datasets"]]
        lines += [f"## {task}", "", md_table(header, rows), ""]
    return "\n".join(lines).rstrip() + "\n"


def plot(data: dict, path: Path) -> None:
    """Two heat maps on fixed scales (F1 0-100 %, judge 1-10), every cell with its value,
    interval and n; same-family cells framed."""
    import numpy as np
    from matplotlib.patches import Rectangle

    plt = pyplot()
    models, datasets = data["models"], data["datasets"]
    width = max(5.0, 2.3 * len(datasets) + 2.5)
    fig, axes = plt.subplots(1, 2, figsize=(2 * width, 1.2 * len(models) + 2.6))
    for ax, (title, key, scale, digits, limits) in zip(axes, (
            ("Inference: F1 (%)", "f1", 100, 1, F1_LIMITS), ("Generation: judge score", "score", 1, 2, JUDGE_LIMITS))):
        grid = np.full((len(models), len(datasets)), np.nan)
        for i, model in enumerate(models):
            for j, dataset in enumerate(datasets):
                cell = next(c for c in data["cells"] if c["model"] == model["label"] and c["data"] == dataset["label"])
                value = cell[key]
                if value is not None:
                    grid[i, j] = scale * value["value"]
                low = "" if value is None or value["low"] is None else \
                    f"\n[{scale * value['low']:.{digits}f}, {scale * value['high']:.{digits}f}]"
                text = "no result" if value is None else f"{scale * value['value']:.{digits}f}{low}\nn={value['n']}"
                shade = 0.5 if value is None else (grid[i, j] - limits[0]) / (limits[1] - limits[0])
                ax.text(j, i, text, ha="center", va="center", fontsize=9,
                        color="white" if shade < 0.55 else "black")  # viridis is dark at the low end
                if cell["same_family"]:
                    ax.add_patch(Rectangle((j - 0.47, i - 0.47), 0.94, 0.94, fill=False,
                                           edgecolor=FAMILY_FRAME, linewidth=3))
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=limits[0], vmax=limits[1],
                          aspect="auto")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        ax.set_xticks(range(len(datasets)))
        ax.set_xticklabels([f"{d['label']}\n({d['family']})" for d in datasets], fontsize=8)
        ax.set_yticks(range(len(models)))
        ax.set_yticklabels([f"{m['label']}\n({m['family']})" for m in models], fontsize=8)
        ax.set_xlabel("data set synthesized by")
        ax.set_ylabel("evaluated model")
        ax.set_title(title, fontsize=10)
    fig.suptitle("Figure 10: models on data sets synthesized by each model (red frame: same family; "
                 "95% persona-clustered CI)", fontsize=10)
    _save(plt, fig, path)


def write(data: dict, output_dir: Path, figure: bool = True) -> list[Path]:
    """self_enhancement.json, .md and (``figure``) .png in ``output_dir``."""
    written = []
    png = output_dir / "self_enhancement.png"
    if figure:
        plot(data, png)
        written.append(png)
    for path, text in ((output_dir / "self_enhancement.json", json.dumps(data, indent=2) + "\n"),
                       (output_dir / "self_enhancement.md", markdown(data, png.name if figure else None))):
        atomic_write_text(path, text)
        written.append(path)
    return written
