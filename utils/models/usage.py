"""Token, call and latency accounting per model, and its estimated cost."""
from __future__ import annotations

import statistics
import threading

from ... import config
from .catalog import price_of
from .endings import ENDINGS
from .request import Usage

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

    def count(self, usage: Usage | None = None, ending: str | None = None, latency: float | None = None,
              **counters: int) -> None:
        """Add ``counters`` (of COUNTERS), and of an answer its tokens (those of a batch's
        answer, ``usage.batch``, priced as a batch's too), how it ended and its latency."""
        with self._lock:
            for name, amount in counters.items():
                self._counts[name] += amount
            if ending is not None:
                self._endings[ending] = self._endings.get(ending, 0) + 1
            for name in TOKEN_FIELDS if usage is not None else ():
                self._counts[name] += getattr(usage, name)
            for name in ("prompt_tokens", "completion_tokens") if usage is not None and usage.batch else ():
                self._counts[f"batch_{name}"] += getattr(usage, name)
            if latency is not None:
                self._latencies.append(latency)

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
    return estimate_cost(model_name, *(usage.get(name) or 0 for name in (
        "prompt_tokens", "completion_tokens", "batch_prompt_tokens", "batch_completion_tokens",
        "cached_prompt_tokens", "cache_write_tokens")))


def estimate_cost(model_name: str | None, *tokens: int, **cached_tokens: int) -> float | None:
    """``cost_at`` the model's price in the catalog (catalog.py ``price_of``)."""
    return cost_at(price_of(model_name), *tokens, **cached_tokens)


def cost_at(price: tuple | None, prompt_tokens: int, completion_tokens: int,
            batch_prompt_tokens: int = 0, batch_completion_tokens: int = 0,
            cached_prompt_tokens: int = 0, cache_write_tokens: int = 0) -> float | None:
    """USD at ``price`` (``price_of``: a report looks it up once for tens of thousands of
    steps); reasoning tokens are in the completion tokens, priced as output. The batch_*
    tokens (included in the totals) are priced at config.BATCH_DISCOUNT of the online price;
    the cached and cache-write tokens (included in the prompt tokens) at the model's
    cached-input and cache-write prices where known, taken at the online rate."""
    if price is None:
        return None
    online = (prompt_tokens - batch_prompt_tokens) * price[0] + \
        (completion_tokens - batch_completion_tokens) * price[1]
    batch = (batch_prompt_tokens * price[0] + batch_completion_tokens * price[1]) * config.BATCH_DISCOUNT
    cached_price, write_price = (tuple(price[2:4]) + (None, None))[:2]
    cache = cached_prompt_tokens * ((price[0] if cached_price is None else cached_price) - price[0]) + \
        cache_write_tokens * ((price[0] if write_price is None else write_price) - price[0])
    return round((online + batch + cache) / 1e6, 6)
