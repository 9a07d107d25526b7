"""Asking until the answer is usable: the one re-ask loop of both pipelines.

Every re-ask is a new ``variant`` of the request, so the response cache never replays an
unusable answer in place of a new one, while a rerun after a kill replays every finished
attempt from the cache in the same order. What a re-ask sends is the caller's choice, because
it must be what the released harness sends: the identical request (the evaluation's steps,
the user simulator), or the conversation extended with the unusable answer and the reason
(synthesis's generation stages, where the release has no re-ask to follow).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from cupid.utils.models.errors import ModelCallFailed
from cupid.utils.models.model import Model


@dataclass
class Answer:
    value: Any
    raws: list[str]               # every answer received, the usable one last
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    latency_s: float = 0.0        # seconds spent in the model calls
    truncated: int = 0            # answers cut at the token limit
    sent: dict = field(default_factory=dict)  # what the model layer says it sent (see below)

    @property
    def raw(self) -> str:
        return self.raws[-1]

    @property
    def attempts(self) -> int:
        return len(self.raws)


class NoUsableAnswer(Exception):
    """Every answer was unusable (``reason`` is the last one's), or a call failed for good
    (``call_failed`` holds the model layer's error; no answer was received for that attempt)."""

    def __init__(self, reason: str, raws: list[str], next_variant: int, *,
                 call_failed: ModelCallFailed | None = None, usage: dict | None = None,
                 latency_s: float = 0.0, truncated: int = 0, sent: dict | None = None):
        super().__init__(reason)
        self.reason = reason
        self.raws = raws
        self.next_variant = next_variant  # where a later run's fresh attempts start
        self.call_failed = call_failed
        self.usage = usage or {"prompt_tokens": 0, "completion_tokens": 0}
        self.latency_s = latency_s
        self.truncated = truncated
        self.sent = sent or {}


def sent_by_model_layer(completion: Any) -> dict:
    """What the adapter sent for ``completion``: the generation parameters on the wire and
    the adaptations applied (empty for models that do not say)."""
    sent: dict = {}
    parameters = getattr(completion, "parameters", None)
    if parameters is not None:
        sent["parameters"] = parameters
    adaptations = getattr(completion, "adaptations", ())
    if adaptations:
        sent["adapted"] = list(adaptations)
    return sent


def ask_until_usable(model: Model, system_prompt: str, messages: list[dict],
                     read: Callable[[str], Any], *, tries: int,
                     invalid: tuple[type[Exception], ...] = (ValueError,), first_variant: int = 0,
                     show_invalid: str | None = None, previous: tuple[str, str] | None = None,
                     strip: bool = False, **request: Any) -> Answer:
    """Send ``messages`` up to ``tries`` times until ``read(answer)`` returns a value instead
    of raising one of ``invalid``.

    ``show_invalid``: a message template with ``{reason}``; when given, a re-ask appends the
    unusable answer and this message to the conversation; otherwise it repeats the request.
    ``previous`` (an earlier run's last unusable answer and its reason) is shown on the first
    attempt too, with ``first_variant`` continuing that run's attempts. ``strip``: read and
    keep the answer without surrounding whitespace. ``request``: passed to ``model.generate``."""
    raws: list[str] = []
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    latency = 0.0
    truncated = 0
    sent: dict = {}
    last = previous
    last_cut = False
    for attempt in range(tries):
        variant = first_variant + attempt
        sent = list(messages)
        if show_invalid is not None and last is not None:
            sent += [{"role": "assistant", "content": last[0].strip() or "(empty answer)"},
                     {"role": "user", "content": show_invalid.format(reason=last[1])}]
        started = time.perf_counter()
        try:
            completion = model.generate(system_prompt, sent, variant=variant, **request)
        except ModelCallFailed as exc:
            latency += time.perf_counter() - started
            raise NoUsableAnswer(str(exc), raws, variant, call_failed=exc, usage=usage,
                                 latency_s=round(latency, 4), truncated=truncated,
                                 sent=sent) from exc
        latency += time.perf_counter() - started
        text = completion.text.strip() if strip else completion.text
        raws.append(text)
        truncated += bool(getattr(completion, "truncated", False))
        sent = sent_by_model_layer(completion)
        if getattr(completion, "usage", None) is not None:
            usage["prompt_tokens"] += completion.usage.prompt_tokens
            usage["completion_tokens"] += completion.usage.completion_tokens
            if getattr(completion.usage, "reasoning_tokens", 0):  # part of completion_tokens
                usage["reasoning_tokens"] = usage.get("reasoning_tokens", 0) + \
                    completion.usage.reasoning_tokens
            if getattr(completion.usage, "batch", False):  # priced at the batch price in results.json
                usage["batch_prompt_tokens"] = usage.get("batch_prompt_tokens", 0) + \
                    completion.usage.prompt_tokens
                usage["batch_completion_tokens"] = usage.get("batch_completion_tokens", 0) + \
                    completion.usage.completion_tokens
        try:
            value = read(text)
        except invalid as exc:
            last = (text, str(exc))
            last_cut = bool(getattr(completion, "truncated", False))
            continue
        return Answer(value, raws, usage, round(latency, 4), truncated, sent)
    reason = last[1] if last else "no answer"
    if last_cut:
        reason += " (the answer was cut at the token limit)"
    raise NoUsableAnswer(reason, raws, first_variant + tries, usage=usage,
                         latency_s=round(latency, 4), truncated=truncated, sent=sent)
