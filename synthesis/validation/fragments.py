"""Extract fragments (§3.2, Appendix E, the paper's Figure 20): for one preference's checklist
and one dialogue, the user's message fragments that express or hint at each entry, and how
implicitly (1 extremely explicit to 7 extremely implicit). The validator answers, with the
evaluator role's parameters (the paper's was gpt-4o-2024-11-20 at temperature 0). The release
has no validation: the prompt is the paper's (prompts/validation/extract_fragments.yaml).

The model's fragments are what it says; ``kept_fragments`` keeps only those that stand in
the dialogue's user messages (case, whitespace, quotation marks and ellipses aside), so that
an invented fragment, or one copied from the assistant's turns, never makes an entry
expressed.
"""
from __future__ import annotations

import re
from typing import Sequence

from ...evaluation.steps.ask import Ask
from ...evaluation.steps.layouts import format_checklist, format_session_log
from ...utils.answers import ParseError, extract_json
from ...utils.models.answer_layout import Json
from ...utils.dataset import Session, Turn

PROMPT = "validation/extract_fragments"

# Bounded: left free, SmolLM2 listed fragments until the 4,096-token limit cut the JSON. The
# rating is an enum: llama-cpp-python's converter ignores minimum and maximum.
ITEM = {"type": "object", "properties": {
    "item_index": {"type": "integer"}, "item_description": {"type": "string"},
    "analysis": {"type": "string", "maxLength": 300},
    "fragments": {"type": "array", "items": {"type": "string", "maxLength": 200}, "maxItems": 3},
    "rating": {"type": "integer", "enum": list(range(1, 8))}},
    "required": ["item_index", "analysis", "fragments", "rating"]}


def schema(n_entries: int) -> dict:
    """One item per entry, in order (for a model that constrains its decoding: the embedded
    one; Figure 20's answer is a bare list, which structured-output APIs do not take as a
    root, hence ``items``)."""
    items = [{**ITEM, "properties": {**ITEM["properties"], "item_index": {"type": "integer", "enum": [i]}}}
             for i in range(1, n_entries + 1)]
    return {"type": "object", "properties": {"items": {"type": "array", "prefixItems": items, "items": False,
                                                       "minItems": n_entries, "maxItems": n_entries}},
            "required": ["items"]}


def ask(checklist: Sequence[str], session: Session) -> Ask:
    """The request for one dialogue (a prior session, or the current request alone as a
    one-message dialogue: ``request_session``)."""
    n = len(checklist)
    return Ask(PROMPT, {"checklist": format_checklist(checklist),
                        "interaction_session": format_session_log([session])},
               lambda text: parse(text, n), layout=Json(schema(n)))


def request_session(request: str) -> Session:
    return Session(context_factor="", contextual_preference="", dialogue=(Turn("user", request),))


def _rating(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if 1 <= value <= 7 and float(value).is_integer() else None
    found = re.match(r"\s*(\d+)", str(value or ""))
    return _rating(int(found.group(1))) if found else None


def parse(text: str, n_entries: int) -> dict:
    """``{"items": [{"index", "fragments", "rating", "analysis"}, ...]}``, one per entry in
    checklist order. Entries are found by ``item_index`` (1-based); an entry with fragments
    needs a rating in 1-7 (one without may have none)."""
    data = extract_json(text)
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), [data] if "item_index" in data else None)
    if not isinstance(data, list):
        raise ParseError("no list of checklist items")
    by_index: dict[int, dict] = {}
    for position, item in enumerate(data, start=1):
        if not isinstance(item, dict):
            raise ParseError(f"item {position} is not an object")
        try:
            index = int(item.get("item_index", position))
        except (TypeError, ValueError):
            raise ParseError(f"item {position}: item_index {item.get('item_index')!r} is not a number") from None
        fragments = item.get("fragments") or []
        if isinstance(fragments, str):
            fragments = [fragments]
        if not isinstance(fragments, list) or not all(isinstance(f, str) for f in fragments):
            raise ParseError(f"item {index}: 'fragments' is not a list of strings")
        fragments = [f for f in fragments if f.strip()]
        rating = _rating(item.get("rating"))
        if fragments and rating is None:
            raise ParseError(f"item {index}: rating {item.get('rating')!r} is not a number in 1-7")
        if 1 <= index <= n_entries:
            by_index[index] = {"index": index, "fragments": fragments, "rating": rating,
                               "analysis": str(item.get("analysis") or "")}
    missing = [i for i in range(1, n_entries + 1) if i not in by_index]
    if missing:
        raise ParseError(f"no item for checklist entr{'y' if len(missing) == 1 else 'ies'} "
                         f"{', '.join(map(str, missing))} of {n_entries}")
    return {"items": [by_index[i] for i in range(1, n_entries + 1)]}


def check(output: dict) -> str | None:
    items = output.get("items")
    if not isinstance(items, list) or not items:
        return "items is not a non-empty list"
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("fragments"), list):
            return "an item has no fragments list"
        if item.get("rating") is not None and _rating(item["rating"]) != item["rating"]:
            return f"rating {item['rating']!r} is not a number in 1-7"
    return None


QUOTES = "\"'`\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u00ab\u00bb\u2039\u203a"
ELLIPSIS = re.compile(r"\s*(?:\.\s*\.\s*\.|\u2026|\[\s*(?:\.\s*\.\s*\.|\u2026)\s*\])\s*")


def _squash(text: str) -> str:
    """Case, runs of whitespace and quotation marks (straight or curly) aside."""
    return " ".join(text.translate({ord(q): None for q in QUOTES}).split()).casefold()


def found_in(fragment: str, message: str) -> bool:
    """Whether ``fragment`` stands in ``message`` (both squashed), an ellipsis in it standing
    for words left out: its pieces in order."""
    at = 0
    for piece in (_squash(p) for p in ELLIPSIS.split(fragment)):
        if piece:
            at = message.find(piece, at)
            if at < 0:
                return False
            at += len(piece)
    return True


def kept_fragments(fragments: Sequence[str], session: Session) -> tuple[list[str], list[str]]:
    """(kept, dropped): a fragment is kept when it stands in one of the dialogue's user
    messages, case, whitespace and quotation marks aside and an ellipsis standing for words
    left out (the validator trims and quotes what it copies); any other (invented,
    paraphrased, or the assistant's) is dropped: the annotators see it marked "not found
    verbatim" (annotation.py), but it never makes an entry expressed."""
    user_messages = [_squash(turn.content) for turn in session.dialogue if turn.role == "user"]
    kept, dropped = [], []
    for fragment in fragments:
        wanted = bool(_squash(ELLIPSIS.sub(" ", fragment)))
        (kept if wanted and any(found_in(fragment, message) for message in user_messages) else dropped).append(fragment)
    return kept, dropped
