"""Reading a model's answer, in both pipelines: ``ParseError`` (the answer is unusable: ask
again), JSON found leniently in an answer (``extract_json``), and the released harness's
own JSON readings (``release_json``, and ``release_checklist`` for the decomposer's answer;
kixlab/CUPID at a8560ca), which a parser takes first wherever it yields a usable value.
"""
from __future__ import annotations

import json
import re
from typing import Any


class ParseError(ValueError):
    pass


class ReleaseFailure(ValueError):
    """The release would raise here."""


def release_json(text: str) -> Any:
    """The release's ``parse_json``."""
    if "```json" in text:
        text = text.split("```json")[1].rsplit("```", 1)[0].strip()
        return json.loads(text)
    return json.loads(text.strip())


def release_checklist(text: str) -> Any:
    """The release's decomposed checklist (``parse_json(answer)['checklist']``)."""
    try:
        data = release_json(text.strip())
        return data["checklist"]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ReleaseFailure(f"checklist unreadable: {type(exc).__name__}") from exc


def extract_json(text: str) -> Any:
    """The JSON value in an answer: a ```json fenced block, else the first balanced
    object or array. Trailing commas, a common slip, are tolerated."""
    candidates = [m.group(1) for m in re.finditer(r"```(?:json|JSON)?\s*\n?(.*?)```", text, re.S)]
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start >= 0:
        candidates.append(_balanced(text, start))
    for candidate in candidates:
        if not candidate:
            continue
        for attempt in (candidate, re.sub(r",\s*([}\]])", r"\1", candidate)):
            try:
                return json.loads(attempt)
            except json.JSONDecodeError:
                continue
    raise ParseError("no valid JSON in the answer")


def _balanced(text: str, start: int) -> str:
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return text[start:]
