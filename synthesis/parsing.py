"""Pull a YAML or JSON document out of an LLM answer.

Answers often wrap the document in a fenced code block and add prose around it; we take
the fenced block in the wanted language, else any fenced block, else the whole text.
"""
from __future__ import annotations

import json
import re
from typing import Any

import yaml


# libyaml's loader when PyYAML was built with it (same safe subset, several times faster).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class InvalidGeneration(ValueError):
    """An answer that cannot be used: the message says why (it is shown to the model when
    it is asked again, and reported when a persona fails)."""


_FENCE = re.compile(r"```[ \t]*([A-Za-z]*)[^\n]*\n(.*?)(?:\n[ \t]*```|\Z)", re.DOTALL)


def extract_block(text: str, languages: tuple[str, ...]) -> str:
    """The body of the first fenced block in one of ``languages``, else of the longest
    fenced block, else the text itself (stripped)."""
    if not isinstance(text, str):
        raise InvalidGeneration(f"expected text, got {type(text).__name__}")
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    for language, body in blocks:
        if language in languages:
            return body.strip()
    if blocks:
        return max((body for _, body in blocks), key=len).strip()
    return text.strip()


def parse_yaml(text: str) -> Any:
    body = extract_block(text, ("yaml", "yml"))
    if not body:
        raise InvalidGeneration("the answer is empty")
    try:
        return yaml.load(body, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        problem = str(exc).replace("\n", " ")
        raise InvalidGeneration(f"not valid YAML: {problem}") from exc


def parse_json(text: str) -> Any:
    body = extract_block(text, ("json",))
    if not body:
        raise InvalidGeneration("the answer is empty")
    try:
        return json.loads(body)
    except json.JSONDecodeError as first:
        # Prose around an unfenced object: try the outermost {...} or [...] span.
        for opening, closing in (("{", "}"), ("[", "]")):
            start, end = body.find(opening), body.rfind(closing)
            if 0 <= start < end:
                try:
                    return json.loads(body[start:end + 1])
                except json.JSONDecodeError:
                    continue
        raise InvalidGeneration(f"not valid JSON: {first}") from first


def as_list(data: Any, what: str, keys: tuple[str, ...] = ()) -> list:
    """A top-level list, or the list under one of ``keys`` (or the only list value) of a
    mapping: models wrap lists both ways."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in keys:
            if isinstance(data.get(key), list):
                return data[key]
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) == 1:
            return lists[0]
    raise InvalidGeneration(f"expected a list of {what}, got {type(data).__name__}")
