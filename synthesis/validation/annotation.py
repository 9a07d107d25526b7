"""The human half of the validation (§3.2, Appendix E, Figure 11): annotation pages, and the
annotators' answers folded back in.

A persona's series has the paper's four tasks: one per preference checked on its sessions,
with the user's messages the validator extracted for each checklist entry (and, marked, the
fragments it gave that are not in them), and one for the current request, with the entries of
every current preference checked against it and a 1-5 realism rating, asked once.
``write_pages`` writes one self-contained page per batch of tasks (annotation/batch-NN.html,
in the report's style); the annotator marks each entry "expressed" or "not expressed", rates
the request, and saves a JSON file of the answers (a download: no server). ``fold`` reads
those files: an entry counts as expressed when at least one annotator marks it so (§3.2); it
reports Krippendorff's alpha between annotators (the ``krippendorff`` package), the
validator's agreement with the humans, the requests' realism, and the instances to revise by
§3.2's reading and by Appendix E's.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Sequence

from .plan import (CONTRASTING, CURRENT, EARLIER, EXPRESSED, FAILED, NOT_EXPRESSED, REQUEST,
                   conclude)
from ...utils.dataset import INSTANCE_TYPES
from ...utils.errors import BadInput, SetupError
from ...utils.html_page import annotation_page, esc, radios
from ...utils.io import atomic_write_text

FORMAT = "cupid-annotation/1"
LABELS = (EXPRESSED, NOT_EXPRESSED)


TYPE_ORDER = {kind: k for k, kind in enumerate(INSTANCE_TYPES)}
ROLE_ORDER = {CURRENT: 0, CONTRASTING: 1, EARLIER: 2, REQUEST: 3}
NOT_VERBATIM = "not found verbatim in the user's messages"


def task_key(persona_id: str, kind: str, subject: str) -> str:
    """A task's id: its persona, its kind, and its subject (a preference, or a request)."""
    return "t" + hashlib.sha256(json.dumps([persona_id, kind, subject.strip()]).encode()).hexdigest()[:10]


def _kind(entry: dict) -> str:
    return "request" if entry["preference_role"] == REQUEST else "messages"


def annotation_tasks(rows: list[dict], requests: dict[str, str]) -> list[dict]:
    """The distinct tasks of the rows (``requests``: instance id -> current request), the
    paper's four per series: one per preference whose sessions are checked (the current,
    contrasting and changed ones: the three instances share them), and one per current
    request, asking each entry of every current preference checked against it (a changing
    instance's differs from the others') and its realism once. A task's ``entries`` are
    numbered by ``key`` (an entry's ``index`` is its place in its preference's checklist);
    each lists the fragments the validator found in the user's messages and, apart, those
    it gave that were not found there (``not_verbatim``)."""
    tasks: dict[str, dict] = {}
    for row in sorted(rows, key=lambda r: (r["persona_id"], TYPE_ORDER.get(r["instance_type"], len(TYPE_ORDER)))):
        for entry in row["entries"]:
            if entry.get("index") is None:
                continue  # its checklist could not be had: nothing to show
            kind, preference = _kind(entry), entry["preference"].strip()
            request = requests[row["instance_id"]] if kind == "request" else None
            key = task_key(row["persona_id"], kind, request if kind == "request" else preference)
            task = tasks.setdefault(key, {"id": key, "persona_id": row["persona_id"], "kind": kind,
                                          "role": entry["preference_role"], "preferences": [], "request": request,
                                          "entries": {}, "instances": []})
            if ROLE_ORDER[entry["preference_role"]] < ROLE_ORDER[task["role"]]:
                task["role"] = entry["preference_role"]
            if preference not in task["preferences"]:
                task["preferences"].append(preference)
            if row["instance_id"] not in task["instances"]:
                task["instances"].append(row["instance_id"])
            shown = task["entries"].setdefault((preference, entry["index"]), {
                "preference": preference, "index": entry["index"], "entry": entry["entry"], "messages": [],
                "not_verbatim": []})
            for fragment in entry["fragments"]:
                if fragment["text"] not in shown["messages"]:
                    shown["messages"].append(fragment["text"])
            for fragment in entry.get("dropped_fragments") or []:
                if fragment["text"] not in shown["messages"] + shown["not_verbatim"]:
                    shown["not_verbatim"].append(fragment["text"])
    for task in tasks.values():
        ordered = sorted(task["entries"].values(), key=lambda e: (task["preferences"].index(e["preference"]), e["index"]))
        task["entries"] = [{"key": k, **e} for k, e in enumerate(ordered, start=1)]
    return sorted(tasks.values(), key=lambda t: (t["persona_id"], ROLE_ORDER[t["role"]], t["id"]))


