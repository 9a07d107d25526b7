"""Error type (the paper's Table 2): why an inference missed the true preference, as one of
four types. The evaluator answers, with its parameters (temperature 0); the prompt is ours,
built on Table 2's definitions (prompts/evaluation/error_type.yaml). It enters no task's
result: ``cupid-report --error_types`` runs it over finished low-F1 inferences
(evaluation/report/error_types.py).
"""
from __future__ import annotations

import re
from typing import Sequence

from .ask import Ask
from ...utils.answers import ParseError, find_section
from ...utils.models.answer_layout import Choice, Headed, Lines
from ...utils.dataset import Session

PROMPT = "evaluation/error_type"
RELEASE_ON_FAILED_CALL = None  # the release has no such step
TYPES = ("Incorrect Context", "Shallow Inference", "Vagueness", "Hallucination")

# The answer's layout, which a model may follow (utils/models/answer_layout.py): an analysis,
# then the one type ``parse`` reads.
LAYOUT = Headed(("### Analysis\n\n", Lines(2), "\n### Error Type\n\n", Choice("type", TYPES), "\n"))


def format_sessions(sessions: Sequence[Session]) -> str:
    """Each earlier session as the evaluated model saw it, its dialogue (the session log's
    layout: ``#### User`` / ``#### AI Assistant``), under the data's labels of it: its context
    and the preference it reveals. A type is judged on what the dialogues hold ("Hallucination":
    no clear evidence), the labels say which context each belongs to."""
    return "\n\n---\n\n".join(f"### Session {i}\n\nContext: {s.context_factor}\n\nPreference revealed: "
                                f"{s.contextual_preference}\n\n{_dialogue(s)}" for i, s in enumerate(sessions, start=1))


def _dialogue(session: Session) -> str:
    return "\n\n".join(f"#### {'User' if t.role == 'user' else 'AI Assistant'}\n\n{t.content}" for t in session.dialogue)


def ask(sessions: Sequence[Session], context: str, request: str, true_preference: str,
        inferred_preference: str) -> Ask:
    return Ask(PROMPT, {"sessions": format_sessions(sessions), "context": context, "request": request,
                        "true_preference": true_preference, "inferred_preference": inferred_preference},
               parse, layout=LAYOUT)


_TYPE_HEADER = r"(?im)^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?[ \t]*error[ \t]+type"


def parse(text: str) -> dict:
    """``{"type", "analysis"}``: the one type named on the first line under "Error Type"
    (any header style; numbering, bold, a trailing period or a gloss after the name are read
    through). No such section, or a line naming no type or several, is an error."""
    body = find_section(text, r"error[ \t]+type")
    if body is None:
        raise ParseError("no 'Error Type' section")
    line = next((l.strip() for l in body.splitlines() if l.strip()), "")
    named = [t for t in TYPES if re.search(re.escape(t), line, re.IGNORECASE)]
    if len(named) != 1:
        raise ParseError(f"the 'Error Type' line {line[:80]!r} names {len(named) or 'none'} of "
                         f"the types {', '.join(TYPES)}")
    analysis = re.split(_TYPE_HEADER, find_section(text, r"analysis") or "")[0]
    return {"type": named[0], "analysis": analysis.strip()}


def check(output: dict) -> str | None:
    return None if output.get("type") in TYPES else f"type {output.get('type')!r} is not one of {', '.join(TYPES)}"
