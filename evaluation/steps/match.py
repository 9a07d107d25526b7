"""Match (the paper's Figure 14): how much a preference covers each entry of a checklist,
labelled Fully Covered (1), Partially Covered (0.5) or Not Covered (0). Run both ways:
the inferred checklist against the true preference (precision) and the true checklist against
the inferred preference (recall). The matcher answers: the evaluator (GPT-4o, with the
release's eight few-shot examples) or PrefMatcher-7B (its own prompt, no examples).

As the release sends it: its prompt files, the checklist as numbered lines (layouts.py),
the few-shot block rendered from the prompt file's examples, the matcher's parameters
(temperature 0, max_tokens 8192; config.ROLE_PARAMS).
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from .. import release
from ..release import LABEL_SCORES
from .ask import PROMPT_EXAMPLES, Ask
from .layouts import few_shot_block, format_checklist
from ...utils.answers import ParseError, extract_json
from ...utils.models.answer_layout import Json

PROMPT = "evaluation/preference_matcher"
PROMPT_PREFMATCHER = "evaluation/preference_matcher_model"
# The release scored a failed match call 0.
RELEASE_ON_FAILED_CALL = "zero"


def ask(preference: str, checklist: Sequence[str], *, prefmatcher: bool = False) -> Ask:
    checklist = list(checklist)
    values = {"preference": preference, "checklist": format_checklist(checklist)}
    if prefmatcher:
        return Ask(PROMPT_PREFMATCHER, values, lambda text: parse(text, checklist),
                   layout=Json(schema(len(checklist))))
    return Ask(PROMPT, {**values, "examples": few_shot_block()}, lambda text: parse(text, checklist),
               refs={"examples": PROMPT_EXAMPLES}, layout=Json(schema(len(checklist))))


def normalize_label(label: Any) -> str:
    if not isinstance(label, str):
        raise ParseError(f"label {label!r} is not a string")
    key = re.sub(r"[\s_\-]+", " ", label.strip().strip("\"'*").lower()).title()
    if key in LABEL_SCORES:
        return key
    raise ParseError(f"unknown label {label!r}")


def parse(text: str, checklist: Sequence[str]) -> dict:
    """Figure 14's answer: every checklist entry labelled exactly once.

    Entries are identified by ``index`` (1-based as in the prompt; a 0-based answer is
    accepted when it is exactly 0..n-1), or by position when the answer lists exactly n
    results without indices.
    """
    data = extract_json(text)
    results = data.get("results") if isinstance(data, dict) else data
    if not isinstance(results, list):
        raise ParseError("no 'results' list")
    n = len(checklist)
    parsed = []
    for i, item in enumerate(results):
        if not isinstance(item, dict):
            raise ParseError(f"result {i + 1} is not an object")
        parsed.append((item.get("index"), normalize_label(item.get("label"))))
    indices = []
    for position, (index, _) in enumerate(parsed):
        if index is None:
            indices.append(None)
            continue
        found = re.fullmatch(r"\s*\(?\s*(\d+)\s*[.):]?\s*", str(index))  # 2, "2", "2.", "(2)"
        if found is None:
            raise ParseError(f"result {position + 1} has index {index!r}")
        indices.append(int(found.group(1)))
    if None in indices:
        if len(parsed) != n:
            raise ParseError(f"{len(parsed)} results, some without indices, for {n} checklist entries")
        indices = list(range(1, n + 1))  # the results in the checklist's order
    elif sorted(indices) == list(range(n)):
        indices = [i + 1 for i in indices]
    by_index: dict[int, str] = {}
    for index, (_, label) in zip(indices, parsed):
        if not 1 <= index <= n:
            raise ParseError(f"index {index} is outside 1..{n}")
        if index in by_index and by_index[index] != label:
            raise ParseError(f"entry {index} is labelled twice, differently")
        by_index[index] = label
    missing = [i for i in range(1, n + 1) if i not in by_index]
    if missing:
        raise ParseError(f"entries {missing} are not labelled")
    return {"results": [
        {"index": i, "entry": checklist[i - 1], "label": by_index[i],
         "score": LABEL_SCORES[by_index[i]]}
        for i in range(1, n + 1)]}


def schema(n_entries: int) -> dict:
    """A JSON schema of the answer, for models that decode under one (the embedded model)."""
    return {
        "type": "object",
        "properties": {"results": {
            "type": "array", "minItems": n_entries, "maxItems": n_entries,
            "items": {"type": "object", "properties": {
                "index": {"type": "integer"},
                "entry": {"type": "string"},
                "label": {"type": "string", "enum": list(LABEL_SCORES)}},
                "required": ["index", "entry", "label"]}}},
        "required": ["results"],
    }


def check(output: dict) -> str | None:
    results = output.get("results")
    if not isinstance(results, list):
        return "no results list"
    for i, item in enumerate(results, start=1):
        label = item.get("label") if isinstance(item, dict) else None
        if label not in LABEL_SCORES:
            return f"result {i} has label {label!r}, not one of {sorted(LABEL_SCORES)}"
        if item.get("score") != LABEL_SCORES[label] or isinstance(item.get("score"), bool):
            return f"result {i} has score {item.get('score')!r}, not {LABEL_SCORES[label]} for {label!r}"
    return None


def release_view(first_answer: str, output: dict | None, sent: dict) -> dict:
    """The release's matched count (a label it does not know scores 0; an answer it cannot
    read scores the instance 0). PrefMatcher's answer is read as the release reads it:
    the whole JSON value is the results list."""
    prefmatcher = sent.get("prompt") == PROMPT_PREFMATCHER
    try:
        matched = release.release_matched(release.release_match_results(first_answer, prefmatcher))
    except release.ReleaseFailure as exc:
        return {"outcome": "zero", "value": None, "note": str(exc)}
    ours = sum(r["score"] for r in output["results"]) if output else None
    return {"outcome": "same" if ours is not None and matched == ours else "differs", "value": matched}
