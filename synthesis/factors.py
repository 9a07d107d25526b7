"""Stage 3 (Appendix B.2, Figure 17): a persona's context factors and preferences, all at
once; the last two are a contrastive pair that name each other in ``related_factor``."""
from __future__ import annotations

from evaluation.models.model import Model
from synthesis.generation import Generated, generate_validated
from synthesis.prompting import load_examples
from synthesis.schemas import factors_schema
from synthesis.taxonomy import Taxonomy, format_factor_types, format_preference_types, format_task_types
from synthesis.validate import validate_factors
from utils.prompts import load_prompt

PROMPT = "synthesis/context_factors"


def generate_factors(model: Model, persona_description: str, n_factors: int, taxonomy: Taxonomy, *,
                     max_attempts: int, first_variant: int = 0,
                     previous: tuple[str, str] | None = None) -> Generated:
    """Returns a ``Generated`` whose value is {"factors": [...], "warnings": [...]}."""
    system, user = load_prompt(PROMPT).render(
        task_type_list=format_task_types(taxonomy),
        factor_type_list=format_factor_types(taxonomy),
        preference_type_list=format_preference_types(taxonomy),
        n_factors=n_factors,
        examples=load_examples(PROMPT),
        user_persona=persona_description,
    )
    return generate_validated(model, system, user,
                              lambda raw: validate_factors(raw, n_factors, taxonomy),
                              max_attempts=max_attempts, first_variant=first_variant,
                              previous=previous, json_schema=factors_schema(n_factors, taxonomy))
