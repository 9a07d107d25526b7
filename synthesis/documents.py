"""What the generation stages (personas, factors, sessions) share about their documents: the
fields read from a parsed document, the names and preferences a model copies matched
leniently (case, spacing, punctuation, then a close-match ratio), and the JSON schema that
describes a document's shape to models that can constrain their decoding. (The document is
pulled out of the answer by utils/answers.py; a problem raises its
``ParseError`` with a reason a model can act on when it is asked again.)

Schemas are passed with the request so that a model that can constrain its decoding (the
embedded model, a vLLM server through guided decoding) can only
write a document of the right shape (field names those of the release's prompts). Hosted
models (OpenAI, Anthropic, Together, Google) are sent no schema, so their requests are the
release's; a vLLM server's request carries it as ``response_format`` in addition. Every
answer is checked by its stage's validator either way, so a schema never replaces a check.
Every root is an object (what structured-output APIs require), whose one list the
validators find by its key. Features are limited to those both llama.cpp's schema converter
and vLLM's guided decoding take: object, array with minItems/maxItems, string, integer,
boolean, enum.

Each stage also declares its answer's layout (utils/models/answer_layout.py), a tighter schema
that a model following layouts is held to instead (the embedded 135M model; as the
evaluation's steps' layouts, it is no part of other models' requests): what a validator checks
across fields (distinct names, the contrastive pair naming each other, a session's factor
and preference where the journey puts them) is written into it, position by position
(``prefixItems``, patterns, single-value enums), and every free text is one bounded line.
Such a document passes the validators by construction; what it says means nothing.
"""
from __future__ import annotations

import difflib
import re
import unicodedata
from typing import Any, Sequence

from .taxonomy import canonical_type
from ..utils.answers import ParseError
from ..utils.models.answer_layout import Json
from ..utils.models.reask import Answer, UnusableAnswer, ask_until_usable
from ..utils.prompts import load_prompt

# The message after an invalid answer; its ``{reason}`` is filled by the re-ask loop.
FEEDBACK_PROMPT = "synthesis/reask_invalid_answer"


def generate_validated(model, system: str, user: str, validate, *, max_attempts: int,
                       first_variant: int = 0, previous: tuple[str, str] | None = None,
                       json_schema: dict | None = None, layout: Json | None = None,
                       params: dict | None = None) -> Answer:
    """Ask until ``validate(raw)`` returns the document (``Answer.value``) instead of raising
    ParseError; a re-ask shows the model its invalid answer and the reason (the release has
    no re-ask to follow here). ``json_schema`` describes the document to models that can
    constrain their decoding; the others ignore it. ``layout`` replaces it for a model that
    follows layouts (the embedded one). ``first_variant``/``previous`` (the last
    raw answer and its reason) continue an earlier run's failed attempts instead of replaying
    them from the cache. Raises UnusableAnswer ("invalid after N attempts: ...") or the
    model layer's ModelCallFailed."""
    try:
        return ask_until_usable(model, system, [{"role": "user", "content": user}], validate,
                                tries=max_attempts, invalid=(ParseError,), first_variant=first_variant,
                                show_invalid=load_prompt(FEEDBACK_PROMPT).user_prompt,
                                previous=previous, **(params or {}), json_schema=json_schema, layout=layout)
    except UnusableAnswer as exc:
        raise UnusableAnswer(f"invalid after {max_attempts} attempts: {exc.reason}", exc.answer) from None


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
        raise ParseError(f"{where}: field '{keys[0]}' is missing or empty")
    return value.strip()


def mapping(item: Any, where: str) -> dict:
    if not isinstance(item, dict):
        raise ParseError(f"{where}: expected a mapping, got {type(item).__name__}")
    return item


def taxonomy_field(item: dict, key: str, options: Sequence[str], where: str) -> str:
    """The taxonomy type under ``key``, in the spelling of ``options``."""
    value = canonical_type(item.get(key), options)
    if value is None:
        raise ParseError(f"{where}: {key} {item.get(key)!r} is not one of {', '.join(options)}")
    return value


def find_factor(name: str, factors: list[dict]) -> dict | None:
    """The factor ``name`` refers to: the single closest name above CLOSE_MATCH (equal after
    normalization: 1.0; the names are distinct after it)."""
    wanted = normalize(name)
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


def tuple_of(items: list[dict]) -> dict:
    """An array whose item at each position has its own schema."""
    return {"type": "array", "prefixItems": items, "items": False, "minItems": len(items),
            "maxItems": len(items)}


# A line of text: no quotes or backslashes (converters differ on whether a pattern applies
# to the JSON text or to the decoded string) and no control characters (YAML, which reads
# the factors and sessions, refuses C1 ones).
PLAIN = r'[^"\\\x00-\x1f\x7f-\x9f]'


def line(max_chars: int, end: str = "") -> dict:
    """One line of at most ``max_chars`` that starts with a letter or a digit (never blank),
    then ``end`` (a pattern)."""
    return {"type": "string", "pattern": rf"^[A-Za-z0-9]{PLAIN}{{0,{max_chars - 1}}}{end}$"}
