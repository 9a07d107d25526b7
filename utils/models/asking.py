"""The one re-ask loop of both pipelines.

Every re-ask is a new ``variant`` of the request, so the response cache never replays an
unusable answer in place of a new one, while a rerun after a kill replays every finished
attempt from the cache in the same order. What a re-ask sends is the caller's choice, because
it must be what the released harness sends: the identical request (the evaluation's steps,
the user simulator), or the conversation extended with the unusable answer and the reason
(synthesis's generation stages, where the release has no re-ask to follow).

Two things end the loop without a value, each its own exception carrying the ``Answer`` so
far (what was received and what it cost): ``UnusableAnswer`` when every answer stayed
unusable, and the model layer's ``ModelCallFailed`` when a call failed for good (its
``answer`` attribute is set here).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from cupid.utils.models.errors import ModelCallFailed
from cupid.utils.models.model import Model


@dataclass
class Answer:
    """What one step received: its usable value (None until there is one), every answer in
    order (the usable one last), what they cost, and what was sent."""
    value: Any = None
    raws: list[str] = field(default_factory=list)
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    latency_s: float = 0.0        # seconds spent in the model calls
    truncated: int = 0            # answers cut at the token limit
    sent: dict = field(default_factory=dict)  # the caller's record, and what the model layer says it sent
    next_variant: int = 0         # where a later run's fresh attempts start, after a failure

    @property
    def raw(self) -> str:
        return self.raws[-1]

    @property
    def attempts(self) -> int:
        return len(self.raws)

    def add(self, completion: Any, text: str) -> None:
        """Count one answer (``text``, as read), its tokens and truncation, and what the
        adapter says it sent."""
        self.raws.append(text)
        self.truncated += bool(getattr(completion, "truncated", False))
        parameters = getattr(completion, "parameters", None)
        if parameters is not None:
            self.sent["parameters"] = parameters
        if getattr(completion, "adaptations", ()):
            self.sent["adapted"] = list(completion.adaptations)
        usage = getattr(completion, "usage", None)
        if usage is None:
            return
        self.usage["prompt_tokens"] += usage.prompt_tokens
        self.usage["completion_tokens"] += usage.completion_tokens
        if getattr(usage, "reasoning_tokens", 0):  # part of completion_tokens
            self.usage["reasoning_tokens"] = self.usage.get("reasoning_tokens", 0) + usage.reasoning_tokens
        if getattr(usage, "batch", False):  # priced at the batch price in results.json
            self.usage["batch_prompt_tokens"] = self.usage.get("batch_prompt_tokens", 0) + usage.prompt_tokens
            self.usage["batch_completion_tokens"] = \
                self.usage.get("batch_completion_tokens", 0) + usage.completion_tokens


class UnusableAnswer(Exception):
    """Every answer stayed unusable: ``reason`` is the last one's, ``answer`` what was received."""

    def __init__(self, reason: str, answer: Answer):
        super().__init__(reason)
        self.reason = reason
        self.answer = answer


def ask_until_usable(model: Model, system_prompt: str, messages: list[dict],
                     read: Callable[[str], Any], *, tries: int,
                     invalid: tuple[type[Exception], ...] = (ValueError,), first_variant: int = 0,
                     show_invalid: str | None = None, previous: tuple[str, str] | None = None,
                     strip: bool = False, record: dict | None = None, **request: Any) -> Answer:
    """Send ``messages`` up to ``tries`` times until ``read(answer)`` returns a value instead
    of raising one of ``invalid``.

    ``show_invalid``: a message template with ``{reason}``; when given, a re-ask appends the
    unusable answer and this message to the conversation; otherwise it repeats the request.
    ``previous`` (an earlier run's last unusable answer and its reason) is shown on the first
    attempt too, with ``first_variant`` continuing that run's attempts. ``strip``: read and
    keep the answer without surrounding whitespace. ``record``: the caller's account of the
    request, which ``Answer.sent`` starts from. ``request``: passed to ``model.generate``."""
    answer = Answer(sent=dict(record or {}))
    last, last_cut = previous, False
    for attempt in range(tries):
        variant = first_variant + attempt
        conversation = list(messages)
        if show_invalid is not None and last is not None:
            conversation += [{"role": "assistant", "content": last[0].strip() or "(empty answer)"},
                             {"role": "user", "content": show_invalid.format(reason=last[1])}]
        started = time.perf_counter()
        try:
            completion = model.generate(system_prompt, conversation, variant=variant, **request)
        except ModelCallFailed as exc:
            answer.latency_s = round(answer.latency_s + time.perf_counter() - started, 4)
            answer.next_variant = variant
            exc.answer = answer
            raise
        answer.latency_s = round(answer.latency_s + time.perf_counter() - started, 4)
        text = completion.text.strip() if strip else completion.text
        answer.add(completion, text)
        try:
            answer.value = read(text)
        except invalid as exc:
            last, last_cut = (text, str(exc)), bool(getattr(completion, "truncated", False))
            continue
        return answer
    answer.next_variant = first_variant + tries
    reason = last[1] if last else "no answer"
    raise UnusableAnswer(reason + (" (the answer was cut at the token limit)" if last_cut else ""), answer)
