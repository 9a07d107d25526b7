"""The report's part on ``--task interaction``: report.md's section (rounds to satisfaction,
rounds saved against ``none``, the satisfied-by-round curve, each with its persona-clustered
interval, recomputed from the dialogue files) and interaction.html, every dialogue readable
turn by turn beside what the simulator held."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .interaction_measures import MANIFEST, dialogue_records, measures
from .format import md_table
from .statistics import DEFAULT_N_BOOTSTRAP
from ...utils.html_page import esc, page
from ...utils.io import atomic_write_text, read_json

PAGE = "interaction.html"
FIGURE = "fig_interaction.png"


@dataclass
class InteractionRun:
    directory: Path
    manifest: dict
    results: dict      # measures(), recomputed


def find_runs(results_dir: Path, n_bootstrap: int = DEFAULT_N_BOOTSTRAP, seed: int = 0) -> list[InteractionRun]:
    """Every interactive run under ``results_dir``, its measures recomputed (rounds saved
    against the ``none`` run of the same model, simulator and cap, when there is one)."""
    found = []
    for path in sorted(Path(results_dir).rglob(MANIFEST)):
        manifest = read_json(path)
        if isinstance(manifest, dict) and manifest.get("task") == "interaction":
            found.append((path.parent, manifest))
    key = lambda m: (m.get("model"), m.get("simulator"), m.get("max_rounds"))  # noqa: E731
    nones = {key(m): d for d, m in found if m.get("setting") == "none"}
    runs = []
    for directory, manifest in found:
        ids = {r["instance_id"] for r in dialogue_records(directory)}
        baseline = None if manifest.get("setting") == "none" else nones.get(key(manifest))
        judges = sorted({label for r in dialogue_records(directory) for label in (r.get("final_judge") or {})})
        runs.append(InteractionRun(directory, manifest, measures(directory, ids, manifest["max_rounds"], baseline,
                                                                 judge=judges[0] if len(judges) == 1 else None,
                                                                 n_bootstrap=n_bootstrap, seed=seed)))
    return runs


def _ci(estimate: dict | None, digits: int = 2, sign: str = "") -> str:
    if not estimate or estimate.get("value", estimate.get("difference")) is None:
        return "—"
    value = estimate.get("value", estimate.get("difference"))
    return f"{value:{sign}.{digits}f} [{estimate['low']:{sign}.{digits}f}, {estimate['high']:{sign}.{digits}f}]"


def _saved(saved: dict | None) -> str:
    return (_ci(saved, sign="+") + f" (n={saved['n']})") if saved and saved.get("difference") is not None else "—"


def _judged(judged: dict | None) -> str:
    """The judge's score of the last replies (--judge_final), with its judge."""
    if not judged or judged.get("value") is None:
        return "—"
    return f"{_ci(judged)} `{judged['scorer']}`" + (f" ({judged['failed']} failed)" if judged["failed"] else "")


def section(runs: list[InteractionRun], results_dir: Path, figure: Path | None = None) -> str:
    """report.md's section (``figure``: the curve's drawing, when drawn)."""
    lines = ["## Interaction (`--task interaction`)", "",
             "Not the paper's protocol (docs/interaction.md): per instance, the model answers the generation "
             "request, then the release's user simulator (Figure 19) scores each reply 1-10 and gives feedback "
             "until it says END or the cap. **Rounds** = the round whose reply drew END; an unsatisfied dialogue "
             "counts at the cap (a lower bound). **Saved** = rounds under `none` minus rounds here, paired by "
             "instance. The simulator holds the answer: its leniency is its model's, so compare runs under the "
             "same simulator only. Brackets: 95% bootstrap intervals clustered by persona (the report's resamples "
             "and seed). Failed dialogues are "
             f"counted, never scored. Each dialogue, turn by turn: [{PAGE}]({PAGE}).", ""]
    rows = []
    for run in runs:
        m, r, c = run.manifest, run.results, run.results["counts"]
        saved = r.get("rounds_saved_vs_none")
        rows.append([m["model"], m["setting"], m["simulator"], str(m["max_rounds"]),
                     f"{c['satisfied']}/{c['satisfied'] + c['unsatisfied']}", str(c["failed"]),
                     _ci(r["rounds_to_satisfaction"]), _ci(r["feedback_rounds"]),
                     _saved(saved), _judged(r.get("final_judge")), str(run.directory.relative_to(results_dir))])
    lines += [md_table(["Model", "Setting", "Simulator", "Cap", "Satisfied", "Failed", "Rounds",
                        "Feedback rounds", "Saved vs none", "Judge, last reply", "Directory"], rows), ""]
    if figure is not None:
        lines += [f"![Satisfied by round]({figure.name})", "",
                  "Satisfied by round: the share of dialogues the simulator ended by each round, with its 95% "
                  "interval (personas resampled) as a band; one panel per simulator.", ""]
    for run in runs:
        m, r = run.manifest, run.results
        lines += [f"### Satisfied by round — {m['model']} · {m['setting']} · simulator {m['simulator']}", ""]
        cap = m["max_rounds"]
        header = ["", *(str(i) for i in range(1, cap + 1))]
        body = [["all", *(_ci(p) for p in r["satisfied_by_round"])],
                ["score", *(_ci(p) for p in r["score_by_round"])]]
        for kind, block in r["by_instance_type"].items():
            body.append([kind, *(_ci(p) for p in block["satisfied_by_round"])])
        lines += [md_table(header, body), ""]
        by_type = [[kind, _ci(block["rounds_to_satisfaction"]), _saved(block.get("rounds_saved_vs_none"))]
                   for kind, block in r["by_instance_type"].items()]
        if by_type:
            lines += [md_table(["Instance type", "Rounds", "Saved vs none"], by_type), ""]
    return "\n".join(lines)


