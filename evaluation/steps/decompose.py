"""Decompose (the release's preference decomposer): a preference becomes a yes/no checklist
of at most 4 entries. The evaluator decomposes the inferred preference, whose checklist the
matcher then scores against the truth (precision); synthesis decomposes each session's
preference with the same step (its decomposer role).

As the release sends it: its prompt file (prompts/synthesis/preference_decomposer.yaml),
temperature 0 and its own max_tokens 4096 (``PARAMS``), whatever model runs it. The answer is
read the release's way first.
"""
from __future__ import annotations

from ... import config
from .. import release
from .ask import Ask
from ...utils.answers import ParseError, extract_json
from ...utils.models.answer_layout import Json

PROMPT = "synthesis/preference_decomposer"
# The release's decomposer's parameters (its integer 0 kept, so that a request's body is the
# release's): synthesis builds its decomposer model with them; in evaluation the evaluator
# runs it with its own temperature and this max_tokens.
PARAMS = {"temperature": 0, "max_tokens": config.DECOMPOSER_MAX_TOKENS}
# The release skipped an instance whose decomposition failed.
RELEASE_ON_FAILED_CALL = "drop"

# Sent to the embedded model alone (evaluation/steps/ask.py). Each entry is one yes/no
# question of 10 to 120 characters: left free, SmolLM2 filled entries with "# 1 # 2 ..." up
# to the string bound.
SCHEMA = {
    "type": "object",
    "properties": {"checklist": {"type": "array", "minItems": 1, "maxItems": 4, "items": {
        "type": "string", "pattern": r'^[A-Z][^?"\\\x00-\x1f\x7f-\x9f]{8,118}\?$'}}},
    "required": ["checklist"],
}


def ask(preference: str) -> Ask:
    return Ask(PROMPT, {"preferences": preference}, parse, layout=Json(SCHEMA),
               max_tokens=PARAMS["max_tokens"])


def parse(text: str) -> dict:
    """``{"checklist": ["...?", ...]}`` with at least one entry.

    The release's reading (JSON of the ```json block or of the whole answer) is taken as it
    is when it is a list of non-empty strings; otherwise the JSON is found leniently
    (another fence, prose around it, trailing commas) and entries given as objects are
    read from their "question"/"entry"/"item" field."""
    try:
        checklist = release.release_checklist(text)
    except release.ReleaseFailure:
        checklist = None
    if isinstance(checklist, list) and checklist and \
            all(isinstance(item, str) and item.strip() for item in checklist):
        return {"checklist": list(checklist)}
    data = extract_json(text)
    if isinstance(data, dict):
        data = data.get("checklist")
    if not isinstance(data, list):
        raise ParseError("no 'checklist' list")
    checklist = []
    for i, item in enumerate(data):
        if isinstance(item, dict):  # {"question": ...} or {"entry": ...}
            item = item.get("question") or item.get("entry") or item.get("item")
        if not isinstance(item, str) or not item.strip():
            raise ParseError(f"checklist entry {i + 1} is not a non-empty string")
        checklist.append(item.strip())
    if not checklist:
        raise ParseError("the checklist is empty")
    return {"checklist": checklist}


def check(output: dict) -> str | None:
    value = output.get("checklist")
    if not isinstance(value, list):
        return f"checklist is {type(value).__name__}, not list"
    if not all(isinstance(entry, str) for entry in value):
        return "a checklist entry is not text"
    return None


def release_view(first_answer: str, output: dict | None, sent: dict) -> dict:
    try:
        value = release.release_checklist(first_answer)
    except release.ReleaseFailure as exc:
        return {"outcome": "drop", "value": None, "note": str(exc)}
    if not isinstance(value, list) or not value:
        return {"outcome": "drop", "value": value,
                "note": "an empty or non-list checklist stops the release's aggregation"}
    ours = output and output.get("checklist")
    return {"outcome": "same" if value == ours else "differs", "value": value}


def checklist(model, preference: str, *, first_variant: int = 0) -> list[str]:
    """The checklist alone (synthesis's use). Raises ModelCallFailed or UnusableAnswer."""
    return ask(preference).answer(model, first_variant=first_variant).value["checklist"]
