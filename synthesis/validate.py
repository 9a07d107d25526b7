"""Validators of every generation: raw answer in, parsed and canonical data out.

Each raises InvalidGeneration with a reason a model can act on when it is asked again.
Names and preferences copied by a model are matched leniently (case, spacing, punctuation,
then a close-match ratio), and stored in the spelling of the factor list, so that a
session's preference is exactly the factor's preference the template asked for.
"""
from __future__ import annotations

import difflib
import re
import unicodedata
from typing import Any

from synthesis.journey import A, A_CHANGED, B, FINAL, OTHER, Journey
from synthesis.parsing import InvalidGeneration, as_list, parse_json, parse_yaml
from synthesis.taxonomy import Taxonomy, canonical_type

CLOSE_MATCH = 0.9  # difflib ratio above which two copies of a text count as the same
_NONE_VALUES = {"", "n/a", "na", "none", "null", "-", "not applicable"}


# ---------------------------------------------------------------------------------------
# Text helpers
# ---------------------------------------------------------------------------------------
def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return re.sub(r"[\W_]+", " ", text).strip()


def same_text(a: str, b: str) -> bool:
    na, nb = normalize(a), normalize(b)
    return na == nb or difflib.SequenceMatcher(None, na, nb).ratio() >= CLOSE_MATCH


def _text_field(item: dict, key: "str | tuple[str, ...]", where: str) -> str:
    """The stripped text under ``key`` (or the first of several names that is present)."""
    keys = (key,) if isinstance(key, str) else key
    found = next((k for k in keys if k in item), keys[0])
    value = item.get(found)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise InvalidGeneration(f"{where}: field '{keys[0]}' is missing or empty")
    return value.strip()


def _mapping(item: Any, where: str) -> dict:
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
# Stage 2: persona descriptions (Figure 13)
# ---------------------------------------------------------------------------------------
def validate_persona_batch(raw: str, n_expected: int) -> list[dict]:
    items = as_list(parse_json(raw), "personas", ("personas", "persona_descriptions"))
    if len(items) != n_expected:
        raise InvalidGeneration(f"expected {n_expected} persona descriptions, got {len(items)}")
    out = []
    for i, item in enumerate(items, start=1):
        where = f"persona {i}"
        item = _mapping(item, where)
        description = _text_field(item, "description", where)
        occupation = _text_field(item, "occupation", where)
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", description) if s.strip()]
        if len(sentences) < 3:
            raise InvalidGeneration(f"{where}: the description should have six sentences, "
                                    f"got {len(sentences)}")
        out.append({"description": description, "occupation": occupation})
    return out


# ---------------------------------------------------------------------------------------
# Stage 3: context factors (Figure 17)
# ---------------------------------------------------------------------------------------
FACTOR_FIELDS = ("factor_type", "backstory", "context_factor", "task_types",
                 "preference_type", "contextual_preference", "related_factor")
# The release's prompt names the fields factor, background and preference; we store them
# as context_factor, backstory and contextual_preference (the evaluation data's names).
FACTOR_NAME = ("factor", "context_factor")
BACKSTORY = ("background", "backstory")
PREFERENCE = ("preference", "contextual_preference")


def _task_types(value: Any, taxonomy: Taxonomy, where: str) -> list[str]:
    if isinstance(value, str):
        value = [v for v in re.split(r"[,;\n]", value) if v.strip()]
    if not isinstance(value, list) or not value:
        raise InvalidGeneration(f"{where}: 'task_types' must be a non-empty list")
    out = []
    for entry in value:
        task = canonical_type(entry, taxonomy.task_types)
        if task is None:
            raise InvalidGeneration(f"{where}: task type {entry!r} is not in the list "
                                    f"({', '.join(taxonomy.task_types)})")
        if task not in out:
            out.append(task)
    return out


