"""Pulling a value out of a model's answer, in both pipelines: ``ParseError`` (the answer is
unusable: the message says why; it is shown to the model when a synthesis stage asks again,
and recorded when a step fails), a Markdown section found leniently (``find_section``), JSON
found leniently anywhere in an answer (``extract_json``), and a stage's YAML or JSON document
(``parse_yaml``, ``parse_json``): the fenced block in the wanted language, else any fenced
block, else the whole text.
"""
from __future__ import annotations

import json
import re
from typing import Any

import yaml


class ParseError(ValueError):
    """An answer that cannot be used; the message says why."""


def strip_decoration(text: str) -> str:
    text = text.strip()
    text = re.sub(r"^```[A-Za-z]*\s*\n?|\n?```\s*$", "", text).strip()
    text = re.sub(r"^\s*(?:[-*]\s+|>\s*)", "", text)
    text = text.strip().strip("*_").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'“”":
        text = text[1:-1].strip()
    if text.startswith("“") and text.endswith("”"):
        text = text[1:-1].strip()
    return text


def find_section(text: str, header_pattern: str) -> str | None:
    """Return the body under the first header matching ``header_pattern`` (a regex matched
    case-insensitively against the header's words), up to the next header.

    Headers may be markdown (``### Title``), bold (``**Title**`` or ``**Title:** body``) or
    a plain ``Title:`` line.
    """
    header = re.compile(
        r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?[ \t]*(?:" + header_pattern +
        r")[ \t]*:?[ \t]*(?:\*\*|__)?[ \t]*:?[ \t]*(?P<rest>.*)$",
        re.IGNORECASE | re.MULTILINE)
    match = header.search(text)
    if match is None:
        return None
    body_lines = [match.group("rest")] if match.group("rest").strip() else []
    for line in text[match.end():].splitlines():
        if re.match(r"^\s*#{1,6}\s+\S", line):
            break
        body_lines.append(line)
    return "\n".join(body_lines).strip()


def extract_json(text: str) -> Any:
    """The JSON value in an answer: a ```json fenced block, else the first object or array
    (text may follow it). Trailing commas, a common slip, are tolerated."""
    fenced = [(m.group(1), True) for m in re.finditer(r"```(?:json|JSON)?\s*\n?(.*?)```", text, re.S)]
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    for candidate, whole in fenced + ([(text[start:], False)] if start >= 0 else []):
        candidate = candidate.strip()
        for attempt in (candidate, re.sub(r",\s*([}\]])", r"\1", candidate)):
            try:
                value, end = _DECODER.raw_decode(attempt)
            except json.JSONDecodeError:
                continue
            if not (whole and attempt[end:].strip()):  # a fenced block is JSON and nothing else
                return value
    raise ParseError("no valid JSON in the answer")


_DECODER = json.JSONDecoder()


# libyaml's loader when PyYAML was built with it (same safe subset, several times faster).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_FENCE = re.compile(r"```[ \t]*([A-Za-z]*)[^\n]*\n(.*?)(?:\n[ \t]*```|\Z)", re.DOTALL)


def extract_block(text: str, languages: tuple[str, ...]) -> str:
    """The body of the first fenced block in one of ``languages``, else of the longest
    fenced block, else the text itself (stripped)."""
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}")
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
        raise ParseError("the answer is empty")
    try:
        return yaml.load(body, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        problem = str(exc).replace("\n", " ")
        raise ParseError(f"not valid YAML: {problem}") from exc


def parse_json(text: str) -> Any:
    body = extract_block(text, ("json",))
    if not body:
        raise ParseError("the answer is empty")
    try:
        return json.loads(body)
    except json.JSONDecodeError as first:
        try:  # prose around an unfenced document
            return extract_json(body)
        except ParseError:
            raise ParseError(f"not valid JSON: {first}") from first


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
    raise ParseError(f"expected a list of {what}, got {type(data).__name__}")
