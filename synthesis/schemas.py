"""JSON schemas of the documents each synthesis stage asks for.

They are passed with the request so that a model that can constrain its decoding (the
embedded model through a llama.cpp grammar, a vLLM server through guided decoding) can only
write a document of the right shape (field names those of the release's prompts): the right number of items, every field, and names
drawn from the lists the prompt gives (taxonomy types, the persona's context factors).
Hosted models (OpenAI, Anthropic, Together, Google) are sent no schema, so their requests
are the release's; a vLLM server's request carries it as ``response_format`` in addition.
Models that cannot constrain decoding follow the prompt's format; the
validators in ``synthesis.validate`` check every answer either way, so a schema never
replaces a check. Every root is an object (what structured-output APIs require), whose one
list the validators find by its key.

Features are limited to those both llama.cpp's schema converter and vLLM's guided decoding
take: object, array with minItems/maxItems, string, integer, boolean, enum.
"""
from __future__ import annotations

from synthesis.taxonomy import Taxonomy

_TEXT = {"type": "string"}


def _object(properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def _exactly(n: int, items: dict) -> dict:
    return {"type": "array", "items": items, "minItems": n, "maxItems": n}


def _one_of(values) -> dict:
    return {"type": "string", "enum": list(values)}


# Figure 13 asks for a six-sentence description: six sentence ends or more (., ! or ?
# followed by a space, or at the end), on one line. The bound is loose on purpose ("Dr. Ruiz"
# counts as an end, "3.5" does not), so that a capable model under guided decoding is barely
# held back while a small one cannot stop after its first sentence. A sentence holds at most
# 400 characters: a converter reads nothing of a patterned string but its pattern, and
# without that bound SmolLM2 wrote one sentence until max_tokens, for minutes. Quotes and
# backslashes are left out because converters differ on whether a pattern applies to the
# JSON text or to the decoded string. (The validator, for unconstrained models, asks for
# three sentences or more.)
_PLAIN = r'[^.!?"\\\x00-\x1f]'
_SENTENCE = rf'({_PLAIN}|[.!?]{_PLAIN.replace("[^", "[^ ")}){{1,400}}[.!?]'
SIX_SENTENCES = rf'^({_SENTENCE} ){{5,}}{_SENTENCE}$'


def persona_batch_schema(n_personas: int) -> dict:
    """Figure 13: one {description, occupation} per persona template, in order."""
    persona = _object({"description": {"type": "string", "pattern": SIX_SENTENCES},
                       "occupation": _TEXT})
    return _object({"personas": _exactly(n_personas, persona)})


def factors_schema(n_factors: int, taxonomy: Taxonomy) -> dict:
    """Figure 17: ``n_factors`` context factors with types from Table 7."""
    factor = _object({
        "factor_type": _one_of(taxonomy.factor_types),
        "background": _TEXT,
        "factor": _TEXT,
        # A bounded list: a small model repeats one item until max_tokens otherwise.
        "task_types": {"type": "array", "items": _one_of(taxonomy.task_types), "minItems": 1,
                       "maxItems": len(taxonomy.task_types)},
        "preference_type": _one_of(taxonomy.all_preference_types),
        "preference": _TEXT,
        "related_factor": _TEXT,
    })
    return _object({"context_factors": _exactly(n_factors, factor)})


def sessions_schema(n_sessions: int, factor_names: list[str], taxonomy: Taxonomy) -> dict:
    """Figure 18: ``n_sessions`` scenarios, each naming one of the persona's factors."""
    scenario = _object({
        "id": {"type": "integer"},
        "context_factor": _one_of(factor_names),
        "preference": _TEXT,
        "task_type": _one_of(taxonomy.task_types),
        "story": _TEXT,
        "request_with_factor_and_preference": _TEXT,
        "request_with_factor": _TEXT,
        "resource": _TEXT,
    })
    return _object({"scenarios": _exactly(n_sessions, scenario)})