def units_of(tasks: list[dict]) -> dict[tuple[str, str, str, int], tuple[str, int]]:
    """(instance id, kind, preference, index) -> the (task id, entry key) that asks it."""
    return {(instance_id, t["kind"], e["preference"], e["index"]): (t["id"], e["key"])
            for t in tasks for instance_id in t["instances"] for e in t["entries"]}


# ---------------------------------------------------------------------------------------
# The pages
# ---------------------------------------------------------------------------------------
YES = {"messages": "Yes, sub-preference is expressed directly or indirectly in any of the user's messages",
       "request": "Yes, sub-preference is expressed directly or indirectly in the user's request"}
NO = {"messages": "No, sub-preference is not expressed at all in the user's messages",
      "request": "No, sub-preference is not expressed at all in the user's request"}
INTRO = {
    "messages": ("For each sub-preference below, check if the user expressed it in any of their messages to "
                 "the AI assistant.", "On the left, you will see a sub-preference in question form. This "
                 "represents a concern, consideration, or requirement that the user had when interacting with "
                 "the AI. On the right, you will see messages or feedback from the user to the AI assistant. "
                 "You should check if the user expressed the sub-preference in any of these messages. Indirect "
                 "or implicit expressions are also valid."),
    "request": ("For each sub-preference below, check if the user expressed it in their request to the AI "
                "assistant, then rate how realistic the request is.", "Below, you will see the user's request, "
                "then each sub-preference in question form. You should "
                "check if the request expresses the sub-preference. Indirect or implicit expressions are also "
                "valid."),
}
STYLE = """<style>
.task .entry { display: grid; grid-template-columns: 1fr 1fr; gap: 14px; }
.task .entry label { display: block; margin: 3px 0; } .task .msgs li { margin: 4px 0; }
.realism label { display: inline-block; } .task .msgs li.not-verbatim { opacity: 0.8; font-style: italic; }
</style>
"""


def _task_html(task: dict, number: int, total: int) -> str:
    kind = task["kind"]
    title, intro = INTRO[kind]
    entries = [f'<div class="box"><h3>User\'s Request</h3><p class="text">{esc(task["request"])}</p></div>'] \
        if kind == "request" else []
    for e in task["entries"]:
        right = ""
        if kind == "messages":
            items = "".join(f"<li class='text'>{esc(m)}</li>" for m in e["messages"]) + "".join(
                f"<li class='text not-verbatim'>{esc(m)} <span class='muted'>({NOT_VERBATIM})</span></li>"
                for m in e.get("not_verbatim", ())) or \
                "<li class='muted'>(no message was extracted for this sub-preference)</li>"
            right = f"<h3>User's Messages</h3><ul class='msgs'>{items}</ul>"
        options = radios(f'{task["id"]}-{e["key"]}', ((EXPRESSED, YES[kind]), (NOT_EXPRESSED, NO[kind])))
        entries.append(f'<div class="entry" data-entry="{e["key"]}"><div><h3>Sub-Preference {e["key"]}</h3>'
                       f'<p>{esc(e["entry"])}</p><fieldset><legend class="muted">Select one:</legend>'
                       f'{options}</fieldset></div><div>{right}</div></div>')
    realism = ""
    if kind == "request":
        options = radios(f'{task["id"]}-realism', ((str(k), str(k)) for k in range(1, 6)))
        realism = (f'<div class="realism box"><p><b>How realistic is it for a user to ask this request to an AI '
                   f'assistant (e.g., ChatGPT, Gemini, Perplexity, Claude, DeepSeek)?</b> 1 = not realistic at '
                   f'all, 5 = extremely realistic.</p><fieldset>{options}</fieldset></div>')
    return (f'<section class="task box" data-task="{task["id"]}" hidden>'
            f'<h2>Task {number} of {total}</h2><p><b>{esc(title)}</b></p><p class="muted">{esc(intro)}</p>'
            f'{"".join(entries)}{realism}</section>')


def render_page(name: str, tasks: list[dict]) -> str:
    header = (f'<header class="top"><span class="brand">CUPID validation · {esc(name)}</span>'
              f'<label>Your annotator ID <input id="annotator" type="text" size="24"></label></header>')
    meta = {"format": FORMAT, "page": name, "entry": "sub-preference", "file_prefix": f"annotations-{name}-"}
    return annotation_page(f"CUPID validation · {name}", header,
                           (_task_html(t, k, len(tasks)) for k, t in enumerate(tasks, start=1)), meta,
                           {"save": ("answers", "Save answers (JSON)")}, extra_head=STYLE)