def validate_factors(raw: str, n_factors: int, taxonomy: Taxonomy) -> dict:
    """Returns {"factors": [...], "warnings": [...]}: exactly ``n_factors`` factors whose
    last two are a mutual contrastive pair and whose others relate to nothing."""
    items = as_list(parse_yaml(raw), "context factors", ("context_factors", "factors"))
    if len(items) != n_factors:
        raise InvalidGeneration(f"expected {n_factors} context factors, got {len(items)}")
    factors, warnings = [], []
    for i, item in enumerate(items, start=1):
        where = f"context factor {i}"
        item = _mapping(item, where)
        factor_type = canonical_type(item.get("factor_type"), taxonomy.factor_types)
        if factor_type is None:
            raise InvalidGeneration(f"{where}: factor_type {item.get('factor_type')!r} is not "
                                    f"one of {', '.join(taxonomy.factor_types)}")
        preference_type = canonical_type(item.get("preference_type"), taxonomy.all_preference_types)
        if preference_type is None:
            raise InvalidGeneration(f"{where}: preference_type {item.get('preference_type')!r} "
                                    f"is not one of {', '.join(taxonomy.all_preference_types)}")
        related = item.get("related_factor")
        related = "N/A" if related is None or str(related).strip().lower() in _NONE_VALUES \
            else str(related).strip()
        factors.append({
            "context_factor": _text_field(item, FACTOR_NAME, where),
            "factor_type": factor_type,
            "backstory": _text_field(item, BACKSTORY, where),
            "task_types": _task_types(item.get("task_types"), taxonomy, where),
            # As written: the sessions prompt shows the model's own list, as the release does.
            "task_types_written": (list(item["task_types"]) if isinstance(item.get("task_types"), list)
                                   else _task_types(item.get("task_types"), taxonomy, where)),
            "preference_type": preference_type,
            "contextual_preference": _text_field(item, PREFERENCE, where),
            "related_factor": related,
        })
    names = [normalize(f["context_factor"]) for f in factors]
    if len(set(names)) != len(names):
        raise InvalidGeneration("context factor names must be unique")

    # Exactly one mutual contrastive pair, and it is the last two factors.
    first, second = factors[-2], factors[-1]
    for this, other in ((first, second), (second, first)):
        if this["related_factor"] == "N/A" or find_factor(this["related_factor"], [other]) is None:
            raise InvalidGeneration(
                f"the last two factors must be a contrastive pair: the related_factor of "
                f"{this['context_factor']!r} must be {other['context_factor']!r}, got "
                f"{this['related_factor']!r}")
        this["related_factor"] = other["context_factor"]
    for factor in factors[:-2]:
        if factor["related_factor"] != "N/A":
            raise InvalidGeneration(
                f"only the last two factors form a contrastive pair; "
                f"{factor['context_factor']!r} has related_factor {factor['related_factor']!r} "
                f"(write N/A)")
    if same_text(first["contextual_preference"], second["contextual_preference"]):
        raise InvalidGeneration("the preferences of the contrastive pair must contradict "
                                "each other, they are the same")
    if first["factor_type"] != second["factor_type"]:
        warnings.append(f"the contrastive pair has different factor types "
                        f"({first['factor_type']}, {second['factor_type']})")
    return {"factors": factors, "warnings": warnings}


# ---------------------------------------------------------------------------------------
# Stage 4: sessions (Figure 18)
# ---------------------------------------------------------------------------------------
RESOURCE_PLACEHOLDER = "[resource]"


def _resource_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    import yaml  # a structured resource (a table, a mapping): keep it as YAML text
    return yaml.safe_dump(value, allow_unicode=True, sort_keys=False).strip()


