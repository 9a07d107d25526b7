"""Token, call and latency accounting per model, and its estimated cost."""
from __future__ import annotations

import statistics
import threading

from cupid import config
from cupid.utils.models.catalog import price_of
from cupid.utils.models.request import Usage


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
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.reasoning_tokens = 0  # part of completion_tokens
        self.truncated = 0         # answers cut at the token limit
        self.latencies: list[float] = []

    def record_attempt(self, retry: bool) -> None:
        with self._lock:
            self.attempts += 1
            self.retries += int(retry)

    def record_success(self, usage: Usage | None, latency: float, truncated: bool = False) -> None:
        with self._lock:
            self.calls += 1
            self.truncated += int(truncated)
            if usage is not None:
                self.prompt_tokens += usage.prompt_tokens
                self.completion_tokens += usage.completion_tokens
                self.reasoning_tokens += usage.reasoning_tokens
            self.latencies.append(latency)

    def record_batch(self, usage: Usage | None, truncated: bool = False) -> None:
        """A call answered in a batch (batch.py): counted as a call, priced as a batch one."""
        with self._lock:
            self.calls += 1
            self.batch_calls += 1
            self.truncated += int(truncated)
            if usage is not None:
                self.prompt_tokens += usage.prompt_tokens
                self.completion_tokens += usage.completion_tokens
                self.reasoning_tokens += usage.reasoning_tokens
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
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "reasoning_tokens": self.reasoning_tokens,
                "truncated": self.truncated,
                "latency_total_s": round(sum(latencies), 3),
                "latency_median_s": round(statistics.median(latencies), 4) if latencies else None,
            }
        out["estimated_cost_usd"] = estimate_cost(model_name, out["prompt_tokens"],
                                                  out["completion_tokens"],
                                                  out["batch_prompt_tokens"],
                                                  out["batch_completion_tokens"])
        return out


def estimate_cost(model_name: str | None, prompt_tokens: int, completion_tokens: int,
                  batch_prompt_tokens: int = 0, batch_completion_tokens: int = 0) -> float | None:
    """USD at the catalog's prices (catalog.py; reasoning tokens are in the completion
    tokens, priced as output); the batch_* tokens (included in the totals) are priced at
    config.BATCH_DISCOUNT of the online price."""
    return cost_at(price_of(model_name), prompt_tokens, completion_tokens, batch_prompt_tokens,
                   batch_completion_tokens)


def cost_at(price: tuple[float, float] | None, prompt_tokens: int, completion_tokens: int,
            batch_prompt_tokens: int = 0, batch_completion_tokens: int = 0) -> float | None:
    """``estimate_cost`` at a price already looked up (``price_of``): a report prices
    tens of thousands of steps of a handful of models."""
    if price is None:
        return None
    online = (prompt_tokens - batch_prompt_tokens) * price[0] + \
        (completion_tokens - batch_completion_tokens) * price[1]
    batch = (batch_prompt_tokens * price[0] + batch_completion_tokens * price[1]) * config.BATCH_DISCOUNT
    return round((online + batch) / 1e6, 6)