def write_pages(directory: Path, tasks: list[dict], per_page: int) -> list[Path]:
    """annotation/batch-NN.html, ``per_page`` tasks each (the paper gave each annotator 16);
    tasks.json lists every task and its instances."""
    paths = []
    for start in range(0, len(tasks), per_page):
        name = f"batch-{start // per_page + 1:02d}"
        paths.append(directory / f"{name}.html")
        atomic_write_text(paths[-1], render_page(name, tasks[start:start + per_page]))
    atomic_write_text(directory / "tasks.json", json.dumps(tasks, indent=1, ensure_ascii=False))
    return paths


# ---------------------------------------------------------------------------------------
# The answers, folded in
# ---------------------------------------------------------------------------------------
def read_annotations(paths: Sequence[str | Path], tasks: dict[str, dict]) -> list[dict]:
    """Each file as ``{"annotator", "labels": {(task, entry key): label}, "realism": {task: 1-5}}``;
    BadInput names the file and field of anything else. One annotator may answer several
    pages (files), but a task once: the same annotator id on one task in two files is refused,
    as cupid-match-agreement refuses one annotator twice on a pair."""
    out, answered = [], {}
    for path in map(Path, paths):
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError) as exc:
            raise BadInput(f"{path}: not a readable JSON file of annotations ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("tasks"), dict):
            raise BadInput(f"{path}: not an annotation file (expected format {FORMAT!r} and 'tasks')")
        annotator = str(data.get("annotator") or "").strip() or path.stem
        labels, realism = {}, {}
        for key, answer in data["tasks"].items():
            task = tasks.get(key)
            if task is None:
                raise BadInput(f"{path}: field 'tasks.{key}': not a task of this validation's pages")
            if answer is None:
                continue
            if not isinstance(answer, dict):
                raise BadInput(f"{path}: field 'tasks.{key}': expected an object of 'entries' (and 'realism'), "
                               f"got {type(answer).__name__}")
            first = answered.setdefault((annotator, key), path)
            if first != path:
                raise BadInput(f"{path}: field 'tasks.{key}': annotator {annotator!r} answered this task in {first} "
                               f"already; give each annotator's answers once (or the other annotator's own id)")
            entries = answer.get("entries") or {}
            if not isinstance(entries, dict):
                raise BadInput(f"{path}: field 'tasks.{key}.entries': expected an object of entry number -> label, "
                               f"got {type(entries).__name__}")
            for index, label in entries.items():
                if label not in LABELS or not any(str(e["key"]) == str(index) for e in task["entries"]):
                    raise BadInput(f"{path}: field 'tasks.{key}.entries.{index}': {label!r} is not "
                                   f"{' or '.join(LABELS)} of an entry of the task")
                labels[(key, int(index))] = label
            if answer.get("realism") is not None:
                value = answer["realism"]
                if task["kind"] != "request" or isinstance(value, bool) or value not in range(1, 6):
                    raise BadInput(f"{path}: field 'tasks.{key}.realism': {value!r} is not a rating 1-5 of a request")
                realism[key] = value
        out.append({"annotator": annotator, "file": str(path), "labels": labels, "realism": realism})
    return out


def _alpha(data: list[list], level: str) -> tuple[float | None, str | None]:
    import numpy as np
    try:
        import krippendorff
    except ImportError:
        raise SetupError("Krippendorff's alpha needs the krippendorff package: pip install "
                         "'cupid-harness[analysis]'") from None

    matrix = np.array([[np.nan if v is None else v for v in coder] for coder in data], dtype=float)
    pairable = int((np.sum(~np.isnan(matrix), axis=0) >= 2).sum()) if matrix.size else 0
    if len(data) < 2 or pairable == 0:
        return None, "no unit rated by two coders"
    try:
        with np.errstate(invalid="ignore", divide="ignore"):  # 0 / 0 is read as undefined below
            value = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level))
    except (ValueError, ZeroDivisionError) as exc:  # e.g. every value the same: no variation to agree on
        return None, str(exc)
    if math.isnan(value):  # the paired values alike (0 / 0): undefined, and NaN is no JSON
        return None, "every value rated by two coders is the same: no disagreement to expect"
    return round(value, 4), None


REVISION_RULES = {
    "section_3_2": "§3.2: an entry is expressed if marked so by at least one annotator; revise an instance that "
                   "leaves not solvable or not challenging",
    "appendix_e": "Appendix E: revise where at least one annotator marked an entry not expressed in the messages "
                  "(or expressed in the current request)",
}


