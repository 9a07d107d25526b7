"""Stage 3 (Appendix B.2, Figure 17): a persona's context factors and preferences, all at
once, with the release's prompt; the last two are a contrastive pair that name each other
in ``related_factor``."""
from __future__ import annotations

import re
from typing import Any

from ..utils.models.model import Model
from .documents import (generate_validated, TEXT, exactly, find_factor, json_object, line, mapping,
                        normalize, one_of, same_text, taxonomy_field, text_field, tuple_of)
from ..utils.answers import ParseError, as_list, parse_yaml
from ..utils.models.answer_layout import Json
from ..utils.models.reask import Answer
from .taxonomy import Taxonomy, canonical_type
from ..utils.prompts import load_prompt

PROMPT = "synthesis/context_factors_generator"
# As the release sends them (context_factors_generator.py's constructor).
PARAMS = {"temperature": 1.0, "max_tokens": 8192}
# What a model writes for "no related factor".
NONE_VALUES = {"", "n/a", "na", "none", "null", "-", "not applicable"}


# -- the stage's hooks (synthesis/stages.py) --------------------------------------------
FACTOR_TOKENS = 80      # the dry run's assumption: one context factor with its preference and task types
PREFERENCE_TOKENS = 30  # ... and its contextual preference


def request(model: Model, persona: dict, inputs: dict, cfg, taxonomy: Taxonomy, **attempts: Any) -> Answer:
    return generate_factors(model, persona["description"], cfg.n_factors, taxonomy, **attempts)


def document(answer: Answer, persona: dict, inputs: dict, cfg) -> dict:
    return answer.value


def stand_in(persona: dict, inputs: dict, cfg) -> dict:
    from ..utils.forecast import filler

    return {"factors": [{"context_factor": f"Factor {i}: {filler(8, 'factor')}",
                         "contextual_preference": filler(PREFERENCE_TOKENS, f"preference{i}"),
                         "task_types": ["writing"]} for i in range(1, cfg.n_factors + 1)]}


def answer_tokens(cfg) -> int:
    return FACTOR_TOKENS * cfg.n_factors


def generate_factors(model: Model, persona_description: str, n_factors: int, taxonomy: Taxonomy, *,
                     max_attempts: int, first_variant: int = 0,
                     previous: tuple[str, str] | None = None) -> Answer:
    """Returns an ``Answer`` whose value is {"factors": [...], "warnings": [...]}."""
    system, user = load_prompt(PROMPT).render(n_factors=n_factors, user_persona=persona_description)
    return generate_validated(model, system, user,
                              lambda raw: validate_factors(raw, n_factors, taxonomy),
                              max_attempts=max_attempts, first_variant=first_variant,
                              previous=previous, json_schema=factors_schema(n_factors, taxonomy),
                              layout=Json(embedded_factors_schema(n_factors, taxonomy)), params=PARAMS)


def factors_schema(n_factors: int, taxonomy: Taxonomy) -> dict:
    """Figure 17: ``n_factors`` context factors with types from Table 7."""
    factor = json_object({
        "factor_type": one_of(taxonomy.factor_types),
        "background": TEXT,
        "factor": TEXT,
        # A bounded list: a small model repeats one item until max_tokens otherwise.
        "task_types": {"type": "array", "items": one_of(taxonomy.task_types), "minItems": 1,
                       "maxItems": len(taxonomy.task_types)},
        "preference_type": one_of(taxonomy.all_preference_types),
        "preference": TEXT,
        "related_factor": TEXT,
    })
    return json_object({"context_factors": exactly(n_factors, factor)})


# The embedded model's contrastive pair, fixed (Figure 17's own example of a good pair): a
# schema cannot make one field copy another, and each of the pair names the other.
EMBEDDED_PAIR = (("Advisor Meeting", "Event/Time", "Answers must be brief: three bullet points at most, "
                  "with no background and no examples."),
                 ("Research Team Meeting", "Event/Time", "Answers must be thorough: full paragraphs that "
                  "explain every step, its background and an example."))
# The first letter of each other factor's name, one per position, so that no two names are
# alike (nor like a pair name's); past the last letter a number follows the name.
NAME_INITIALS = "SPBCMTDFLGHWENOIKVJUYQZX"


