"""The rate limiter's accounting, without waiting: what each admission, answer and failure
does to the in-flight count, the buckets and the calibration (utils/models/pacing.py)."""
from __future__ import annotations

import time

import pytest

from cupid.utils.models import pacing
from cupid.utils.models.pacing import RateLimiter, UserLimits, limiter_for, parse_rate_limit
from cupid.utils.models.rate_limit_headers import parse_duration
from model_state import reset_limiters


class Answer:
    def __init__(self, prompt_tokens=None, completion_tokens=None) -> None:
        if prompt_tokens is not None:
            self.prompt_tokens = prompt_tokens
        if completion_tokens is not None:
            self.completion_tokens = completion_tokens


def test_in_flight_counts_each_ticket_once():
    limiter = RateLimiter(user=UserLimits(max_in_flight=8))
    tickets = [limiter.acquire(40) for _ in range(3)]
    assert limiter._in_flight == 3
    tickets[0].settle(Answer(10, 5))
    assert limiter._in_flight == 2
    tickets[1].fail(500, None)
    tickets[1].fail(500, None)  # a ticket is closed once: the second call changes nothing
    tickets[1].settle()
    assert limiter._in_flight == 1


def test_buckets_charged_and_refunded():
    limiter = RateLimiter(user=UserLimits(tokens_per_minute=6000, requests_per_minute=60))
    ticket = limiter.acquire(400, max_tokens=10)  # 100 prompt tokens at 4 characters + 10
    assert limiter._requests.level == pytest.approx(59, abs=0.1)
    assert limiter._tokens.level == pytest.approx(6000 - 110, abs=1)
    ticket.fail(500, None)  # never counted by the provider: the estimate comes back
    assert limiter._tokens.level == pytest.approx(6000, abs=1)


def test_a_429_without_retry_after_holds_one_second():
    limiter = RateLimiter(user=UserLimits(tokens_per_minute=6000))
    ticket = limiter.acquire(400)
    before = time.monotonic()
    ticket.fail(429, None)
    after = time.monotonic()
    assert before + 1.0 <= limiter._pause_until <= after + 1.0 and limiter.rate_limited == 1
    assert limiter._tokens.level <= 0  # the provider says the budget is spent


def test_calibration_ignores_answers_without_prompt_tokens():
    limiter = RateLimiter(user=UserLimits(max_in_flight=8))
    limiter.acquire(400, max_tokens=10).settle(Answer(None, 5))  # no prompt count reported
    limiter.acquire(400, max_tokens=10).settle(Answer(0, 5))     # a zero count
    limiter.acquire(400, max_tokens=10).settle(Answer(100, 5))   # 4 characters a token
    # 400 characters at 4 a token, plus the mean answer of 5 tokens.
    assert limiter.estimate_tokens(400, 10) == pytest.approx(105)


def test_a_stated_limit_without_reset_time_is_per_minute():
    limiter = RateLimiter()
    limiter._learn({"x-ratelimit-limit-tokens": "60000", "x-ratelimit-remaining-tokens": "30000"})
    assert limiter._tokens.rate == pytest.approx(1000.0)  # 60000 a minute
    assert limiter._tokens.level == 30000 and limiter._tokens.capacity == 60000


def test_limiters_by_key_and_user_limits_by_model():
    reset_limiters()
    try:
        assert limiter_for(("openai", "http://h", "abc")) is limiter_for(("openai", "http://h", "abc"))
        pacing.set_user_limits({"gpt-4o": UserLimits(max_in_flight=2)})
        assert limiter_for(None, "gpt-4o") is not None and limiter_for(None, "claude") is None
        pacing.set_user_limits({"*": UserLimits(max_in_flight=2)})
        assert limiter_for(None, "claude") is not None
    finally:
        reset_limiters()


def test_rate_limit_option_for_every_endpoint():
    assert parse_rate_limit("tpm=30000") == ("*", UserLimits(tokens_per_minute=30000))
    assert parse_rate_limit("in_flight=4") == ("*", UserLimits(max_in_flight=4))


def test_a_reset_date_in_the_past_is_now():
    assert parse_duration("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert parse_duration("2015-10-21T07:28:00Z") == 0.0
    assert parse_duration("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412480.0) == 30.0