def fill_resource(request: str, resource: Any) -> tuple[str, list[str]]:
    """The request as the release sends it to the assistant simulator: the model's text
    unstripped, ``[resource]`` replaced by the resource as written. A resource without a
    placeholder is left out, as the release leaves it out, with a warning."""
    warnings = []
    text = _resource_text(resource)
    if RESOURCE_PLACEHOLDER in request:
        if not text:
            raise InvalidGeneration("the request holds [resource] but the resource is empty")
        return request.replace(RESOURCE_PLACEHOLDER, resource if isinstance(resource, str) else text), warnings
    if text:
        warnings.append("a resource was given without a [resource] placeholder; left out")
    return request, warnings


def validate_sessions(raw: str, journey: Journey, factors: list[dict], taxonomy: Taxonomy) -> dict:
    """Check the scenarios against the journey template and the factor list.

    Returns {"sessions": [...], "current_factor", "contrastive_factor", "original_preference",
    "changed_preference", "warnings"}. Each session holds its role in the template and
    ``request`` (``request_with_factor`` with the resource filled in)."""
    items = as_list(parse_yaml(raw), "scenarios", ("scenarios", "sessions", "user_journey", "journey"))
    n = journey.n_sessions
    if len(items) != n:
        raise InvalidGeneration(f"expected {n} scenarios, got {len(items)}")
    pair = [find_factor(journey.main_factor, factors), find_factor(journey.contrastive_factor, factors)]
    if None in pair:
        raise ValueError("the journey's factors are not in the factor list")  # our bug, not the model's

    parsed = []
    for i, item in enumerate(items, start=1):
        where = f"scenario {i}"
        item = _mapping(item, where)
        if "id" in item and str(item["id"]).strip() != str(i):
            raise InvalidGeneration(f"{where}: scenarios must be numbered 1 to {n} in order, "
                                    f"got id {item['id']!r}")
        task_type = canonical_type(item.get("task_type"), taxonomy.task_types)
        if task_type is None:
            raise InvalidGeneration(f"{where}: task_type {item.get('task_type')!r} is not one of "
                                    f"{', '.join(taxonomy.task_types)}")
        factor_name = _text_field(item, "context_factor", where)
        request_with_factor = _text_field(item, "request_with_factor", where)
        raw_request = item["request_with_factor"]
        factor = find_factor(factor_name, factors)
        if factor is None:
            raise InvalidGeneration(f"{where}: context factor {factor_name!r} is not in the list "
                                    f"of context factors")
        parsed.append({
            "index": i,
            "role": journey.roles[i - 1],
            "factor": factor,
            "contextual_preference": _text_field(item, PREFERENCE, where),
            "task_type": task_type,
            "story": _text_field(item, "story", where),
            "request_with_factor_and_preference":
                _text_field(item, "request_with_factor_and_preference", where),
            "request_with_factor": request_with_factor,
            "resource": _resource_text(item.get("resource")),
            "raw_request": raw_request if isinstance(raw_request, str) else request_with_factor,
            "raw_resource": item.get("resource"),
        })

    # Which of the pair the model made A: the factor of the first A session.
    first_a = parsed[journey.positions(A)[0] - 1]["factor"]
    if first_a not in pair:
        raise InvalidGeneration(
            f"scenario {journey.positions(A)[0]} must use context factor A, one of "
            f"{pair[0]['context_factor']!r} or {pair[1]['context_factor']!r}; got "
            f"{first_a['context_factor']!r}")
    factor_a = first_a
    factor_b = pair[1] if factor_a is pair[0] else pair[0]
    wanted = {A: factor_a, A_CHANGED: factor_a, FINAL: factor_a, B: factor_b}
    changed_preference = None
    warnings: list[str] = []
    for session in parsed:
        where = f"scenario {session['index']}"
        role, factor = session["role"], session["factor"]
        if role == OTHER:
            if factor is factor_a or factor is factor_b:
                raise InvalidGeneration(
                    f"{where}: must use a context factor other than "
                    f"{factor_a['context_factor']!r} and {factor_b['context_factor']!r}, which "
                    f"appear only where the journey structure says")
        elif factor is not wanted[role]:
            label = "A" if wanted[role] is factor_a else "B"
            raise InvalidGeneration(
                f"{where}: must use context factor {label} ({wanted[role]['context_factor']!r}), "
                f"got {factor['context_factor']!r}")
        preference = session["contextual_preference"]
        if role in (A_CHANGED, FINAL):
            if same_text(preference, factor_a["contextual_preference"]):
                raise InvalidGeneration(f"{where}: preference A' must differ from (contradict) "
                                        f"the original preference A")
            if changed_preference is None:
                changed_preference = preference
            elif not same_text(preference, changed_preference):
                raise InvalidGeneration(f"{where}: the changed preference A' must be the same in "
                                        f"every A' scenario and the final scenario")
            session["contextual_preference"] = changed_preference
        else:
            if not same_text(preference, factor["contextual_preference"]):
                raise InvalidGeneration(
                    f"{where}: the preference must be the one listed for "
                    f"{factor['context_factor']!r}: {factor['contextual_preference']!r}")
            session["contextual_preference"] = factor["contextual_preference"]
        if session["task_type"] not in factor["task_types"]:
            warnings.append(f"{where}: task type {session['task_type']!r} is not one listed for "
                            f"{factor['context_factor']!r}")
        session["request_sent"], notes = fill_resource(session.pop("raw_request"),
                                                       session.pop("raw_resource"))
        session["request"] = session["request_sent"].strip()
        warnings.extend(f"{where}: {note}" for note in notes)

    sessions = []
    for session in parsed:
        factor = session.pop("factor")
        sessions.append({"index": session.pop("index"), "role": session.pop("role"),
                         "context_factor": factor["context_factor"], **session})
    return {
        "sessions": sessions,
        "current_factor": factor_a["context_factor"],
        "contrastive_factor": factor_b["context_factor"],
        "original_preference": factor_a["contextual_preference"],
        "changed_preference": changed_preference,
        "contrastive_preference": factor_b["contextual_preference"],
        "warnings": warnings,
    }


