"""Stage 4 (Appendix B.3, Figure 18): the persona's chronological sessions, generated at
once from the journey template, and checked against it."""
from __future__ import annotations

import yaml

from evaluation.models.model import Model
from synthesis.generation import Generated, generate_validated
from synthesis.journey import Journey, format_journey_requirements
from synthesis.prompting import load_examples
from synthesis.schemas import sessions_schema
from synthesis.taxonomy import Taxonomy
from synthesis.validate import validate_sessions
from utils.prompts import load_prompt

PROMPT = "synthesis/interaction_sessions"
FACTOR_FIELDS_SHOWN = ("context_factor", "factor_type", "backstory", "task_types",
                       "preference_type", "contextual_preference", "related_factor")


def format_factors(factors: list[dict]) -> str:
    shown = [{k: f[k] for k in FACTOR_FIELDS_SHOWN} for f in factors]
    return yaml.safe_dump(shown, allow_unicode=True, sort_keys=False, width=100).strip()


def generate_sessions(model: Model, persona_description: str, factors: list[dict], journey: Journey,
                      taxonomy: Taxonomy, *, max_attempts: int, first_variant: int = 0,
                      previous: tuple[str, str] | None = None) -> Generated:
    """Returns a ``Generated`` whose value is the validated sessions document
    (see ``synthesis.validate.validate_sessions``)."""
    system, user = load_prompt(PROMPT).render(
        n_sessions=journey.n_sessions,
        journey_requirements=format_journey_requirements(journey),
        main_factor=journey.main_factor,
        contrastive_factor=journey.contrastive_factor,
        examples=load_examples(PROMPT),
        user_persona=persona_description,
        context_factors=format_factors(factors),
    )
    return generate_validated(model, system, user,
                              lambda raw: validate_sessions(raw, journey, factors, taxonomy),
                              max_attempts=max_attempts, first_variant=first_variant,
                              previous=previous,
                              json_schema=sessions_schema(journey.n_sessions,
                                                          [f["context_factor"] for f in factors],
                                                          taxonomy))
