"""Pacing at the seam (utils/models/pacing.py): headers read, one limiter per endpoint
and key, a tokens-per-minute limit kept against the loopback server through the openai SDK,
a 429 holding every caller, user-set limits."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from cupid.utils.models import pacing
from cupid.utils.models.pacing import RateLimiter, UserLimits, parse_rate_limit
from cupid.utils.models.rate_limit_headers import parse_duration, stated_limits
from cupid.utils.models.registry import resolve_model
from fake_llm_server import FakeLLMServer, FakeResponse


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_durations_and_headers():
    assert parse_duration("6m0s") == 360.0
    assert parse_duration("1.5s") == 1.5
    assert parse_duration("20ms") == pytest.approx(0.02)
    assert parse_duration("1h2m3s") == 3723.0
    assert parse_duration("nonsense") is None
    stated = stated_limits({"X-RateLimit-Limit-Tokens": "1000", "x-ratelimit-remaining-tokens": "400",
                            "x-ratelimit-reset-tokens": "0.300s",
                            "x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59",
                            "x-ratelimit-reset-requests": "1s"})
    assert stated["tokens"].measured_rate() == pytest.approx(2000.0)
    # A 1-second reset with whole-second precision cannot tell the rate: per minute is assumed.
    assert stated["requests"].measured_rate() is None
    anthropic = stated_limits({"anthropic-ratelimit-tokens-limit": "80000",
                               "anthropic-ratelimit-tokens-remaining": "80000",
                               "anthropic-ratelimit-tokens-reset": "2030-01-01T00:00:00Z"})
    assert anthropic["tokens"].limit == 80000 and anthropic["tokens"].measured_rate() is None
    assert stated_limits({"content-type": "application/json"}) == {}


def test_rate_limit_option():
    assert parse_rate_limit("gpt-4o=tpm=30000,in_flight=8") == (
        "gpt-4o", UserLimits(tokens_per_minute=30000, max_in_flight=8))
    assert parse_rate_limit("rpm=5") == ("*", UserLimits(requests_per_minute=5))
    for bad in ("tpm=-1", "tpm=abc", "speed=3", "gpt-4o=tpm"):
        with pytest.raises(ValueError, match="rate_limit"):
            parse_rate_limit(bad)


def test_one_limiter_per_endpoint_and_key(fake_llm_env: FakeLLMServer):
    evaluated = resolve_model("gpt-4.1-nano-2025-04-14", role="evaluated")
    evaluator = resolve_model("gpt-4o-2024-11-20", role="evaluator")
    assert evaluated.rate_limiter() is evaluator.rate_limiter()
    other_key = resolve_model("openai:gpt-4o", api_key="sk-another")
    assert other_key.rate_limiter() is not evaluator.rate_limiter()
    claude = resolve_model("claude-3-5-sonnet-20241022")
    assert claude.rate_limiter() is not evaluator.rate_limiter()
    assert "sk-test-openai" not in repr(evaluator.limiter_key())  # only a digest is kept


def test_tokens_per_minute_kept_with_few_429s():
    """40 requests of 31 tokens from 8 threads against 300 tokens/s (a 300-token bucket):
    the first answer states the limit, the rest are paced; the run takes about the ideal."""
    prompt = " ".join(["word"] * 30)
    with FakeLLMServer(responder=lambda req: "OK", token_limit=300, token_window=1.0) as server:
        model = resolve_model(f"vllm:paced@{server.openai_base_url}", max_tokens=16)
        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda i: model.chat("", user(prompt)), range(40)))
        elapsed = time.monotonic() - started
        assert answers == ["OK"] * 40
        assert server.charged_tokens == 40 * 31
        ideal = (40 * 31 - 300) / 300.0  # after the initial bucket
        # Paced: no faster than the bucket allows (a load on the machine only slows it).
        assert elapsed >= 0.8 * ideal
        # Not held far beyond it (a pause of a whole minute per 429, say); the bound holds
        # with the machine four times as loaded as the ideal assumes.
        assert elapsed <= 4 * (1.6 * ideal + 0.5)
        assert server.rate_limited <= 2
        assert model.rate_limiter()._tokens.rate * 60 == pytest.approx(18000, rel=0.1)


def wait_until(condition, what: str, deadline_s: float = 20.0) -> None:
    """Poll for an event instead of sleeping a guessed time."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {deadline_s} s")
        time.sleep(0.005)


