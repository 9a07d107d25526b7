"""A generation stage's answer (personas, factors, sessions): the document pulled out of the
text, the JSON schema that describes its shape to models that can constrain their decoding,
and the lenient matching of the names and preferences a model copies.

Answers often wrap the document in a fenced code block and add prose around it; we take
the fenced block in the wanted language, else any fenced block, else the whole text. An
answer that cannot be used raises ``InvalidGeneration`` with a reason a model can act on
when it is asked again. Names and preferences copied by a model are matched leniently (case,
spacing, punctuation, then a close-match ratio).

Schemas are passed with the request so that a model that can constrain its decoding (the
embedded model through a llama.cpp grammar, a vLLM server through guided decoding) can only
write a document of the right shape (field names those of the release's prompts). Hosted
models (OpenAI, Anthropic, Together, Google) are sent no schema, so their requests are the
release's; a vLLM server's request carries it as ``response_format`` in addition. Every
answer is checked by its stage's validator either way, so a schema never replaces a check.
Every root is an object (what structured-output APIs require), whose one list the
validators find by its key. Features are limited to those both llama.cpp's schema converter
and vLLM's guided decoding take: object, array with minItems/maxItems, string, integer,
boolean, enum.
"""
from __future__ import annotations

import difflib
import json
import re
import unicodedata
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


# ---------------------------------------------------------------------------------------
# Names and texts a model copies
# ---------------------------------------------------------------------------------------
CLOSE_MATCH = 0.9  # difflib ratio above which two copies of a text count as the same


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return re.sub(r"[\W_]+", " ", text).strip()


def same_text(a: str, b: str) -> bool:
    na, nb = normalize(a), normalize(b)
    return na == nb or difflib.SequenceMatcher(None, na, nb).ratio() >= CLOSE_MATCH


def text_field(item: dict, key: "str | tuple[str, ...]", where: str) -> str:
    """The stripped text under ``key`` (or the first of several names that is present)."""
    keys = (key,) if isinstance(key, str) else key
    found = next((k for k in keys if k in item), keys[0])
    value = item.get(found)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise InvalidGeneration(f"{where}: field '{keys[0]}' is missing or empty")
    return value.strip()


def mapping(item: Any, where: str) -> dict:
    if not isinstance(item, dict):
        raise InvalidGeneration(f"{where}: expected a mapping, got {type(item).__name__}")
    return item


def find_factor(name: str, factors: list[dict]) -> dict | None:
    """The factor ``name`` refers to: equal after normalization, else the single closest
    name above CLOSE_MATCH."""
    wanted = normalize(name)
    for factor in factors:
        if normalize(factor["context_factor"]) == wanted:
            return factor
    scored = sorted(((difflib.SequenceMatcher(None, wanted, normalize(f["context_factor"])).ratio(), i)
                     for i, f in enumerate(factors)), reverse=True)
    if scored and scored[0][0] >= CLOSE_MATCH and (len(scored) == 1 or scored[1][0] < scored[0][0]):
        return factors[scored[0][1]]
    return None


# ---------------------------------------------------------------------------------------
# JSON schemas of the documents
# ---------------------------------------------------------------------------------------
TEXT = {"type": "string"}


def json_object(properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def exactly(n: int, items: dict) -> dict:
    return {"type": "array", "items": items, "minItems": n, "maxItems": n}


def one_of(values) -> dict:
    return {"type": "string", "enum": list(values)}