def _reason(entry: dict) -> str:
    kind = "not challenging" if entry["preference_role"] == REQUEST else "not solvable"
    return f"{kind}: {entry['preference_role']} entry {entry['index']}"


def _bad(entry: dict) -> str:
    """The label that makes an entry count against its instance."""
    return EXPRESSED if entry["preference_role"] == REQUEST else NOT_EXPRESSED


def fold(rows: list[dict], tasks: list[dict], annotations: list[dict]) -> dict:
    """Set each annotated entry's verdict to the humans' (expressed when at least one
    annotator marks it so; a "not expressed" over sessions whose extraction failed stays
    "failed"), conclude every row again, and return the human summary, with the instances
    to revise by both of the paper's readings (``REVISION_RULES``): §3.2's verdicts decide
    verified/; Appendix E's rule, stricter where annotators split, is reported beside."""
    coders = sorted({a["annotator"] for a in annotations})
    votes: dict[tuple[str, int], dict[str, str]] = {}
    for a in annotations:
        for unit, label in a["labels"].items():
            votes.setdefault(unit, {})[a["annotator"]] = label
    units = sorted(votes)
    coded = {EXPRESSED: 1, NOT_EXPRESSED: 0}
    alpha, alpha_note = _alpha([[coded.get(votes[u].get(c)) for u in units] for c in coders], "nominal")
    realism_units = sorted({k for a in annotations for k in a["realism"]})
    by_coder = {c: {} for c in coders}
    for a in annotations:
        by_coder[a["annotator"]].update(a["realism"])
    alpha_realism, _ = _alpha([[by_coder[c].get(u) for u in realism_units] for c in coders], "ordinal")
    ratings = [v for c in coders for v in by_coder[c].values()]
    asked = units_of(tasks)
    llm, human = [], []
    revise: dict[str, list] = {rule: [] for rule in REVISION_RULES}
    for row in rows:
        for entry in row["entries"]:
            if entry.get("index") is None:
                continue
            unit = asked.get((row["instance_id"], _kind(entry), entry["preference"].strip(), entry["index"]))
            if unit not in votes:
                continue
            verdict = EXPRESSED if EXPRESSED in votes[unit].values() else NOT_EXPRESSED
            entry["llm_verdict"] = entry.get("llm_verdict", entry["verdict"])
            entry["human"] = {"labels": dict(votes[unit]), "verdict": verdict}
            if entry["llm_verdict"] != FAILED:
                llm.append(coded[entry["llm_verdict"]])
                human.append(coded[verdict])
            entry["verdict"] = FAILED if verdict == NOT_EXPRESSED and entry.get("failed_sessions") else verdict
        row["solvable"], row["challenging"] = conclude(row["entries"])
        row["verified"] = bool(row["solvable"] and row["challenging"])
        if row["solvable"] is False or row["challenging"] is False:
            revise["section_3_2"].append({"instance_id": row["instance_id"], "reasons": sorted(
                {_reason(e) for e in row["entries"] if e["verdict"] == _bad(e)})})
        # Appendix E: any annotator's label against the entry; the validator's verdict where none was asked.
        flagged = {_reason(e) for e in row["entries"] if e.get("index") is not None and (
            _bad(e) in e["human"]["labels"].values() if "human" in e else e["verdict"] == _bad(e))}
        if flagged:
            revise["appendix_e"].append({"instance_id": row["instance_id"], "reasons": sorted(flagged)})
    agree = sum(a == b for a, b in zip(llm, human))
    alpha_llm, _ = _alpha([llm, human], "nominal")
    mean = sum(ratings) / len(ratings) if ratings else None
    sd = (sum((r - mean) ** 2 for r in ratings) / (len(ratings) - 1)) ** 0.5 if len(ratings) > 1 else None
    return {"files": [a["file"] for a in annotations], "annotators": len(coders),
            "entries_annotated": len(units), "alpha_entries": alpha, "alpha_entries_note": alpha_note,
            "alpha_realism": alpha_realism,
            "realism": {"mean": None if mean is None else round(mean, 3), "sd": None if sd is None else round(sd, 3),
                        "n": len(ratings)},
            "llm_human_agreement_pct": round(100 * agree / len(llm), 2) if llm else None,
            "alpha_llm_human": alpha_llm, "llm_human_pairs": len(llm), "to_revise": revise["section_3_2"],
            "revision_rules": {rule: {"rule": text, "instances": len(revise[rule]),
                                      "pct": round(100 * len(revise[rule]) / len(rows), 2) if rows else None,
                                      "to_revise": revise[rule]}
                               for rule, text in REVISION_RULES.items()}}
