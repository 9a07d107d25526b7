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
# The counters a tracker keeps besides the token counts, in the order its snapshot lists them.
COUNTERS = ("calls", "failed_calls", "attempts", "retries", "cache_hits", "rate_limited", "batch_calls",
            "batch_prompt_tokens", "batch_completion_tokens")


class UsageTracker:
    """Calls, retries, tokens and latency of one model; safe to update from many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # The token counts are those of every answer received, withheld ones included: all
        # are billed (reasoning tokens are part of the completion tokens, cached and
        # cache-write ones part of the prompt tokens).
        self._counts = dict.fromkeys((*COUNTERS, *TOKEN_FIELDS), 0)
        self._endings = dict.fromkeys(ENDINGS, 0)  # how the answers ended (endings.py)
        self._latencies: list[float] = []

    def _count(self, usage: Usage | None = None, ending: str | None = None, latency: float | None = None,
               **counters: int) -> None:
        with self._lock:
            for name, amount in counters.items():
                self._counts[name] += amount
            if ending is not None:
                self._endings[ending] = self._endings.get(ending, 0) + 1
            for name in TOKEN_FIELDS if usage is not None else ():
                self._counts[name] += getattr(usage, name)
            if latency is not None:
                self._latencies.append(latency)

    def record_attempt(self, retry: bool) -> None:
        self._count(attempts=1, retries=int(retry))

    def record_success(self, usage: Usage | None, latency: float, ending: str = "stop") -> None:
        self._count(usage, ending, latency, calls=1)

    def record_batch(self, usage: Usage | None, ending: str = "stop") -> None:
        """A call answered in a batch (batch.py): counted as a call, priced as a batch one."""
        self._count(usage, ending, calls=1, batch_calls=1,
                    batch_prompt_tokens=usage.prompt_tokens if usage else 0,
                    batch_completion_tokens=usage.completion_tokens if usage else 0)

    def record_failure(self) -> None:
        self._count(failed_calls=1)

    def record_rate_limited(self) -> None:
        self._count(rate_limited=1)

    def record_cache_hit(self) -> None:
        self._count(cache_hits=1)

    def snapshot(self, model_name: str | None = None) -> dict:
        with self._lock:
            latencies = list(self._latencies)
            out = {**self._counts, "endings": dict(self._endings),
                   "latency_total_s": round(sum(latencies), 3),
                   "latency_median_s": round(statistics.median(latencies), 4) if latencies else None}
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
