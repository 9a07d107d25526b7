"""Pacing at the seam: one limiter per provider endpoint and API key.

Every model and role that calls the same endpoint with the same key shares one
``RateLimiter`` (``limiter_for``), so an evaluated model and the evaluator on one account
draw from one budget. The limiter keeps three things under their limits:

* requests in flight (a user-set cap; none by default: the executor's threads bound it);
* tokens per minute and requests per minute, as the provider states them in its answers'
  rate-limit headers (each provider declares its family: OpenAI/Together/vLLM
  ``x-ratelimit-*`` in openai_compatible.py, Anthropic ``anthropic-ratelimit-*``), or as the
  user sets them (``--rate_limit``).

It mirrors the provider's token bucket: each request reserves an estimate of its tokens
(prompt characters at the endpoint's measured characters per token, plus the mean answer
so far) before it is sent, and the estimate is settled against the answer's usage when it
returns, so the bucket tracks what the provider actually counted. The refill rate is read
from the headers: ``(limit - remaining) / reset`` is exact for a bucket that refills
linearly, which is what the providers document. Until the first answer has told it the
limits, a limiter with nothing set lets one request through at a time (a probe), so the
first wave of a 32-thread run cannot empty the budget at once (at most ``probe_wait_s``:
a slow first answer does not hold the others longer). After a 429 every request
on the endpoint waits for the ``retry-after``, and the usable rate drops by 10% (recovering
slowly with successes).

Waiters are served in arrival order, so a long prompt is never starved by short ones.
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping

from .rate_limit_headers import stated_limits


@dataclass
class UserLimits:
    """Limits a user sets; None leaves that one to the provider's headers."""
    tokens_per_minute: float | None = None
    requests_per_minute: float | None = None
    max_in_flight: int | None = None


class _Bucket:
    """A token bucket mirroring the provider's: ``level`` may go negative after a settle
    that found a request bigger than estimated (the debt is then waited out)."""

    def __init__(self, capacity: float, rate: float, level: float | None = None) -> None:
        self.capacity = capacity
        self.rate = rate
        self.level = capacity if level is None else min(level, capacity)
        self.stamp = time.monotonic()

    def refill(self, now: float, factor: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate * factor)
        self.stamp = now

    def wait_for(self, amount: float, factor: float) -> float:
        """Seconds until ``amount`` is available (an amount above capacity waits for a full
        bucket, so an oversized request still goes, alone)."""
        need = min(amount, self.capacity) - self.level
        return 0.0 if need <= 0 else need / (self.rate * factor)


class Ticket:
    """One admitted request; ``settle`` or ``fail`` it exactly once."""

    def __init__(self, limiter: "RateLimiter", estimate: float, prompt_chars: int) -> None:
        self.limiter = limiter
        self.estimate = estimate
        self.prompt_chars = prompt_chars
        self.rate_limited = False
        self._closed = False

    def settle(self, usage: Any = None, headers: Mapping[str, str] | None = None) -> None:
        if not self._closed:
            self._closed = True
            self.limiter._settle(self, usage, headers)

    def fail(self, status: int | None, retry_after: float | None,
             headers: Mapping[str, str] | None = None) -> None:
        if not self._closed:
            self._closed = True
            self.rate_limited = status == 429
            self.limiter._fail(self, status, retry_after, headers)


