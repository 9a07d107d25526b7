"""The LLM an LLM-backed context strategy asks (a memory system's writes and recalls, a
summarizer, a reranker), through the same seam as every other call (docs/strategies.md).

A strategy with ``uses_model = True`` is given ``strategy.model``, a ``StrategyModel`` over
the model ``--strategy_model`` names (by default the evaluator's): ``model(system, user)``
or ``model.chat(system, messages)`` return the answer's text. Each call goes through
``Model.generate``: cached in the run's response cache (a resumed run, after kill -9 too,
replays what was paid for), paced, retried, its tokens counted in the strategy model's
own usage ("strategy" in results.json's usage) and, per instance, in the instance file's
``shown.model_usage``; results.json's ``memory_cost`` sums them apart from the evaluated
model's. The dry run gives it ``ForecastingModel``, which sends nothing and answers a
stand-in of ``answer_tokens`` tokens (the strategy's attribute, else ANSWER_TOKENS; at most
the call's max_tokens): a few numbered "- " lines, as a list of notes.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

from ..utils.models.model import Model
from ..utils.models.request import Completion

ANSWER_TOKENS = 200  # the dry run's stand-in of a strategy's answer, unless it says its own
USAGE_FIELDS = ("calls", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "cache_write_tokens")

_current = threading.local()  # the usage of the instance whose context this thread works on


@contextmanager
def counting() -> Iterator[dict]:
    """The usage of the strategy model's calls made in this thread inside the block."""
    spent = dict.fromkeys(USAGE_FIELDS, 0)
    outer = getattr(_current, "spent", None)
    _current.spent = spent
    try:
        yield spent
    finally:
        _current.spent = outer


def _count(completion: Completion) -> None:
    spent = getattr(_current, "spent", None)
    if spent is None:
        return
    spent["calls"] += 1
    usage = completion.usage
    if usage is not None:
        for name in USAGE_FIELDS[1:]:
            spent[name] += int(getattr(usage, name, 0) or 0)


class StrategyModel:
    """What an LLM-backed strategy asks: ``model(system_prompt, user_prompt)`` or
    ``model.chat(system_prompt, messages, max_tokens=..., temperature=...)``, the text of the
    answer. ``name`` is the model's."""

    def __init__(self, model: Model):
        self._model = model

    @property
    def name(self) -> str:
        return self._model.name

    def __call__(self, system_prompt: str, user_prompt: str, **options: Any) -> str:
        return self.chat(system_prompt, [{"role": "user", "content": user_prompt}], **options)

    def chat(self, system_prompt: str, messages: Sequence[dict], **options: Any) -> str:
        completion = self._model.generate(system_prompt, messages, **options)
        _count(completion)
        return completion.text


class ForecastingModel(StrategyModel):
    """The dry run's strategy model: each call is handed to ``record`` (the request it would
    send and the tokens of the stand-in answer) and answered with the stand-in."""

    def __init__(self, model: Model, record: Callable[[Any, int], None], answer_tokens: int = ANSWER_TOKENS):
        from ..utils.forecast import RenderOnly

        super().__init__(RenderOnly(model))
        self._record, self._answer_tokens = record, answer_tokens

    def chat(self, system_prompt: str, messages: Sequence[dict], **options: Any) -> str:
        from ..utils.forecast import filler, render

        request = render(lambda: self._model.generate(system_prompt, messages, **options))
        tokens = min(self._answer_tokens, int(request.max_tokens or self._answer_tokens))
        self._record(request, tokens)
        # A few "- " lines of about 20 tokens (a list of notes, as a memory writes them), and
        # numbers a reader may pick: "1, 2, 3" reads as such.
        lines = [f"- {n}. {filler(18, 'memory')}" for n in range(1, max(1, tokens // 20) + 1)]
        return "\n".join(lines)


def add_usage(total: dict, usage: dict | None) -> None:
    """``usage`` (a ``shown.model_usage``) added into ``total``."""
    for name in USAGE_FIELDS:
        total[name] = total.get(name, 0) + int((usage or {}).get(name, 0) or 0)


def memory_cost(records: Iterable[dict], model_name: str) -> dict:
    """results.json's ``memory_cost``: the strategy model's calls recorded in the instance
    files (``shown.model_usage``), their tokens and estimated cost, apart from the evaluated
    model's. A call two instances share (the second answered from the cache) counts for both."""
    from ..utils.models.usage import cost_of

    total: dict = {"model": model_name, "instances": 0, **dict.fromkeys(USAGE_FIELDS, 0)}
    for record in records:
        usage = (record.get("shown") or {}).get("model_usage") if isinstance(record.get("shown"), dict) else None
        if isinstance(usage, dict):
            total["instances"] += 1
            add_usage(total, usage)
    total["estimated_cost_usd"] = cost_of(model_name, total)
    return total
