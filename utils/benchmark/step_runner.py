"""A step, in both pipelines: ask through the model seam until the answer parses.

Two ways to ask again, as the release does or would: ``run_prompt`` (the evaluation's steps
and the decomposer) renders a prompt file, repeats the identical request after an
unparseable answer (``config.MAX_PARSE_RETRIES`` times, each a distinct variant so a cache
does not replay it) and says what was sent; ``generate_validated`` (synthesis's generation
stages, where the release has no re-ask to follow) shows the model its unusable answer and
the reason. If every answer fails, or the call itself fails after the seam's retries, both
raise ``StepFailed`` carrying the reason and the raw answers, which the pipeline records.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from cupid import config
from cupid.utils.models.asking import Answer, NoUsableAnswer, ask_until_usable
from cupid.utils.models.model import Model
from cupid.utils.benchmark.answers.reading import ParseError
from cupid.utils.prompts import Prompt, load_prompt


class StepFailed(Exception):
    def __init__(self, reason: str, raw: Sequence[str] = (), attempts: int = 0, next_variant: int = 0,
                 sent: dict | None = None, latency_s: float = 0.0, truncated: int = 0):
        super().__init__(reason)
        self.reason = reason
        self.raw = list(raw)
        self.attempts = attempts
        self.next_variant = next_variant
        self.sent = sent
        self.latency_s = latency_s
        self.truncated = truncated  # answers cut at the token limit

    @property
    def last_raw(self) -> str | None:
        return self.raw[-1] if self.raw else None


@dataclass
class StepResult:
    output: dict
    raw: list[str]
    attempts: int
    model: str
    prompt_version: str
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    sent: dict | None = None      # what was asked (see sent_record)
    latency_s: float = 0.0        # seconds spent in the model calls of this step
    truncated: int = 0            # answers cut at the token limit


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sent_record(prompt: Prompt, values: dict, refs: dict, system_prompt: str, user_prompt: str,
                temperature: object, max_tokens: object) -> dict:
    """What a step sent, compactly: the prompt file and version, the values it was filled
    with (a value listed in ``refs`` is named, with its hash, instead of copied), the
    hashes of the rendered texts, and the generation parameters. ``rebuild_request`` turns
    it back into the exact system prompt and user message."""
    filled = {}
    for name, value in values.items():
        if name in refs:
            filled[name] = {"ref": refs[name], "sha256": text_sha256(str(value))}
        else:
            filled[name] = value
    return {"prompt": prompt.name, "prompt_version": prompt.version, "values": filled,
            "system_sha256": text_sha256(system_prompt), "user_sha256": text_sha256(user_prompt),
            "temperature": temperature, "max_tokens": max_tokens}


def decoding_aid(model: Model, schema: dict | None) -> dict | None:
    """A JSON schema for the models that follow decoding aids (the embedded model only):
    the benchmark's requests carry none, as the release's did."""
    return schema if model.supports_answer_grammar else None


def run_prompt(model: Model, prompt_name: str, values: dict, parse: Callable[[str], dict], *,
             json_schema: dict | None = None, answer_grammar: str | None = None,
             max_tokens: int | None = None, refs: dict | None = None,
             first_variant: int = 0) -> StepResult:
    """Ask, parse, re-ask. ``first_variant`` > 0 continues after attempts recorded by an
    earlier run, so a rerun gets fresh answers instead of the cached unparseable ones.
    ``max_tokens`` overrides the model's own limit for this step."""
    prompt = load_prompt(prompt_name)
    system_prompt, user_prompt = prompt.render(**values)
    options = {} if max_tokens is None else {"max_tokens": max_tokens}
    sent = sent_record(prompt, values, refs or {}, system_prompt, user_prompt,
                       getattr(model, "temperature", None),
                       max_tokens if max_tokens is not None else getattr(model, "max_tokens", None))
    try:
        answer = ask_until_usable(model, system_prompt, [{"role": "user", "content": user_prompt}], parse,
                                  tries=config.MAX_PARSE_RETRIES + 1, invalid=(ParseError,),
                                  first_variant=first_variant, json_schema=json_schema,
                                  answer_grammar=answer_grammar, **options)
    except NoUsableAnswer as exc:
        sent.update(exc.sent)
        if exc.call_failed is not None:
            raise StepFailed(f"{type(exc.call_failed).__name__}: {exc.call_failed.reason}", exc.raws,
                             len(exc.raws) + 1, next_variant=exc.next_variant, sent=sent,
                             latency_s=exc.latency_s, truncated=exc.truncated) from exc.call_failed
        raise StepFailed(f"unparseable answer: {exc.reason}", exc.raws, len(exc.raws),
                         next_variant=exc.next_variant, sent=sent, latency_s=exc.latency_s,
                         truncated=exc.truncated) from None
    # The adapter's own account of the request: the parameters as sent on the wire (a
    # reasoning model's max_completion_tokens and no temperature, say) and any adaptation.
    sent.update(answer.sent)
    return StepResult(output=answer.value, raw=answer.raws, attempts=answer.attempts, model=model.name,
                      prompt_version=prompt.version, usage=answer.usage, sent=sent,
                      latency_s=answer.latency_s, truncated=answer.truncated)


# The message after an invalid answer; its ``{reason}`` is filled by the re-ask loop.
FEEDBACK_PROMPT = "synthesis/reask_invalid_answer"


def generate_validated(model: Model, system: str, user: str, validate: Callable[[str], Any], *,
                       max_attempts: int, first_variant: int = 0,
                       previous: tuple[str, str] | None = None,
                       json_schema: dict | None = None, params: dict | None = None) -> Answer:
    """``validate(raw)`` returns the parsed value (``Answer.value``) or raises ParseError;
    a re-ask shows the model its invalid answer and the reason.

    ``json_schema`` describes the expected document to models that can constrain their
    decoding (the embedded model, vLLM); the others ignore it and answer as the prompt
    asks. JSON is valid YAML, so the YAML stages read a constrained answer as they are.

    ``first_variant``/``previous`` (the last raw answer and its reason) continue the
    attempts of an earlier run that failed, instead of replaying them from the cache."""
    try:
        return ask_until_usable(model, system, [{"role": "user", "content": user}], validate,
                                tries=max_attempts, invalid=(ParseError,), first_variant=first_variant,
                                show_invalid=load_prompt(FEEDBACK_PROMPT).user_prompt,
                                previous=previous, json_schema=json_schema, **(params or {}))
    except NoUsableAnswer as exc:
        raws = exc.raws or ([previous[0]] if previous else [])
        if exc.call_failed is not None:
            raise StepFailed(f"model call failed: {exc.call_failed}", raws, len(exc.raws),
                             next_variant=exc.next_variant) from exc.call_failed
        raise StepFailed(f"invalid after {max_attempts} attempts: {exc.reason}", raws, max_attempts,
                         next_variant=exc.next_variant) from None
