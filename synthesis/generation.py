"""Ask, validate, and ask again a bounded number of times.

A re-ask shows the model its invalid answer and the reason, and carries a new ``variant``,
so the response cache never replays the invalid answer in place of a new one, while a
rerun after a kill replays every finished attempt from the cache in the same order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from evaluation.models.model import Model, ModelCallFailed
from synthesis.parsing import InvalidGeneration

FEEDBACK = ("Your answer could not be used: {reason}\n\n"
            "Return the complete output again, in the required format, fixing this problem.")


@dataclass
class Generated:
    value: Any
    raw: str
    attempts: int  # answers received in this call, the valid one included


class GenerationFailed(Exception):
    """Every attempt was invalid, or the call failed for good."""

    def __init__(self, reason: str, attempts: int, last_raw: str | None, next_variant: int):
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts
        self.last_raw = last_raw
        self.next_variant = next_variant  # where a later run's fresh attempts start


def generate_validated(model: Model, system: str, user: str, validate: Callable[[str], Any], *,
                       max_attempts: int, first_variant: int = 0,
                       previous: tuple[str, str] | None = None,
                       json_schema: dict | None = None, params: dict | None = None) -> Generated:
    """``validate(raw)`` returns the parsed value or raises InvalidGeneration.

    ``json_schema`` describes the expected document to models that can constrain their
    decoding (the embedded model, vLLM); the others ignore it and answer as the prompt
    asks. JSON is valid YAML, so the YAML stages read a constrained answer as they are.

    ``first_variant``/``previous`` (the last raw answer and its reason) continue the
    attempts of an earlier run that failed, instead of replaying them from the cache."""
    last: tuple[str, str] | None = previous
    for attempt in range(max_attempts):
        variant = first_variant + attempt
        messages = [{"role": "user", "content": user}]
        if last is not None:
            messages += [{"role": "assistant", "content": last[0].strip() or "(empty answer)"},
                         {"role": "user", "content": FEEDBACK.format(reason=last[1])}]
        try:
            completion = model.generate(system, messages, variant=variant, json_schema=json_schema,
                                        **(params or {}))
        except ModelCallFailed as exc:
            raise GenerationFailed(f"model call failed: {exc}", attempt,
                                   last[0] if last else None, variant) from exc
        try:
            return Generated(value=validate(completion.text), raw=completion.text,
                             attempts=attempt + 1)
        except InvalidGeneration as exc:
            last = (completion.text, str(exc))
    assert last is not None
    raise GenerationFailed(f"invalid after {max_attempts} attempts: {last[1]}", max_attempts,
                           last[0], first_variant + max_attempts)
