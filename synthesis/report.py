"""python -m synthesis.report OUTPUT_DIR: one self-contained HTML page over a synthesis output.

Any other data set (the benchmark's files, a validation output or its verified/) gets a page
with its Figure 7 alone. Every page shows Figure 7 (synthesis/figure7.py), also written
beside it as figure7.png.

For each persona: its template and description, its context factors, the journey (which
session holds which factor and preference, in order), every simulated dialogue with the user
simulator's score after each assistant message and the checklist items it referred to, and
the instances built from it (which sessions each keeps, its ground truth). A persona that
failed shows its stage and reason. Writes OUTPUT_DIR/report.html (or --output FILE).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..utils.html_page import esc, page
from ..utils.command_line import program_name
from ..utils.io import atomic_write_text, read_json

ROLE_TITLES = {"A": "A (current factor, original preference)", "A'": "A' (current factor, changed preference)",
               "B": "B (contrastive factor)", "other": "other factor", "final": "final (the current request)"}


def _read(path: Path) -> Any:
    try:
        return read_json(path) if path.exists() else None
    except (OSError, ValueError) as exc:
        return {"_unreadable": f"{path}: {exc}"}


def _kv(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows if v not in (None, "", []))
    return f'<div class="table-wrap"><table class="steps">{cells}</table></div>'


def _traits(persona: dict) -> str:
    traits = ", ".join(str(t) for t in persona.get("personality_traits") or [])
    return _kv([("Seed", persona.get("seed_description")), ("Occupation", persona.get("occupation") or persona.get("occupation_token")),
                ("Career level", persona.get("career_level")), ("Traits", traits),
                ("Values", ", ".join(persona.get("personal_values") or [])),
                ("Decision making", persona.get("decision_making_styles"))])


def _factors(doc: dict | None) -> str:
    if not doc:
        return '<p class="note">No context factors yet.</p>'
    rows = "".join(
        f"<tr><td>{k}</td><td><b>{esc(f.get('context_factor'))}</b><div class='muted'>{esc(f.get('factor_type'))}"
        f"{' · related: ' + esc(f.get('related_factor')) if f.get('related_factor') not in (None, 'N/A') else ''}</div></td>"
        f"<td>{esc(f.get('contextual_preference'))}<div class='muted'>{esc(f.get('preference_type'))} · "
        f"{esc(', '.join(f.get('task_types') or []))}</div></td><td class='muted'>{esc(f.get('backstory'))}</td></tr>"
        for k, f in enumerate(doc.get("factors") or [], start=1))
    return (f'<div class="table-wrap"><table class="check factors"><tr><th>#</th><th>Factor</th><th>Preference</th>'
            f"<th>Backstory</th></tr>{rows}</table></div>")


def _dialogue(d: dict) -> str:
    checklist = d.get("checklist") or []
    after = {t.get("after_message"): t for t in d.get("user_turns") or []}
    turns = []
    for k, message in enumerate(d.get("dialogue") or [], start=1):
        who = "User (simulated)" if message.get("role") == "user" else "AI Assistant (simulated)"
        turns.append(f'<div class="turn"><div class="who">{k}. {who}</div><div class="text">{esc(message.get("content"))}</div></div>')
        judged = after.get(k)
        if judged:
            # The user simulator's whole answer (evaluation, score, CONTINUE/END, the items
            # it refers to, its thinking, its message), in the release's layout.
            turns.append(f'<div class="box sim-score"><b>Simulator score: {esc(judged.get("score"))}/10</b>'
                         f'{" · " + str(judged["attempts"]) + " attempts" if (judged.get("attempts") or 1) > 1 else ""}'
                         f'<details><summary>Evaluation, selected items and thinking</summary>'
                         f'<div class="text">{esc(judged.get("raw"))}</div></details></div>')
    scores = " → ".join(str(s) for s in d.get("scores") or []) or "—"
    listed = "".join(f"<li>{esc(c)}</li>" for c in checklist)
    return (f'<div class="turns"><p><b>Preference:</b> {esc(d.get("contextual_preference"))}</p>'
            f'<p><b>Checklist:</b></p><ol>{listed}</ol><p><b>Scores:</b> {esc(scores)} · '
            f'{"satisfied" if d.get("satisfied") else "<span class=fail>not satisfied</span>"}</p>{"".join(turns)}</div>')


def _journey(pdir: Path, sessions_doc: dict | None) -> str:
    if not sessions_doc:
        return '<p class="note">No sessions yet.</p>'
    parts = [f'<p>Current factor <b>{esc(sessions_doc.get("current_factor"))}</b>; contrastive factor '
             f'<b>{esc(sessions_doc.get("contrastive_factor"))}</b>.</p>',
             _kv([("Original preference (A)", sessions_doc.get("original_preference")),
                  ("Changed preference (A')", sessions_doc.get("changed_preference")),
                  ("Contrastive preference (B)", sessions_doc.get("contrastive_preference"))])]
    for session in sessions_doc.get("sessions") or []:
        index, role = session.get("index"), session.get("role")
        dialogue = _read(pdir / "dialogues" / f"{index:02d}.json") if isinstance(index, int) else None
        cls = "session relevant" if role in ("A", "A'", "final") else "session"
        kind = "relevant" if role in ("A", "final") else "changed" if role in ("B", "A'") else ""
        badge = f'<span class="badge {kind}">{esc(ROLE_TITLES.get(role, role))}</span>'
        if dialogue and "_unreadable" not in dialogue:
            scores = " → ".join(str(s) for s in dialogue.get("scores") or [])
            body = _dialogue(dialogue)
            meta = f' · {dialogue.get("n_turns")} messages · scores {esc(scores)}'
        elif role == "final":
            body, meta = f'<div class="turns"><p><b>Request:</b> {esc(session.get("request"))}</p></div>', ""
        else:
            body, meta = '<div class="turns"><p class="note">Dialogue not simulated yet.</p></div>', ""
        parts.append(f'<details class="{cls}" data-session="{esc(index)}"><summary><b>Session {esc(index)}</b> · '
                     f'{esc(session.get("context_factor"))} {badge}<span class="muted">{meta}</span></summary>'
                     f'<div class="turns"><p><b>Request:</b> {esc(session.get("request"))}</p></div>{body}</details>')
    return "".join(parts)


def _instances(out: Path, persona_id: str) -> str:
    rows = []
    for path in sorted((out / "instances").glob(f"{persona_id}__*.json")):
        row = _read(path) or {}
        meta = row.get("metadata") or {}
        kept = ", ".join(f"{i} ({r})" for i, r in zip(meta.get("session_indices") or [], meta.get("session_roles") or []))
        rows.append(f'<tr class="instance"><td><b>{esc(row.get("instance_type"))}</b><div class="muted">{esc(path.name)}</div></td>'
                    f'<td>{esc(row.get("current_contextual_preference"))}</td><td>{esc(kept)}</td>'
                    f'<td>{len(row.get("current_checklist") or [])} items</td></tr>')
    if not rows:
        return '<p class="note">No instances built (yet).</p>'
    return ('<div class="table-wrap"><table class="check"><tr><th>Type</th><th>Ground-truth preference</th>'
            f'<th>Sessions kept (role)</th><th>Checklist</th></tr>{"".join(rows)}</table></div>')


def render(out: Path, figure7: str = "") -> str:
    personas_doc = _read(out / "personas.json") or {"personas": []}
    summary = _read(out / "summary.json") or {}
    counts = summary.get("counts") or {}
    sections, toc = [], []
    for persona in personas_doc.get("personas") or []:
        pid = persona["persona_id"]
        pdir = out / "personas" / pid
        failure = _read(pdir / "failure.json")
        status = (f'<p class="warning fail">Failed at <b>{esc(failure.get("stage"))}</b>: {esc(failure.get("reason"))}</p>'
                  f'{"<details><summary>Last raw answer</summary><pre>" + esc(failure.get("last_raw_output")) + "</pre></details>" if failure.get("last_raw_output") else ""}'
                  if failure else "")
        toc.append(f'<li><a href="#{esc(pid)}">{esc(pid)}</a>{" ✗" if failure else ""}</li>')
        sections.append(
            f'<section class="persona" id="{esc(pid)}"><h2>{esc(pid)}</h2>{status}'
            f'<div class="box"><h3>Persona</h3><p class="text">{esc(persona.get("description") or "(not described yet)")}</p>{_traits(persona)}</div>'
            f'<div class="box"><h3>Context factors</h3>{_factors(_read(pdir / "factors.json"))}</div>'
            f'<div class="box"><h3>Journey and simulated dialogues</h3>{_journey(pdir, _read(pdir / "sessions.json"))}</div>'
            f'<div class="box"><h3>Instances</h3>{_instances(out, pid)}</div></section>')
    head = " · ".join(f"{esc(k.replace('_', ' '))} {esc(v)}" for k, v in counts.items())
    body = (f'<header class="top"><span class="brand">CUPID synthesis report</span><span class="muted">{esc(out)}</span></header>'
            f'<main><p>{head or "No summary.json yet (the run has not finished)."}</p>'
            f'<p class="muted">Seeds: {esc(personas_doc.get("seed_source"))}</p>'
            f'<nav class="toc"><ul>{"".join(toc)}</ul></nav>{figure7}{"".join(sections) or "<p>No personas yet.</p>"}</main>')
    return page(f"CUPID synthesis · {out.name}", body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=program_name("python -m cupid.synthesis.report"),
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", help="a directory written by cupid-synth (or cupid-validate), or any data set")
    parser.add_argument("--output", default=None, help="the HTML file (default OUTPUT_DIR/report.html)")
    args = parser.parse_args(argv)
    from .figure7 import report_section
    from ..utils.errors import BadInput

    out = Path(args.output_dir)
    path = Path(args.output) if args.output else out / "report.html"
    try:
        figure7 = report_section(out, path.parent / "figure7.png")
    except BadInput as exc:
        print(f"error: {out}: not a synthesis output nor a data set ({exc})", file=sys.stderr)
        return 1
    if (out / "personas.json").is_file():
        atomic_write_text(path, render(out, figure7))
    else:
        atomic_write_text(path, page(f"CUPID data · {out.name}", f'<header class="top"><span class="brand">CUPID data'
                                     f'</span><span class="muted">{esc(out)}</span></header><main>{figure7}</main>'))
    print(f"wrote {path} and {path.parent / 'figure7.png'}")
    return 0


def console() -> None:
    """The console script ``cupid-synth-report``."""
    sys.exit(main())


if __name__ == "__main__":
    console()