def test_a_429_holds_every_caller_for_its_retry_after(fake_server: FakeLLMServer):
    model = resolve_model(f"vllm:held@{fake_server.openai_base_url}")
    limiter = model.rate_limiter()
    arrivals: dict[str, bool] = {}  # request -> did it arrive after the hold had ended?

    def responder(req):
        arrivals[req["messages"][0]["content"]] = time.monotonic() >= limiter._pause_until
        return "OK"

    fake_server.responder = responder
    assert model.chat("", user("first")) == "OK"  # the probe: no limits stated
    fake_server.script(FakeResponse(status=429, headers={"retry-after": "0.5"}))
    first = threading.Thread(target=lambda: model.chat("", user("b")))
    first.start()
    wait_until(lambda: limiter.rate_limited == 1, "the 429")
    assert limiter._pause_until > 0
    other = threading.Thread(target=lambda: model.chat("", user("a")))
    other.start()
    first.join(20)
    other.join(20)
    # The caller that never saw the 429 was held until the retry-after had passed.
    assert arrivals["a"] is True and set(arrivals) == {"first", "a", "b"}
    assert [r["messages"][0]["content"] for r in fake_server.requests].count("a") == 1
    assert limiter.rate_limited == 1
    assert model.usage.snapshot()["rate_limited"] == 1


def test_requests_wait_for_the_hold():
    limiter = RateLimiter(user=UserLimits(max_in_flight=4))
    ticket = limiter.acquire(40)
    ticket.fail(429, 0.4, None)
    hold_end = limiter._pause_until
    limiter.acquire(40).settle()
    assert time.monotonic() >= hold_end  # admitted only once the hold was over
    # The caller that slept out the retry-after itself is not held again: admitted while
    # a long hold is still in force.
    limiter.acquire(40).fail(429, 60.0, None)
    admitted = threading.Event()
    caller = threading.Thread(target=lambda: (limiter.acquire(40, waited_pause=True).settle(),
                                              admitted.set()))
    caller.start()
    assert admitted.wait(20)
    assert time.monotonic() < limiter._pause_until
    caller.join(5)


def test_user_set_in_flight_cap():
    active, peak, lock = [0], [0], threading.Lock()

    def responder(req):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return "OK"

    pacing.set_user_limits({"capped": UserLimits(max_in_flight=2)})
    with FakeLLMServer(responder=responder) as server:
        model = resolve_model(f"vllm:capped@{server.openai_base_url}")
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda i: model.chat("", user(str(i))), range(12)))
    assert peak[0] == 2


def test_probe_then_unlimited_without_headers():
    """Before the first answer one request goes at a time; an answer without rate-limit
    headers states no limit, and the threads then run side by side."""
    active, peak, order, lock = [0], [0], [], threading.Lock()

    def responder(req):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            order.append(active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return "OK"

    with FakeLLMServer(responder=responder) as server:
        model = resolve_model(f"vllm:probe@{server.openai_base_url}")
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda i: model.chat("", user(str(i))), range(12)))
    assert order[0] == 1 and peak[0] > 2


def test_estimates_settle_to_actual_usage():
    limiter = RateLimiter(user=UserLimits(tokens_per_minute=6000))
    ticket = limiter.acquire(400, max_tokens=10)  # 100 prompt tokens + 10 at 4 chars a token
    assert ticket.estimate == pytest.approx(110)

    class Usage:
        prompt_tokens, completion_tokens = 200, 20

    ticket.settle(Usage())
    # Calibrated: 2 characters per token, 20-token answers.
    assert limiter.estimate_tokens(400, 10) == pytest.approx(220)
    assert limiter._tokens.level == pytest.approx(6000 - 220, abs=5)


def test_vllm_server_farm_round_robin():
    with FakeLLMServer(responder=lambda req: "one") as first, \
            FakeLLMServer(responder=lambda req: "two") as second:
        model = resolve_model(f"vllm:farmed@{first.openai_base_url},{second.openai_base_url}")
        model.check()  # both servers answer GET /models
        answers = [model.chat("", user(str(i))) for i in range(6)]
        assert sorted(answers) == ["one"] * 3 + ["two"] * 3
        assert len(first.requests) == len(second.requests) == 3
        assert model.rate_limiter() is resolve_model(
            f"vllm:other@{first.openai_base_url},{second.openai_base_url}").rate_limiter()


def test_a_hanging_probe_holds_the_others_two_seconds_at_most():
    held_for: list[float] = []  # how long after the probe went out the second one arrived

    def responder(req):
        if req["messages"][0]["content"] == "0":
            return FakeResponse(hang=True)
        held_for.append(time.monotonic() - limiter._probe_started)
        return "OK"

    with FakeLLMServer(responder=responder) as server:
        # The hanging answer times out after 60 s: far beyond any wait the test allows.
        model = resolve_model(f"vllm:slow@{server.openai_base_url}", timeout=60, max_retries=0)
        limiter = model.rate_limiter()
        first = threading.Thread(target=lambda: pytest.raises(Exception, model.chat, "", user("0")))
        first.start()
        wait_until(lambda: len(server.requests) == 1, "the probe request")
        started = time.monotonic()
        assert model.chat("", user("1")) == "OK"
        # Held behind the probe (its answer may state limits) for probe_wait_s, then let go
        # without waiting for the probe's own timeout; the upper bound holds at four times
        # the load.
        assert held_for[0] >= limiter.probe_wait_s
        assert time.monotonic() - started < 4 * (limiter.probe_wait_s + 1.0)
        assert [r["messages"][0]["content"] for r in server.requests] == ["0", "1"]
    first.join(20)  # stopping the server ended the hanging answer
