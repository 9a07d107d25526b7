"""The paper's Figure 7 for any data set: how its context factors, preferences and tasks
spread over the types of Table 7 (synthesis/data/taxonomy.yaml).

What is counted: each distinct context factor of a persona that the instances show (their
sessions' and the current one) by its factor type; each distinct preference they show by the
preference type its factor was written with; each distinct session (the current request's
included) by its task type. The types are the synthesis's own records (a persona's
factors.json and sessions.json): a synthesis output has them, and so has a validation's
verified/ subset of one (found through the validation's summary.json). The benchmark's rows
carry no types (the released CUPID-Raw data has them): what has none is counted as "not
recorded", so the figure never pretends to know.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from .taxonomy import load_taxonomy
from ..utils.dataset import Instance
from ..utils.io import read_json

NOT_RECORDED = "not recorded"
PANELS = (("factor_types", "Context factor types"), ("preference_types", "Preference types"),
          ("task_types", "Task types"))


def synthesis_dir_of(data_path: Path) -> Path | None:
    """The synthesis output whose records type ``data_path``'s instances: itself, or the data
    a validation read (``data_path`` being a validation output or its verified/)."""
    for candidate in (data_path, data_path.parent):
        if (candidate / "personas.json").is_file():
            return candidate
        summary = candidate / "summary.json"
        if summary.is_file():
            source = (read_json(summary).get("data") or {}).get("path")
            if source and (Path(source) / "personas.json").is_file():
                return Path(source)
    return None


def type_counts(instances: list[Instance], synthesis_dir: Path | None) -> dict[str, Counter]:
    counts = {name: Counter() for name, _ in PANELS}
    seen: set = set()
    records: dict[str, tuple[list, dict]] = {}
    for instance in instances:
        pid = instance.persona_id
        if pid not in records:
            base = synthesis_dir / "personas" / pid if synthesis_dir else None
            factors = read_json(base / "factors.json")["factors"] if base and (base / "factors.json").is_file() else []
            sessions = read_json(base / "sessions.json")["sessions"] if base and (base / "sessions.json").is_file() else []
            records[pid] = (factors, {s["index"]: s for s in sessions})
        factors, sessions = records[pid]
        by_name = {f["context_factor"].strip(): f for f in factors}
        by_preference = {f["contextual_preference"].strip(): f for f in factors}
        shown = [(s.context_factor, s.contextual_preference) for s in instance.prior_interactions]
        shown.append((instance.current_context_factor, instance.current_contextual_preference))
        for factor, preference in shown:
            if ("f", pid, factor) not in seen:
                seen.add(("f", pid, factor))
                counts["factor_types"][(by_name.get(factor.strip()) or {}).get("factor_type", NOT_RECORDED)] += 1
            if ("p", pid, preference) not in seen:
                seen.add(("p", pid, preference))
                kind = (by_preference.get(preference.strip()) or {}).get("preference_type", NOT_RECORDED)
                counts["preference_types"][kind] += 1
        meta = instance.extra.get("metadata") if isinstance(instance.extra.get("metadata"), dict) else {}
        if meta.get("session_indices"):
            keys = [("s", pid, index) for index in [*meta["session_indices"], meta.get("final_session_index")]]
        else:  # which sessions these are is not recorded: told apart by their first message
            keys = [("t", pid, s.dialogue[0].content) for s in instance.prior_interactions]
            keys.append(("t", pid, instance.current_request))
        for key in keys:
            if key not in seen:
                seen.add(key)
                record = sessions.get(key[2]) if key[0] == "s" else None
                counts["task_types"][(record or {}).get("task_type", NOT_RECORDED)] += 1
    return counts


def categories() -> dict[str, list[str]]:
    taxonomy = load_taxonomy()
    return {"factor_types": list(taxonomy.factor_types),
            "preference_types": [f"{cat}: {t}" for cat, types in taxonomy.preference_types.items() for t in types],
            "task_types": list(taxonomy.task_types)}


def plot(series: list[tuple[str, dict[str, Counter]]], path: Path, title: str) -> Path:
    """Three panels of horizontal bars, one bar per type and series (every type of Table 7
    shown, a zero included; "not recorded" only where something has no type)."""
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = categories()
    fig, axes = plt.subplots(1, 3, figsize=(17, 7), gridspec_kw={"width_ratios": [1, 1.2, 1]})
    height = 0.8 / len(series)
    colors = ("#4C72B0", "#55A868", "#DD8452")
    for ax, (key, label) in zip(axes, PANELS):
        rows = names[key] + ([NOT_RECORDED] if any(c[key][NOT_RECORDED] for _, c in series) else [])
        y = np.arange(len(rows))
        for k, (name, counts) in enumerate(series):
            values = [counts[key][r.split(": ", 1)[-1] if key == "preference_types" else r] for r in rows]
            bars = ax.barh(y + k * height, values, height, color=colors[k % 3],
                           label=f"{name} (n={sum(counts[key].values())})")
            ax.bar_label(bars, padding=2, fontsize=7)
        ax.set_yticks(y + height * (len(series) - 1) / 2)
        ax.set_yticklabels(rows, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("count")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(0, max([1] + [max(c[key].values(), default=0) for _, c in series]) * 1.15)
        ax.grid(axis="x", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _instances(path: Path) -> list[Instance]:
    from ..evaluation.data import InstanceSource
    from ..utils.dataset import DataValidationError

    if path.name == "instances" and not path.is_dir():
        return []
    try:
        source = InstanceSource(data_path=path)
        source.validate()
    except DataValidationError as exc:
        if "no .json" in str(exc) or "no instances" in str(exc):
            return []  # an empty verified/ subset
        raise
    return list(source)


def report_section(data_path: Path, png: Path) -> str:
    """Figure 7 of ``data_path`` (a validation output: all its instances beside the verified
    ones) drawn to ``png``, and the report's section showing it. Raises the data's
    DataValidationError when ``data_path`` holds no data set."""
    from ..utils.html_page import data_uri, esc

    summary = data_path / "summary.json"
    if (data_path / "validation.jsonl").is_file() and summary.is_file():
        source = Path(read_json(summary)["data"]["path"])
        parts = [("all", source), ("verified", data_path / "verified")]
    elif (data_path / "personas.json").is_file():  # a synthesis output: its instances, once there are some
        parts = [("instances", data_path / "instances")]
    else:
        parts = [("instances", data_path)]
    synth = synthesis_dir_of(parts[0][1])
    series = [(name, type_counts(_instances(path), synth)) for name, path in parts]
    title = f"Figure 7 · {data_path}" + ("" if synth else " (no synthesis records: types not recorded)")
    plot(series, png, title)
    missing = sum(c[k][NOT_RECORDED] for _, c in series for k, _ in PANELS)
    note = (f"Types from the synthesis records in {esc(synth)}; a changed preference (A') was written with "
            f"no type." if synth else
            "These rows carry no types (a synthesis output records them; the benchmark's are in kixlab/CUPID-Raw).")
    return (f'<section class="box" id="figure7"><h2>Figure 7: types of context factors, preferences and tasks</h2>'
            f'<p class="muted">Each distinct context factor, preference and session of the instances counted once. '
            f'{note}{f" {missing} not recorded." if missing else ""}</p>'
            f'<figure><img alt="Figure 7" src="{data_uri(png)}"></figure></section>')
