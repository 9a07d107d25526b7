"""The generation stages' ask-validate-re-ask (personas, factors, sessions).

A re-ask shows the model its invalid answer and the reason (the release has no re-ask here:
it drops the persona), through the shared loop of utils/models/asking.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from utils.models.asking import NoUsableAnswer, ask_until_usable
from utils.models.model import Model
from utils.benchmark.answers.reading import ParseError
from utils.prompts import load_prompt

# The message after an invalid answer; its ``{reason}`` is filled by the re-ask loop.
FEEDBACK_PROMPT = "synthesis/reask_invalid_answer"


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
    """``validate(raw)`` returns the parsed value or raises ParseError.

    ``json_schema`` describes the expected document to models that can constrain their
    decoding (the embedded model, vLLM); the others ignore it and answer as the prompt
    asks. JSON is valid YAML, so the YAML stages read a constrained answer as they are.

    ``first_variant``/``previous`` (the last raw answer and its reason) continue the
    attempts of an earlier run that failed, instead of replaying them from the cache."""
    try:
        answer = ask_until_usable(model, system, [{"role": "user", "content": user}], validate,
                                  tries=max_attempts, invalid=(ParseError,),
                                  first_variant=first_variant, show_invalid=load_prompt(FEEDBACK_PROMPT).user_prompt,
                                  previous=previous, json_schema=json_schema, **(params or {}))
    except NoUsableAnswer as exc:
        last_raw = exc.raws[-1] if exc.raws else (previous[0] if previous else None)
        if exc.call_failed is not None:
            raise GenerationFailed(f"model call failed: {exc.call_failed}", len(exc.raws), last_raw,
                                   exc.next_variant) from exc.call_failed
        raise GenerationFailed(f"invalid after {max_attempts} attempts: {exc.reason}", max_attempts,
                               last_raw, exc.next_variant) from None
    return Generated(value=answer.value, raw=answer.raw, attempts=answer.attempts)
