"""Stage 4 (Appendix B.3, Figure 18): the persona's chronological sessions, generated at
once with the release's prompt from the journey template, and checked against it."""
from __future__ import annotations

import yaml

from utils.models.model import Model
from synthesis.generation import Generated, generate_validated
from synthesis.journey import Journey, format_series_structure
from synthesis.parameters import STAGE_PARAMS
from synthesis.schemas import sessions_schema
from synthesis.taxonomy import Taxonomy
from synthesis.validate import validate_sessions
from utils.prompts import load_prompt

PROMPT = "synthesis/sessions_generator"


def format_factors(factors: list[dict]) -> str:
    """The factor list as the release shows it: a YAML document (PyYAML's default style,
    keys sorted) of each factor's name, preference and task types."""
    shown = {"factors": [{"context_factor": f["context_factor"],
                          "preference": f["contextual_preference"],
                          "task_types": f.get("task_types_written", f["task_types"])}
                         for f in factors]}
    return yaml.dump(shown, default_flow_style=False)


def generate_sessions(model: Model, persona_description: str, factors: list[dict], journey: Journey,
                      taxonomy: Taxonomy, *, max_attempts: int, first_variant: int = 0,
                      previous: tuple[str, str] | None = None) -> Generated:
    """Returns a ``Generated`` whose value is the validated sessions document
    (see ``synthesis.validate.validate_sessions``)."""
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
                              params=STAGE_PARAMS["sessions_generator"])