def embedded_factors_schema(n_factors: int, taxonomy: Taxonomy) -> dict:
    """``factors_schema`` as the embedded model decodes it, so that its answer passes
    ``validate_factors``: distinct names, related_factor N/A but for EMBEDDED_PAIR last."""
    def factor(name: dict, factor_types, preference: dict, related: str) -> dict:
        return json_object({
            "factor_type": one_of(factor_types), "background": line(120), "factor": name,
            "task_types": {"type": "array", "items": one_of(taxonomy.task_types), "minItems": 1, "maxItems": 3},
            "preference_type": one_of(taxonomy.all_preference_types), "preference": preference,
            "related_factor": one_of([related])})
    others = []
    for i in range(n_factors - 2):
        initial, rounds = NAME_INITIALS[i % len(NAME_INITIALS)], i // len(NAME_INITIALS)
        name = rf"^{initial}[a-z]{{2,14}}( [A-Z][a-z]{{1,14}}){{0,2}}{f' {rounds + 1}' if rounds else ''}$"
        others.append(factor({"type": "string", "pattern": name}, taxonomy.factor_types, line(100), "N/A"))
    (name_a, type_a, preference_a), (name_b, type_b, preference_b) = EMBEDDED_PAIR
    pair = [factor(one_of([name_a]), [type_a], one_of([preference_a]), name_b),
            factor(one_of([name_b]), [type_b], one_of([preference_b]), name_a)]
    return json_object({"context_factors": tuple_of(others + pair)})


# The release's prompt names the fields factor, background and preference; we store them
# as context_factor, backstory and contextual_preference (the evaluation data's names).
FACTOR_NAME = ("factor", "context_factor")
BACKSTORY = ("background", "backstory")
PREFERENCE = ("preference", "contextual_preference")


def _task_types(value: Any, taxonomy: Taxonomy, where: str) -> list[str]:
    if isinstance(value, str):
        value = [v for v in re.split(r"[,;\n]", value) if v.strip()]
    if not isinstance(value, list) or not value:
        raise ParseError(f"{where}: 'task_types' must be a non-empty list")
    out = []
    for entry in value:
        task = canonical_type(entry, taxonomy.task_types)
        if task is None:
            raise ParseError(f"{where}: task type {entry!r} is not in the list "
                             f"({', '.join(taxonomy.task_types)})")
        if task not in out:
            out.append(task)
    return out


def validate_factors(raw: str, n_factors: int, taxonomy: Taxonomy) -> dict:
    """Returns {"factors": [...], "warnings": [...]}: exactly ``n_factors`` factors whose
    last two are a mutual contrastive pair and whose others relate to nothing."""
    items = as_list(parse_yaml(raw), "context factors", ("context_factors", "factors"))
    if len(items) != n_factors:
        raise ParseError(f"expected {n_factors} context factors, got {len(items)}")
    factors, warnings = [], []
    for i, item in enumerate(items, start=1):
        where = f"context factor {i}"
        item = mapping(item, where)
        factor_type = taxonomy_field(item, "factor_type", taxonomy.factor_types, where)
        preference_type = taxonomy_field(item, "preference_type", taxonomy.all_preference_types, where)
        related = item.get("related_factor")
        related = "N/A" if related is None or str(related).strip().lower() in NONE_VALUES \
            else str(related).strip()
        factors.append({
            "context_factor": text_field(item, FACTOR_NAME, where),
            "factor_type": factor_type,
            "backstory": text_field(item, BACKSTORY, where),
            "task_types": _task_types(item.get("task_types"), taxonomy, where),
            # As written: the sessions prompt shows the model's own list, as the release does.
            "task_types_written": (list(item["task_types"]) if isinstance(item.get("task_types"), list)
                                   else _task_types(item.get("task_types"), taxonomy, where)),
            "preference_type": preference_type,
            "contextual_preference": text_field(item, PREFERENCE, where),
            "related_factor": related,
        })
    names = [normalize(f["context_factor"]) for f in factors]
    if len(set(names)) != len(names):
        raise ParseError("context factor names must be unique")

    # Exactly one mutual contrastive pair, and it is the last two factors.
    first, second = factors[-2], factors[-1]
    for this, other in ((first, second), (second, first)):
        if this["related_factor"] == "N/A" or find_factor(this["related_factor"], [other]) is None:
            raise ParseError(
                f"the last two factors must be a contrastive pair: the related_factor of "
                f"{this['context_factor']!r} must be {other['context_factor']!r}, got "
                f"{this['related_factor']!r}")
        this["related_factor"] = other["context_factor"]
    for factor in factors[:-2]:
        if factor["related_factor"] != "N/A":
            raise ParseError(
                f"only the last two factors form a contrastive pair; "
                f"{factor['context_factor']!r} has related_factor {factor['related_factor']!r} "
                f"(write N/A)")
    if same_text(first["contextual_preference"], second["contextual_preference"]):
        raise ParseError("the preferences of the contrastive pair must contradict "
                         "each other, they are the same")
    if first["factor_type"] != second["factor_type"]:
        warnings.append(f"the contrastive pair has different factor types "
                        f"({first['factor_type']}, {second['factor_type']})")
    return {"factors": factors, "warnings": warnings}