# ---------------------------------------------------------------------------------------
# Stage 6: one turn of the user simulator (Figure 19, our output format)
# ---------------------------------------------------------------------------------------
def validate_user_turn(raw: str, n_items: int) -> dict:
    data = parse_json(raw)
    if not isinstance(data, dict):
        raise InvalidGeneration(f"expected a JSON object, got {type(data).__name__}")
    score = data.get("score")
    if isinstance(score, str) and score.strip().isdigit():
        score = int(score.strip())
    if isinstance(score, float) and score.is_integer():
        score = int(score)
    if not isinstance(score, int) or isinstance(score, bool) or not 1 <= score <= 10:
        raise InvalidGeneration(f"'score' must be an integer from 1 to 10, got {data.get('score')!r}")
    message = data.get("message")
    if not isinstance(message, str) or not message.strip():
        raise InvalidGeneration("'message' must be a non-empty string")
    evaluation = data.get("evaluation", [])
    if not isinstance(evaluation, list):
        raise InvalidGeneration("'evaluation' must be a list with one entry per checklist item")
    selected = data.get("selected_items", [])
    if not isinstance(selected, list):
        raise InvalidGeneration("'selected_items' must be a list of checklist item numbers")
    items = []
    for entry in selected:
        try:
            number = int(entry)
        except (TypeError, ValueError):
            raise InvalidGeneration(f"'selected_items' holds {entry!r}, not an item number") from None
        if not 1 <= number <= n_items:
            raise InvalidGeneration(f"'selected_items' holds {number}; the checklist has items "
                                    f"1 to {n_items}")
        items.append(number)
    thinking = data.get("thinking", "")
    return {
        "evaluation": evaluation,
        "score": score,
        "end_conversation": score == 10,
        "selected_items": items,
        "thinking": thinking if isinstance(thinking, str) else str(thinking),
        "message": message.strip(),
    }
