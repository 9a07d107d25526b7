"""Stage 4 (Appendix B.3, Figure 18): the persona's chronological sessions, generated at
once with the release's prompt from the journey template, and checked against it."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

import yaml

from ..utils.models.model import Model
from .documents import (generate_validated, TEXT, exactly, find_factor, json_object, line, mapping, one_of,
                        same_text, taxonomy_field, text_field, tuple_of)
from ..utils.answers import ParseError, as_list, parse_yaml
from ..utils.models.answer_layout import Json
from .factors import PREFERENCE
from ..utils.models.reask import Answer
from .journey import A, A_CHANGED, B, FINAL, OTHER, Journey, format_series_structure, persona_journey
from .taxonomy import Taxonomy
from ..utils.prompts import load_prompt

PROMPT = "synthesis/sessions_generator"
# As the release sends them (sessions_generator.py's constructor).
PARAMS = {"temperature": 0.7, "max_tokens": 8192}


def format_factors(factors: list[dict]) -> str:
    """The factor list as the release shows it: a YAML document (PyYAML's default style,
    keys sorted) of each factor's name, preference and task types."""
    shown = {"factors": [{"context_factor": f["context_factor"],
                          "preference": f["contextual_preference"],
                          "task_types": f.get("task_types_written", f["task_types"])}
                         for f in factors]}
    return yaml.dump(shown, default_flow_style=False)


# -- the stage's hooks (synthesis/stages.py) --------------------------------------------
SESSION_TOKENS = 100  # the dry run's assumption: one session (scenario, factor, preference, request)
REQUEST_TOKENS = 50   # ... its request


def journey_of(persona: dict, inputs: dict, cfg) -> Journey:
    """The persona's journey template: drawn from the seed and the persona's factors alone."""
    return persona_journey(cfg.seed, persona["persona_id"], cfg.n_sessions, inputs["factors"]["factors"])


def request(model: Model, persona: dict, inputs: dict, cfg, taxonomy: Taxonomy, **attempts: Any) -> Answer:
    return generate_sessions(model, persona["description"], inputs["factors"]["factors"],
                             journey_of(persona, inputs, cfg), taxonomy, **attempts)


def document(answer: Answer, persona: dict, inputs: dict, cfg) -> dict:
    return {"journey": asdict(journey_of(persona, inputs, cfg)), **answer.value}


def stand_in(persona: dict, inputs: dict, cfg) -> dict:
    from ..utils.forecast import filler

    factors = inputs["factors"]["factors"]
    return {"sessions": [{"index": i, "role": role, "context_factor": factors[(i - 1) % len(factors)]["context_factor"],
                          "contextual_preference": factors[(i - 1) % len(factors)]["contextual_preference"],
                          "request": filler(REQUEST_TOKENS, "request")}
                         for i, role in enumerate(journey_of(persona, inputs, cfg).roles, start=1)]}


def answer_tokens(cfg) -> int:
    return SESSION_TOKENS * cfg.n_sessions


def generate_sessions(model: Model, persona_description: str, factors: list[dict], journey: Journey,
                      taxonomy: Taxonomy, *, max_attempts: int, first_variant: int = 0,
                      previous: tuple[str, str] | None = None) -> Answer:
    """Returns an ``Answer`` whose value is the validated sessions document
    (see ``validate_sessions``)."""
    system, user = load_prompt(PROMPT).render(
        n_sessions=journey.n_sessions,
        series_structure=format_series_structure(journey),
        first_factor=journey.main_factor,
        second_factor=journey.contrastive_factor,
        user_persona=persona_description,
        context_factors=format_factors(factors),
    )
    return generate_validated(model, system, user,
                              lambda raw: validate_sessions(raw, journey, factors, taxonomy),
                              max_attempts=max_attempts, first_variant=first_variant,
                              previous=previous,
                              json_schema=sessions_schema(journey.n_sessions,
                                                          [f["context_factor"] for f in factors],
                                                          taxonomy),
                              layout=Json(embedded_sessions_schema(journey, factors)), params=PARAMS)


def sessions_schema(n_sessions: int, factor_names: list[str], taxonomy: Taxonomy) -> dict:
    """Figure 18: ``n_sessions`` scenarios, each naming one of the persona's factors."""
    scenario = json_object({
        "id": {"type": "integer"},
        "context_factor": one_of(factor_names),
        "preference": TEXT,
        "task_type": one_of(taxonomy.task_types),
        "story": TEXT,
        "request_with_factor_and_preference": TEXT,
        "request_with_factor": TEXT,
        "resource": TEXT,
    })
    return json_object({"scenarios": exactly(n_sessions, scenario)})


