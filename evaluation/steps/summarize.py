"""Summarize (the paper's Figure 23, the summary setting): one prior session's context and
preferences as bullet lists. Each session is summarized once per run directory and shared
by every instance (and both tasks) whose history holds it; infer and generate then read the
summaries (``history``) in place of the sessions. The evaluated model answers, with its
parameters. The release has no summary setting; the prompt is the paper's.
"""
from __future__ import annotations

from typing import Sequence

from .ask import Ask
from .layouts import format_session_log
from ...utils.answers import ParseError, extract_json
from ...utils.models.answer_layout import Json
from ...utils.dataset import Session

PROMPT = "evaluation/summarize_sessions"
RELEASE_ON_FAILED_CALL = None  # the release has no summary setting

SCHEMA = {
    "type": "object",
    "properties": {"summaries": {"type": "array", "items": {
        "type": "object", "properties": {
            "session_id": {"type": "integer"},
            "analysis": {"type": "string"},
            "context": {"type": "array", "items": {"type": "string"}},
            "preferences": {"type": "array", "items": {"type": "string"}}},
        "required": ["session_id", "context", "preferences"]}}},
    "required": ["summaries"],
}


def ask(session: Session) -> Ask:
    return Ask(PROMPT, {"interaction_log": format_session_log([session])},
               lambda text: parse(text, 1), layout=Json(SCHEMA))


def parse(text: str, n_sessions: int) -> dict:
    """``{"summaries": [{"session_id", "context", "preferences"}, ...]}``, one per session."""
    data = extract_json(text)
    summaries = data.get("summaries") if isinstance(data, dict) else data
    if not isinstance(summaries, list) or not summaries:
        raise ParseError("no 'summaries' list")
    if len(summaries) != n_sessions:
        raise ParseError(f"{len(summaries)} summaries for {n_sessions} sessions")
    out = []
    for i, item in enumerate(summaries, start=1):
        if not isinstance(item, dict):
            raise ParseError(f"summary {i} is not an object")
        entry = {"session_id": i}
        for key in ("context", "preferences"):
            value = item.get(key)
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ParseError(f"summary {i}: '{key}' is not a list of strings")
            entry[key] = [v.strip() for v in value if v.strip()]
        out.append(entry)
    return {"summaries": out}


def history(summaries: Sequence[dict]) -> str:
    """Session summaries in the session log's layout: ``### Session i``, then ``#### Context``
    and ``#### Preferences`` bullet lists, ``---`` after each session."""
    parts = []
    for number, summary in enumerate(summaries, start=1):
        context = "\n".join(f"- {c}" for c in summary["context"]) or "- (none)"
        preferences = "\n".join(f"- {p}" for p in summary["preferences"]) or "- (none)"
        parts.append(f"### Session {number}\n\n#### Context\n\n{context}\n\n"
                     f"#### Preferences\n\n{preferences}\n\n---\n\n")
    return "".join(parts).strip()


def check(output: dict) -> str | None:
    if not isinstance(output.get("summaries"), list):
        return f"summaries is {type(output.get('summaries')).__name__}, not list"
    return None
