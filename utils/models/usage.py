"""Token, call and latency accounting per model, and its estimated cost."""
from __future__ import annotations

import statistics
import threading

from cupid import config
from cupid.utils.models.catalog import price_of
from cupid.utils.models.endings import ENDINGS
from cupid.utils.models.request import Usage

# The token counts a step's usage and the tracker keep, each summed as it comes.
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_prompt_tokens",
                "cache_write_tokens")


class UsageTracker:
    """Calls, retries, tokens and latency of one model; safe to update from many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.failed_calls = 0
        self.attempts = 0
        self.retries = 0
        self.cache_hits = 0
        self.rate_limited = 0
        self.batch_calls = 0
        self.batch_prompt_tokens = 0
        self.batch_completion_tokens = 0
        # prompt, completion, reasoning (part of completion), cached and cache-write (parts
        # of prompt) tokens of every answer received, withheld ones included: all are billed.
        self.tokens = dict.fromkeys(TOKEN_FIELDS, 0)
        self.endings = dict.fromkeys(ENDINGS, 0)  # how the answers ended (endings.py)
        self.latencies: list[float] = []

    def record_attempt(self, retry: bool) -> None:
        with self._lock:
            self.attempts += 1
            self.retries += int(retry)

    def _add(self, usage: Usage | None, ending: str) -> None:
        self.calls += 1
        self.endings[ending] = self.endings.get(ending, 0) + 1
        if usage is not None:
            for name in TOKEN_FIELDS:
                self.tokens[name] += getattr(usage, name)

    def record_success(self, usage: Usage | None, latency: float, ending: str = "stop") -> None:
        with self._lock:
            self._add(usage, ending)
            self.latencies.append(latency)

    def record_batch(self, usage: Usage | None, ending: str = "stop") -> None:
        """A call answered in a batch (batch.py): counted as a call, priced as a batch one."""
        with self._lock:
            self._add(usage, ending)
            self.batch_calls += 1
            if usage is not None:
                self.batch_prompt_tokens += usage.prompt_tokens
                self.batch_completion_tokens += usage.completion_tokens

    def record_failure(self) -> None:
        with self._lock:
            self.failed_calls += 1

    def record_rate_limited(self) -> None:
        with self._lock:
            self.rate_limited += 1

    def record_cache_hit(self) -> None:
        with self._lock:
            self.cache_hits += 1

    def snapshot(self, model_name: str | None = None) -> dict:
        with self._lock:
            latencies = list(self.latencies)
            out = {
                "calls": self.calls,
                "failed_calls": self.failed_calls,
                "attempts": self.attempts,
                "retries": self.retries,
                "cache_hits": self.cache_hits,
                "rate_limited": self.rate_limited,
                "batch_calls": self.batch_calls,
                "batch_prompt_tokens": self.batch_prompt_tokens,
                "batch_completion_tokens": self.batch_completion_tokens,
                **self.tokens,
                "endings": dict(self.endings),
                "latency_total_s": round(sum(latencies), 3),
                "latency_median_s": round(statistics.median(latencies), 4) if latencies else None,
            }
        out["estimated_cost_usd"] = cost_of(model_name, out)
        return out


def cost_of(model_name: str | None, usage: dict) -> float | None:
    """``estimate_cost`` of a usage record (a step's ``usage``, a tracker's snapshot)."""
    return estimate_cost(model_name, usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0,
                         usage.get("batch_prompt_tokens") or 0, usage.get("batch_completion_tokens") or 0,
                         cached_prompt_tokens=usage.get("cached_prompt_tokens") or 0,
                         cache_write_tokens=usage.get("cache_write_tokens") or 0)


def estimate_cost(model_name: str | None, prompt_tokens: int, completion_tokens: int,
                  batch_prompt_tokens: int = 0, batch_completion_tokens: int = 0, *,
                  cached_prompt_tokens: int = 0, cache_write_tokens: int = 0) -> float | None:
    """USD at the catalog's prices (catalog.py; reasoning tokens are in the completion
    tokens, priced as output); the batch_* tokens (included in the totals) are priced at
    config.BATCH_DISCOUNT of the online price; the cached and cache-write tokens (included in
    the prompt tokens) at the model's cached-input and cache-write prices where known."""
    return cost_at(price_of(model_name), prompt_tokens, completion_tokens, batch_prompt_tokens,
                   batch_completion_tokens, cached_prompt_tokens=cached_prompt_tokens,
                   cache_write_tokens=cache_write_tokens)


def cost_at(price: tuple | None, prompt_tokens: int, completion_tokens: int,
            batch_prompt_tokens: int = 0, batch_completion_tokens: int = 0, *,
            cached_prompt_tokens: int = 0, cache_write_tokens: int = 0) -> float | None:
    """``estimate_cost`` at a price already looked up (``price_of``): a report prices
    tens of thousands of steps of a handful of models. The cache's discount and surcharge
    are taken at the online rate."""
    if price is None:
        return None
    online = (prompt_tokens - batch_prompt_tokens) * price[0] + \
        (completion_tokens - batch_completion_tokens) * price[1]
    batch = (batch_prompt_tokens * price[0] + batch_completion_tokens * price[1]) * config.BATCH_DISCOUNT
    cached_price, write_price = (tuple(price[2:4]) + (None, None))[:2]
    cache = cached_prompt_tokens * ((price[0] if cached_price is None else cached_price) - price[0]) + \
        cache_write_tokens * ((price[0] if write_price is None else write_price) - price[0])
    return round((online + batch + cache) / 1e6, 6)