def embedded_sessions_schema(journey: Journey, factors: list[dict]) -> dict:
    """``sessions_schema`` as the embedded model decodes it, so that its answer passes
    ``validate_sessions``: each scenario's id, factor and preference are those of its role in
    the journey (A the pair's first factor, its changed preference A' the second's, which
    contradicts it; the other factors in turn); the model writes the texts."""
    a, b = find_factor(journey.main_factor, factors), find_factor(journey.contrastive_factor, factors)
    others = [f for f in factors if f is not a and f is not b]
    scenarios = []
    for i, role in enumerate(journey.roles, start=1):
        factor = {A: a, A_CHANGED: a, FINAL: a, B: b}.get(role) or others[journey.roles[:i].count(OTHER) % len(others)]
        scenarios.append(json_object({
            "id": {"type": "integer", "enum": [i]},
            "context_factor": one_of([factor["context_factor"]]),
            "preference": one_of([b["contextual_preference"] if role in (A_CHANGED, FINAL)
                                  else factor["contextual_preference"]]),
            "task_type": one_of(factor["task_types"]),
            "story": line(100),
            "request_with_factor_and_preference": line(80),
            "request_with_factor": line(100, end=r" \[resource\]"),  # where the resource goes
            "resource": line(60),
        }))
    return json_object({"scenarios": tuple_of(scenarios)})


RESOURCE_PLACEHOLDER = "[resource]"


def _resource_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    # a structured resource (a table, a mapping): keep it as YAML text
    return yaml.safe_dump(value, allow_unicode=True, sort_keys=False).strip()


def fill_resource(request: str, resource: Any) -> tuple[str, list[str]]:
    """The request as the release sends it to the assistant simulator: the model's text
    unstripped, ``[resource]`` replaced by the resource as written. A resource without a
    placeholder is left out, as the release leaves it out, with a warning."""
    warnings = []
    text = _resource_text(resource)
    if RESOURCE_PLACEHOLDER in request:
        if not text:
            raise ParseError("the request holds [resource] but the resource is empty")
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
        raise ParseError(f"expected {n} scenarios, got {len(items)}")
    pair = [find_factor(journey.main_factor, factors), find_factor(journey.contrastive_factor, factors)]

    parsed, chosen = [], []  # the sessions, and the factor each names
    for i, item in enumerate(items, start=1):
        where = f"scenario {i}"
        item = mapping(item, where)
        if "id" in item and str(item["id"]).strip() != str(i):
            raise ParseError(f"{where}: scenarios must be numbered 1 to {n} in order, "
                             f"got id {item['id']!r}")
        task_type = taxonomy_field(item, "task_type", taxonomy.task_types, where)
        factor_name = text_field(item, "context_factor", where)
        request_with_factor = text_field(item, "request_with_factor", where)
        raw_request = item["request_with_factor"]
        factor = find_factor(factor_name, factors)
        if factor is None:
            raise ParseError(f"{where}: context factor {factor_name!r} is not in the list "
                             f"of context factors")
        chosen.append(factor)
        parsed.append({
            "index": i,
            "role": journey.roles[i - 1],
            "context_factor": factor["context_factor"],
            "contextual_preference": text_field(item, PREFERENCE, where),
            "task_type": task_type,
            "story": text_field(item, "story", where),
            "request_with_factor_and_preference":
                text_field(item, "request_with_factor_and_preference", where),
            "request_with_factor": request_with_factor,
            "resource": _resource_text(item.get("resource")),
            "raw_request": raw_request if isinstance(raw_request, str) else request_with_factor,
            "raw_resource": item.get("resource"),
        })

    # Which of the pair the model made A: the factor of the first A session.
    first_a = chosen[journey.positions(A)[0] - 1]
    if first_a not in pair:
        raise ParseError(
            f"scenario {journey.positions(A)[0]} must use context factor A, one of "
            f"{pair[0]['context_factor']!r} or {pair[1]['context_factor']!r}; got "
            f"{first_a['context_factor']!r}")
    factor_a = first_a
    factor_b = pair[1] if factor_a is pair[0] else pair[0]
    wanted = {A: factor_a, A_CHANGED: factor_a, FINAL: factor_a, B: factor_b}
    changed_preference = None
    warnings: list[str] = []
    for session, factor in zip(parsed, chosen):
        where = f"scenario {session['index']}"
        role = session["role"]
        if role == OTHER:
            if factor is factor_a or factor is factor_b:
                raise ParseError(
                    f"{where}: must use a context factor other than "
                    f"{factor_a['context_factor']!r} and {factor_b['context_factor']!r}, which "
                    f"appear only where the journey structure says")
        elif factor is not wanted[role]:
            label = "A" if wanted[role] is factor_a else "B"
            raise ParseError(
                f"{where}: must use context factor {label} ({wanted[role]['context_factor']!r}), "
                f"got {factor['context_factor']!r}")
        preference = session["contextual_preference"]
        if role in (A_CHANGED, FINAL):
            if same_text(preference, factor_a["contextual_preference"]):
                raise ParseError(f"{where}: preference A' must differ from (contradict) "
                                 f"the original preference A")
            if changed_preference is None:
                changed_preference = preference
            elif not same_text(preference, changed_preference):
                raise ParseError(f"{where}: the changed preference A' must be the same in "
                                 f"every A' scenario and the final scenario")
            session["contextual_preference"] = changed_preference
        else:
            if not same_text(preference, factor["contextual_preference"]):
                raise ParseError(
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

    return {
        "sessions": parsed,
        "current_factor": factor_a["context_factor"],
        "contrastive_factor": factor_b["context_factor"],
        "original_preference": factor_a["contextual_preference"],
        "changed_preference": changed_preference,
        "contrastive_preference": factor_b["contextual_preference"],
        "warnings": warnings,
    }
