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

An answer that ended awkwardly (endings.py: filtered, refused, blocked, empty) is asked again
at most once, whatever ``tries`` allows: the same request would end the same way (at
temperature 0 surely). One withheld without text (``AnswerWithheld``) counts as an answer
("" in ``raws``, its usage counted); a blocked prompt is not asked again at all. When the
loop ends on a withheld answer, that ``AnswerWithheld`` is raised, in the provider's words.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .endings import FLAGGED, WITHHOLDING
from .call_errors import AnswerWithheld, ModelCallFailed
from .model import Model
from .request import Completion
from .usage import TOKEN_FIELDS


@dataclass
class Answer:
    """What one step received: its usable value (None until there is one), every answer in
    order (the usable one last), what they cost, and what was sent."""
    value: Any = None
    raws: list[str] = field(default_factory=list)
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    latency_s: float = 0.0        # seconds spent in the model calls
    endings: list[str] = field(default_factory=list)  # how each of ``raws`` ended (endings.py)
    sent: dict = field(default_factory=dict)  # the caller's record, and what the model layer says it sent
    next_variant: int = 0         # where a later run's fresh attempts start, after a failure

    @property
    def raw(self) -> str:
        return self.raws[-1]

    @property
    def attempts(self) -> int:
        return len(self.raws)

    @property
    def flagged(self) -> str | None:
        """The ending of the answer the value was read from, when it marks its scores."""
        return self.endings[-1] if self.value is not None and self.endings and \
            self.endings[-1] in FLAGGED else None

    def add(self, completion: Completion, text: str) -> None:
        """Count one answer (``text``, as read; "" when withheld), its tokens and how it
        ended, and what the adapter says it sent."""
        self.raws.append(text)
        self.endings.append(completion.ending)
        if completion.parameters is not None:
            self.sent["parameters"] = completion.parameters
        if completion.adaptations:
            self.sent["adapted"] = list(completion.adaptations)
        usage = completion.usage
        for name in TOKEN_FIELDS if usage is not None else ():  # the parts only when there are some
            if getattr(usage, name) or name in ("prompt_tokens", "completion_tokens"):
                self.usage[name] = self.usage.get(name, 0) + getattr(usage, name)
        for name in ("prompt_tokens", "completion_tokens") if usage is not None and usage.batch else ():
            # priced at the batch price in results.json
            self.usage[f"batch_{name}"] = self.usage.get(f"batch_{name}", 0) + getattr(usage, name)


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
    withheld: AnswerWithheld | None = None
    for attempt in range(tries):
        variant = first_variant + attempt
        conversation = list(messages)
        if show_invalid is not None and last is not None:
            conversation += [{"role": "assistant", "content": last[0].strip() or "(empty answer)"},
                             {"role": "user", "content": show_invalid.format(reason=last[1])}]
        started = time.perf_counter()
        try:
            completion = model.generate(system_prompt, conversation, variant=variant, **request)
            withheld = None
        except AnswerWithheld as exc:  # billed, counted, and asked again at most once
            completion, withheld = exc.completion, exc
        except ModelCallFailed as exc:
            answer.next_variant = variant
            exc.answer = answer
            raise
        finally:
            answer.latency_s = round(answer.latency_s + time.perf_counter() - started, 4)
        text = "" if withheld else (completion.text.strip() if strip else completion.text)
        answer.add(completion, text)
        answer.next_variant = variant + 1
        if withheld is None:
            try:
                answer.value = read(text)
                return answer
            except invalid as exc:
                last, last_cut = (text, str(exc)), completion.ending == "length"
        else:
            last, last_cut = (text, withheld.reason), False
        awkward = [e for e in answer.endings if e in WITHHOLDING]
        if len(awkward) >= 2 or "blocked" in awkward:
            break  # it would end the same way again
    if withheld is not None:
        withheld.answer = answer
        raise withheld
    reason = last[1] if last else "no answer"
    raise UnusableAnswer(reason + (" (the answer was cut at the token limit)" if last_cut else ""), answer)
