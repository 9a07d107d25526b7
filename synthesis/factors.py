"""Stage 3 (Appendix B.2, Figure 17): a persona's context factors and preferences, all at
once, with the release's prompt; the last two are a contrastive pair that name each other
in ``related_factor``."""
from __future__ import annotations

from utils.models.model import Model
from synthesis.generation import Generated, generate_validated
from synthesis.parameters import STAGE_PARAMS
from synthesis.schemas import factors_schema
from synthesis.taxonomy import Taxonomy
from synthesis.validate import validate_factors
from utils.prompts import load_prompt

PROMPT = "synthesis/context_factors_generator"


def generate_factors(model: Model, persona_description: str, n_factors: int, taxonomy: Taxonomy, *,
                     max_attempts: int, first_variant: int = 0,
                     previous: tuple[str, str] | None = None) -> Generated:
    """Returns a ``Generated`` whose value is {"factors": [...], "warnings": [...]}."""
    system, user = load_prompt(PROMPT).render(n_factors=n_factors, user_persona=persona_description)
    return generate_validated(model, system, user,
                              lambda raw: validate_factors(raw, n_factors, taxonomy),
                              max_attempts=max_attempts, first_variant=first_variant,
                              previous=previous, json_schema=factors_schema(n_factors, taxonomy),
                              params=STAGE_PARAMS["context_factors_generator"])