def _instances(runs: list[InteractionRun], data_paths) -> tuple[dict, list[str]]:
    """The dialogues' instances, for the sessions they were shown: from ``data_paths`` (the
    report's --data) or each run's local data; the hub's is not loaded here."""
    from ..data import InstanceSource
    from ...utils.dataset import DataValidationError

    wanted = {r["instance_id"] for run in runs for r in dialogue_records(run.directory)}
    paths = list(data_paths or []) or sorted({run.manifest.get("data_source") for run in runs
                                              if run.manifest.get("data_source")
                                              and Path(run.manifest["data_source"]).exists()})
    found, notes = {}, []
    for path in paths:
        try:
            for instance in InstanceSource(data_path=path):
                if instance.instance_id in wanted:
                    found.setdefault(instance.instance_id, instance)
        except (DataValidationError, OSError, ValueError) as exc:
            notes.append(f"data {path}: not read ({exc})")
    if wanted - set(found):
        notes.append(f"{len(wanted - set(found))} of {len(wanted)} dialogues' instances not found in "
                     f"{', '.join(map(str, paths)) or 'any local data (give --data)'}: their sessions are not shown")
    return found, notes


def write_page(runs: list[InteractionRun], output: Path, data_paths=None) -> Path:
    """interaction.html: each run's dialogues, turn by turn, beside the sessions shown."""
    instances, notes = _instances(runs, data_paths)
    parts = ["<h1>CUPID interaction dialogues</h1>",
             "<p>Each dialogue: what the user simulator held (the current context factor, preference and "
             "checklist, and the persona it played), then the request, each reply, and the simulator's score, "
             "decision and feedback. Not the paper's protocol; see docs/interaction.md.</p>"]
    parts += [f"<p class='note'>{esc(note)}</p>" for note in notes]
    for run in runs:
        m = run.manifest
        parts.append(f"<h2>{esc(m['model'])} · setting {esc(m['setting'])} · simulator {esc(m['simulator'])} · "
                     f"cap {esc(m['max_rounds'])}</h2>")
        for record in dialogue_records(run.directory):
            parts.append(_dialogue_html(record, instances.get(record["instance_id"])))
    path = output / PAGE
    atomic_write_text(path, page("CUPID interaction dialogues", "\n".join(parts)))
    return path


def _sessions_html(record: dict, instance) -> str:
    """The prior sessions the model was shown, each folded."""
    shown = record.get("shown_positions")
    if instance is None or not shown:
        return ""
    blocks = []
    for position in shown:
        session = instance.prior_interactions[position - 1]
        turns = "".join(f"<div class='turn {'user' if t.role == 'user' else 'model'}'><b>{esc(t.role)}</b>"
                        f"<pre>{esc(t.content)}</pre></div>" for t in session.dialogue)
        blocks.append(f"<details><summary>Session {position}: {esc(session.context_factor)} — "
                      f"{esc(session.contextual_preference)}</summary>{turns}</details>")
    return f"<details><summary>The {len(shown)} prior sessions shown</summary>{''.join(blocks)}</details>"