class RateLimiter:
    """Paces every request to one endpoint with one key. Thread-safe; see the module doc."""

    recovery_per_success = 0.002
    min_factor = 0.5
    probe_wait_s = 2.0

    def __init__(self, user: UserLimits | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.user = user or UserLimits()
        self._clock = clock
        self._cond = threading.Condition()
        tpm, rpm = self.user.tokens_per_minute, self.user.requests_per_minute
        self._tokens = _Bucket(tpm, tpm / 60.0) if tpm else None
        self._requests = _Bucket(rpm, rpm / 60.0) if rpm else None
        self._learned = self.user != UserLimits()  # user-set limits need no probe
        self._in_flight = 0
        self._probe_started = 0.0
        self._pause_until = 0.0
        self._factor = 1.0
        self._next_ticket = 0
        self._serving = 0
        # Calibration: characters per prompt token, and the mean answer length.
        self._chars = 0
        self._prompt_tokens = 0
        self._answers = 0
        self._completion_tokens = 0
        self.rate_limited = 0  # 429s answered on this endpoint

    # -- estimates ----------------------------------------------------------------------------
    def estimate_tokens(self, prompt_chars: int, max_tokens: int | None) -> float:
        with self._cond:
            per_token = (self._chars / self._prompt_tokens) if self._prompt_tokens else 4.0
            answer = (self._completion_tokens / self._answers) if self._answers \
                else min(max_tokens or 256, 256)
        return prompt_chars / per_token + answer

    # -- admission ------------------------------------------------------------------------------
    def acquire(self, prompt_chars: int, max_tokens: int | None = None, *,
                waited_pause: bool = False) -> Ticket:
        """Block until the request may go; returns its ticket. ``waited_pause``: the caller
        has already slept out a 429's retry-after itself."""
        estimate = self.estimate_tokens(prompt_chars, max_tokens)
        with self._cond:
            ticket_no = self._next_ticket
            self._next_ticket += 1
            while True:
                delay = self._admission_delay(ticket_no, estimate, waited_pause)
                if delay == 0.0:
                    break
                self._cond.wait(timeout=None if delay is None else delay)
            self._serving += 1
            if not self._learned and self._in_flight == 0:
                self._probe_started = self._clock()
            self._in_flight += 1
            if self._tokens is not None:
                self._tokens.level -= estimate
            if self._requests is not None:
                self._requests.level -= 1
            self._cond.notify_all()
        return Ticket(self, estimate, prompt_chars)

    def _admission_delay(self, ticket_no: int, estimate: float, waited_pause: bool) -> float | None:
        """0.0 when the request may go now; else seconds to wait (None: until notified)."""
        if ticket_no != self._serving:
            return None
        if not self._learned and self._in_flight >= 1:
            # Probing: one request until the first answer states the limits, for at most
            # probe_wait_s (a slow or hanging first answer must not serialize the run).
            waited = self._clock() - self._probe_started
            if waited < self.probe_wait_s:
                return self.probe_wait_s - waited
            self._learned = True
        if self.user.max_in_flight is not None and self._in_flight >= self.user.max_in_flight:
            return None
        now = self._clock()
        if now < self._pause_until and not waited_pause:
            return self._pause_until - now
        delay = 0.0
        for bucket, amount in ((self._tokens, estimate), (self._requests, 1.0)):
            if bucket is not None:
                bucket.refill(now, self._factor)
                delay = max(delay, bucket.wait_for(amount, self._factor))
        return delay

    # -- answers -------------------------------------------------------------------------------
    def _settle(self, ticket: Ticket, usage: Any, headers: Mapping[str, str] | None) -> None:
        with self._cond:
            self._in_flight -= 1
            actual = None
            if usage is not None:
                prompt = getattr(usage, "prompt_tokens", 0) or 0
                completion = getattr(usage, "completion_tokens", 0) or 0
                actual = prompt + completion
                if prompt > 0 and ticket.prompt_chars > 0:
                    self._chars += ticket.prompt_chars
                    self._prompt_tokens += prompt
                self._answers += 1
                self._completion_tokens += completion
            if self._tokens is not None and actual is not None:
                self._tokens.level += ticket.estimate - actual
            self._learn(headers)
            self._factor = min(1.0, self._factor + self.recovery_per_success)
            self._cond.notify_all()

    def _fail(self, ticket: Ticket, status: int | None, retry_after: float | None,
              headers: Mapping[str, str] | None) -> None:
        with self._cond:
            self._in_flight -= 1
            if status == 429:
                self.rate_limited += 1
                self._learn(headers)
                self._factor = max(self.min_factor, self._factor * 0.9)
                wait = retry_after if retry_after is not None else 1.0
                self._pause_until = max(self._pause_until, self._clock() + wait)
                if self._tokens is not None:
                    self._tokens.level = min(self._tokens.level, 0.0)
            elif self._tokens is not None:
                # The provider did not count a request it refused or never received.
                self._tokens.level += ticket.estimate
            self._cond.notify_all()

    def _learn(self, headers: Mapping[str, str] | None) -> None:
        """Adopt the limits an answer states, unless the user set that one."""
        stated = stated_limits(headers)
        now = self._clock()
        for kind, user_value in (("tokens", self.user.tokens_per_minute),
                                 ("requests", self.user.requests_per_minute)):
            info = stated.get(kind)
            if info is None or user_value:
                continue
            bucket = getattr(self, f"_{kind}")  # self._tokens, self._requests
            measured = info.measured_rate()
            if bucket is None:
                # First statement: start from what the provider says is left; the limit is
                # per minute (as documented) unless the reset time says otherwise.
                bucket = _Bucket(info.limit, measured or info.limit / 60.0, level=info.remaining)
                bucket.stamp = now
                setattr(self, f"_{kind}", bucket)
            else:
                bucket.capacity = info.limit
                if measured is not None:  # smoothed: one header's rounding moves it little
                    bucket.rate = 0.8 * bucket.rate + 0.2 * measured
        self._learned = True  # an answer without headers states no limits: none to keep


# ---------------------------------------------------------------------------------------
# One limiter per endpoint and key
# ---------------------------------------------------------------------------------------
_LIMITERS: dict[Hashable, RateLimiter] = {}
_USER_LIMITS: dict[str, UserLimits] = {}  # by model name; "*" for every endpoint
_lock = threading.Lock()


def endpoint_key(provider: str, base_url: str | None, api_key: str | None) -> tuple:
    """The limiter's key: the key itself is never kept, only a digest."""
    digest = hashlib.sha256((api_key or "").encode("utf-8")).hexdigest()[:16]
    return (provider, (base_url or "").rstrip("/"), digest)


def set_user_limits(limits: Mapping[str, UserLimits]) -> None:
    """Limits from the command line, by model name ("*": every endpoint). Applies to
    limiters made afterwards."""
    with _lock:
        _USER_LIMITS.clear()
        _USER_LIMITS.update(limits)


def limiter_for(key: Hashable | None, model_name: str = "") -> RateLimiter | None:
    """The limiter shared by every model on ``key`` (``Model.limiter_key``). A model without
    one has no provider limits to keep: it gets a limiter of its own when the user set limits
    for it, else None."""
    with _lock:
        user = _USER_LIMITS.get(model_name) or _USER_LIMITS.get("*")
        if key is None:
            if user is None:
                return None
            key = ("model", model_name)
        if key not in _LIMITERS:
            _LIMITERS[key] = RateLimiter(user)
        return _LIMITERS[key]


_LIMIT_FIELDS = {"tpm": "tokens_per_minute", "rpm": "requests_per_minute", "in_flight": "max_in_flight"}


def parse_rate_limit(spec: str) -> tuple[str, UserLimits]:
    """``[MODEL=]tpm=N,rpm=N,in_flight=N`` -> (model name or "*", limits)."""
    target, fields = "*", spec
    head, sep, tail = spec.partition("=")
    if sep and head not in _LIMIT_FIELDS and "," not in head:
        target, fields = head, tail
    limits = UserLimits()
    for part in filter(None, (p.strip() for p in fields.split(","))):
        name, eq, value = part.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not eq or number <= 0 or name not in _LIMIT_FIELDS:
            raise ValueError(f"--rate_limit {spec!r}: expected [MODEL=]tpm=N,rpm=N,in_flight=N "
                             f"with positive numbers, got {part!r}")
        setattr(limits, _LIMIT_FIELDS[name], int(number) if name == "in_flight" else number)
    return target, limits