def _dialogue_html(record: dict, instance=None) -> str:
    status = record.get("status")
    rounds = record.get("rounds") or []
    head = (f"{esc(record['instance_id'])} ({esc(record.get('instance_type'))}): {esc(status)}, "
            f"{len(rounds)} round{'s' if len(rounds) != 1 else ''}")
    checklist = "".join(f"<li>{esc(item)}</li>" for item in record.get("current_checklist") or [])
    shown = record.get("shown_positions")
    held = (f"<p><b>Context factor</b>: {esc(record.get('current_context_factor'))}<br>"
            f"<b>Preference</b>: {esc(record.get('current_contextual_preference'))}<br>"
            f"<b>Persona</b> ({esc(record.get('persona_source'))}): {esc(record.get('persona_description'))}<br>"
            f"<b>Prior sessions shown</b>: {esc('—' if shown is None else ', '.join(map(str, shown)) or 'none')}</p>"
            f"<ol>{checklist}</ol>")
    turns = [f"<div class='turn user'><b>User (request)</b><pre>{esc(record.get('current_request'))}</pre></div>"]
    for turn in rounds:
        turns.append(f"<div class='turn model'><b>Model, round {turn['round']}</b><pre>{esc(turn['reply'])}</pre></div>")
        sim = turn.get("simulator")
        if sim:
            verdict = "END (satisfied)" if sim["ended"] else "CONTINUE"
            turns.append(f"<div class='turn user'><b>Simulator: score {esc(sim['score'])}, {verdict}</b>"
                         f"<pre>{esc(sim['feedback'])}</pre></div>")
    failure = record.get("failure")
    if status == "failed" and failure:
        turns.append(f"<p><b>Failed</b> at round {esc(failure.get('round'))} ({esc(failure.get('at'))}): "
                     f"{esc(failure.get('reason'))}</p>")
    return f"<details><summary>{head}</summary>{held}{_sessions_html(record, instance)}{''.join(turns)}</details>"


def write_figure(runs: list[InteractionRun], output: Path) -> Path | None:
    """fig_interaction.png: the satisfied-by-round curve of each run, with its 95% interval
    (personas resampled) as a band; one panel per simulator (runs under different simulators are
    not comparable). None without matplotlib."""
    try:
        from .figures import _save, pyplot

        plt = pyplot()
    except ImportError:
        return None
    simulators = sorted({r.manifest["simulator"] for r in runs})
    fig, axes = plt.subplots(1, len(simulators), figsize=(5.5 * len(simulators), 4.2), squeeze=False)
    for ax, simulator in zip(axes[0], simulators):
        for i, run in enumerate(r for r in runs if r.manifest["simulator"] == simulator):
            curve = [p for p in run.results["satisfied_by_round"] if p["value"] is not None]
            if not curve:
                continue
            x = [p["round"] for p in curve]
            label = f"{run.manifest['model']} · {run.manifest['setting']} (n={curve[0]['n']})"
            ax.plot(x, [100 * p["value"] for p in curve], marker="o", color=f"C{i}", label=label)
            ax.fill_between(x, [100 * p["low"] for p in curve], [100 * p["high"] for p in curve],
                            color=f"C{i}", alpha=0.15)
        cap = max(r.manifest["max_rounds"] for r in runs if r.manifest["simulator"] == simulator)
        ax.set_xticks(range(1, cap + 1))
        ax.set_xlabel("round (the model's reply)")
        ax.set_ylabel("satisfied by this round (%)")
        ax.set_ylim(-3, 103)
        ax.set_title(f"simulator {simulator}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    path = output / FIGURE
    _save(plt, fig, path)
    return path


def sample_rows(results_dir: Path) -> list[dict]:
    """One row per dialogue of every interactive run (cupid-report --export's interaction
    file): its run, instance, outcome, rounds and scores, the last reply, a failure's reason."""
    rows = []
    for path in sorted(Path(results_dir).rglob(MANIFEST)):
        manifest = read_json(path)
        if not isinstance(manifest, dict) or manifest.get("task") != "interaction":
            continue
        cap = manifest["max_rounds"]
        for record in dialogue_records(path.parent):
            rounds = record.get("rounds") or []
            status = record.get("status")
            scores = [(t.get("simulator") or {}).get("score") for t in rounds]
            rows.append({
                "model": manifest["model"], "setting": manifest["setting"], "simulator": manifest["simulator"],
                "max_rounds": cap, "instance_id": record["instance_id"], "persona_id": record.get("persona_id"),
                "instance_type": record.get("instance_type"), "status": status,
                "satisfied": status == "satisfied" if status in ("satisfied", "unsatisfied") else None,
                "rounds_to_satisfaction": (len(rounds) if status == "satisfied" else cap)
                if status in ("satisfied", "unsatisfied") else None,
                "rounds": len(rounds), "scores": " ".join("-" if x is None else str(x) for x in scores),
                "final_reply": rounds[-1]["reply"] if rounds else None,
                "failure": (record.get("failure") or {}).get("reason") if status == "failed" else None,
                "persona_source": record.get("persona_source")})
    return rows
