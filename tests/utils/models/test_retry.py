"""The retry policy as a table: which failures are retried, which are not, how long the
server asks us to wait; and the cost of a run against hand-computed values."""
from __future__ import annotations

import json
import time
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

import httpx
import openai
import pytest

from cupid import config
from cupid.utils.models.call_errors import ModelCallFailed, PermanentModelError, TransientModelError
from cupid.utils.models.model import Model
from cupid.utils.models.openai_models import OpenAIModel
from cupid.utils.models.request import Completion, Request
from cupid.utils.models.retry import backoff_delay, classify_error, retry_after_of
from cupid.utils.models.usage import estimate_cost
from cupid.utils.models.endings import ENDINGS
from fake_llm_server import FakeLLMServer, FakeResponse

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

URL = "http://127.0.0.1:9/v1/chat/completions"


def http_response(status: int, headers: dict | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers or {}, request=httpx.Request("POST", URL),
                          json={"error": {"message": f"status {status}"}})


def sdk_error(status: int, headers: dict | None = None) -> openai.APIStatusError:
    """The exception the OpenAI SDK raises for this status (its own class per status)."""
    response = http_response(status, headers)
    return openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")._make_status_error_from_response(response)


def http_status_error(status: int, headers: dict | None = None) -> httpx.HTTPStatusError:
    """What a user's own model built on httpx raises (``response.raise_for_status()``)."""
    response = http_response(status, headers)
    return httpx.HTTPStatusError(f"status {status}", request=response.request, response=response)


# status -> retried? (RFC 9110: 408 Request Timeout, 425 Too Early, 429 Too Many Requests
# and the 5xx are worth another attempt; 409 Conflict is what OpenAI answers for a
# concurrent update of the same resource and documents as retryable; 529 is Anthropic's
# "overloaded"; the other 4xx would fail the same way again.)
STATUS_TABLE = {400: False, 401: False, 402: False, 403: False, 404: False, 405: False,
                408: True, 409: True, 413: False, 418: False, 422: False, 425: True, 429: True,
                500: True, 501: True, 502: True, 503: True, 504: True, 529: True, 599: True}


@pytest.mark.parametrize("status,retried", sorted(STATUS_TABLE.items()))
@pytest.mark.parametrize("make", [sdk_error, http_status_error], ids=["openai-sdk", "httpx"])
def test_status_classification(status: int, retried: bool, make):
    retryable, _, reason = classify_error(make(status))
    assert retryable is retried
    assert reason.startswith(f"HTTP {status}")


RETRY_AFTER_TABLE = [
    ({"retry-after": "7"}, 7.0),
    ({"retry-after": "1.5"}, 1.5),
    ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),   # the precise one wins
    ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past: go now
    ({"retry-after": "soon"}, None),                          # not a number nor a date
    ({"retry-after": "Wed, 21 Oct 2015 07:28:00"}, None),     # a date without its zone
    ({}, None),
]


@pytest.mark.parametrize("headers,seconds", RETRY_AFTER_TABLE)
def test_retry_after_header(headers: dict, seconds):
    assert retry_after_of(sdk_error(429, headers)) == seconds
    assert classify_error(http_status_error(503, headers))[1] == seconds


def test_retry_after_as_an_http_date_in_the_future(monkeypatch):
    monkeypatch.setattr(config, "RETRY_MAX_DELAY", 60.0)  # the tests' default caps waits
    when = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=30)
    error = sdk_error(429, {"retry-after": format_datetime(when, usegmt=True)})
    before = time.time()
    wait = retry_after_of(error)
    after = time.time()
    assert when.timestamp() - after <= wait <= when.timestamp() - before
    # ... and the backoff waits at least that long.
    assert backoff_delay(0, wait) >= wait


def test_retry_after_attribute_of_a_transient_error():
    assert classify_error(TransientModelError("busy", retry_after=4.0)) == (True, 4.0, "busy")
    assert retry_after_of(type("E", (Exception,), {"retry_after": 2})()) == 2.0


@pytest.mark.parametrize("exc,retried", [
    (TimeoutError("read timed out"), True),
    (ConnectionResetError("reset by peer"), True),
    (ConnectionRefusedError("refused"), True),
    (httpx.ConnectError("refused"), True),
    (httpx.ReadTimeout("slow"), True),
    (openai.APIConnectionError(request=httpx.Request("POST", URL)), True),
    (openai.APITimeoutError(request=httpx.Request("POST", URL)), True),
    # A user's model that parses the server's body itself: a truncated body or an HTML
    # error page is a transient fault of the server.
    (json.JSONDecodeError("Expecting value", "<html>502 Bad Gateway</html>", 0), True),
    # A user's model that raises the server's raw JSON error as its message: no status
    # attribute to read, so it is retried within the bounded attempts.
    (RuntimeError('{"error": {"code": 503, "message": "overloaded"}}'), True),
    # Building the request wrongly fails the same way every time.
    (ValueError("bad prompt"), False),
    (KeyError("choices"), False),
    (TypeError("unexpected keyword"), False),
    (PermanentModelError("context length exceeded"), False),
])
def test_exception_classification(exc: BaseException, retried: bool):
    assert classify_error(exc)[0] is retried


class ScriptedUserModel(Model):
    """A user's own model: fails with the given exceptions, then answers."""

    def __init__(self, *failures: BaseException) -> None:
        super().__init__("user-model", max_retries=3, sleep=self.record)
        self.failures = list(failures)
        self.delays: list[float] = []
        self.calls = 0

    def record(self, seconds: float) -> None:
        self.delays.append(seconds)

    def complete(self, request: Request) -> Completion:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return Completion(text="answer")


def test_user_model_raw_json_error_is_retried_then_answers(monkeypatch):
    monkeypatch.setattr(config, "RETRY_MAX_DELAY", 60.0)
    model = ScriptedUserModel(json.JSONDecodeError("Expecting value", "<html>", 0),
                              http_status_error(503, {"retry-after": "5"}))
    assert model.generate("", [{"role": "user", "content": "q"}]).text == "answer"
    assert model.calls == 3 and len(model.delays) == 2 and model.delays[1] >= 5.0


def test_user_model_client_error_is_not_retried():
    model = ScriptedUserModel(http_status_error(400))
    with pytest.raises(ModelCallFailed) as info:
        model.generate("", [{"role": "user", "content": "q"}])
    assert model.calls == 1 and model.delays == [] and "HTTP 400" in str(info.value)


@pytest.mark.parametrize("status", [408, 409, 425])
def test_retryable_4xx_through_the_sdk(fake_llm_env: FakeLLMServer, status: int):
    delays: list[float] = []
    model = OpenAIModel("gpt-4o", sleep=delays.append)
    fake_llm_env.script(FakeResponse(status=status, text="try again"), "second time")
    assert model.chat("", [{"role": "user", "content": "q"}]) == "second time"
    assert len(fake_llm_env.requests) == 2 and len(delays) == 1


def test_http_date_retry_after_through_the_sdk(fake_llm_env: FakeLLMServer, monkeypatch):
    monkeypatch.setattr(config, "RETRY_MAX_DELAY", 60.0)
    monkeypatch.setattr(config, "RETRY_BASE_DELAY", 0.01)
    delays: list[float] = []
    model = OpenAIModel("gpt-4o", sleep=delays.append)
    when = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=20)
    fake_llm_env.script(FakeResponse(status=429, headers={"Retry-After": format_datetime(when, usegmt=True)}),
                        "after the date")
    before = time.time()
    assert model.chat("", [{"role": "user", "content": "q"}]) == "after the date"
    after = time.time()
    # The seam waits until the date: no less than what was left of it once the answer was in.
    assert len(delays) == 1 and when.timestamp() - after <= delays[0] <= when.timestamp() - before


# ---------------------------------------------------------------------------------------
# Cost, against values worked by hand
# ---------------------------------------------------------------------------------------
PRICES = {"model-a": (2.50, 10.00), "model-b": (0.15, 0.60)}


def use_prices(monkeypatch) -> None:
    """Our own price table (USD per million input / output tokens), not the catalog's."""
    import cupid.utils.models.usage as usage

    monkeypatch.setattr(usage, "price_of", lambda name: PRICES.get(name) if name else None)


@pytest.mark.parametrize("model,prompt,completion,batch_prompt,batch_completion,usd", [
    # 1,000,000 prompt tokens at $2.50 + 200,000 completion tokens at $10 = 2.50 + 2.00
    ("model-a", 1_000_000, 200_000, 0, 0, 4.50),
    # 12,345 x 0.15 / 1e6 = 0.00185175; 678 x 0.60 / 1e6 = 0.0004068; sum 0.00225855 -> 6 places
    ("model-b", 12_345, 678, 0, 0, 0.002259),
    # half of each at the batch discount (0.5): online 500k x 2.5 + 100k x 10 = 2.25 USD,
    # batch (500k x 2.5 + 100k x 10) x 0.5 = 1.125 USD
    ("model-a", 1_000_000, 200_000, 500_000, 100_000, 3.375),
    # all in batch
    ("model-b", 2_000_000, 1_000_000, 2_000_000, 1_000_000, 0.45),
    ("model-a", 0, 0, 0, 0, 0.0),
])
def test_estimate_cost_hand_computed(monkeypatch, model, prompt, completion, batch_prompt,
                                     batch_completion, usd):
    use_prices(monkeypatch)
    monkeypatch.setattr(config, "BATCH_DISCOUNT", 0.5)
    assert estimate_cost(model, prompt, completion, batch_prompt, batch_completion) == usd


def test_cached_prompt_tokens_priced_at_the_cached_price(monkeypatch):
    import cupid.utils.models.usage as usage
    from cupid.utils.models.catalog import Price

    monkeypatch.setattr(usage, "price_of", lambda name: Price(3.00, 15.00, 0.30, 3.75))
    # 1M prompt tokens of which 600k read from the cache and 100k written to it:
    # 300k x 3 + 600k x 0.30 + 100k x 3.75 = 0.90 + 0.18 + 0.375; 10k output x 15 = 0.15
    assert estimate_cost("m", 1_000_000, 10_000, cached_prompt_tokens=600_000,
                         cache_write_tokens=100_000) == round(0.90 + 0.18 + 0.375 + 0.15, 6)
    # No cached price known: the cached tokens cost what input costs.
    monkeypatch.setattr(usage, "price_of", lambda name: Price(3.00, 15.00))
    assert estimate_cost("m", 1_000_000, 0, cached_prompt_tokens=600_000) == 3.0


def test_catalog_prices_the_prompt_cache():
    from cupid.utils.models.catalog import price_of

    assert price_of("gpt-4o-2024-11-20").cached_input == 1.25      # half of 2.50
    assert price_of("gpt-5-mini").cached_input == 0.025            # a tenth of 0.25
    assert price_of("gpt-4o-2024-05-13").cached_input is None      # none: priced as input
    assert price_of("claude-3-5-sonnet-20241022")[2:] == (0.3, 3.75)  # 0.1x and 1.25x of 3.00
    assert price_of("gemini-2.5-flash").cached_input == 0.03


def test_estimate_cost_unknown_model_is_none_not_zero(monkeypatch):
    use_prices(monkeypatch)
    assert estimate_cost("model-z", 1000, 1000) is None
    assert estimate_cost(None, 1000, 1000) is None


# ---------------------------------------------------------------------------------------
# Where a status and headers are found on errors other than the SDKs'
# ---------------------------------------------------------------------------------------
class Raised(Exception):
    """A user's model's own exception, carrying whatever attributes its library sets."""

    def __init__(self, **attributes) -> None:
        super().__init__("failed")
        self.__dict__.update(attributes)


class Response:
    def __init__(self, status_code=None, headers=None) -> None:
        self.status_code = status_code
        self.headers = headers


@pytest.mark.parametrize("exc, retried", [
    (Raised(code=429), True),                          # google-genai's errors: .code
    (Raised(code=400), False),
    (Raised(status=503), True),                        # aiohttp-style: .status
    (Raised(status=404), False),
    (Raised(code=100, response=Response(400)), True),  # 100 is a status (odd, not a refusal)
    (Raised(status_code=404), False),                  # requests/httpx-style: .status_code
    (Raised(status_code=302), True),                   # a redirect nobody followed: not refused
    (Raised(code=600, response=Response(404)), False), # 600 is no HTTP status: the response's is read
    (Raised(code=99, response=Response(400)), False),
    (Raised(code=599, response=Response(400)), True),
    (Raised(response=Response("503")), True),          # not a number: no status, unknown error
])
def test_status_found_on_other_errors(exc, retried):
    assert classify_error(exc)[0] is retried


def test_retry_after_from_a_plain_headers_dict():
    assert retry_after_of(Raised(response=Response(429, {"retry-after": "5"}))) == 5.0
    assert retry_after_of(Raised(response=Response(429, {"retry-after-ms": "1500"}))) == 1.5


def test_headers_of():
    from cupid.utils.models.retry import headers_of

    assert headers_of(sdk_error(429, {"x-ratelimit-limit-tokens": "9"}))["x-ratelimit-limit-tokens"] == "9"
    assert headers_of(Raised(response=Response(429, {"a": "b"}))) == {"a": "b"}
    assert headers_of(ValueError("no response")) is None


def test_reasons_recorded_for_a_failure():
    assert classify_error(PermanentModelError("too long")) == (False, None, "too long")
    assert classify_error(ValueError("bad prompt")) == (False, None, "ValueError: bad prompt")
    assert classify_error(RuntimeError("boom")) == (True, None, "RuntimeError: boom")


def test_backoff_bounds(monkeypatch):
    monkeypatch.setattr(config, "RETRY_BASE_DELAY", 2.0)
    monkeypatch.setattr(config, "RETRY_MAX_DELAY", 10.0)
    import cupid.utils.models.retry as retry

    monkeypatch.setattr(retry.random, "uniform", lambda low, high: low)
    assert [backoff_delay(a, None) for a in range(4)] == [1.0, 2.0, 4.0, 5.0]  # half the ceiling
    monkeypatch.setattr(retry.random, "uniform", lambda low, high: high)
    assert [backoff_delay(a, None) for a in range(4)] == [2.0, 4.0, 8.0, 10.0]
    # A server's Retry-After is a floor, capped at twice the longest backoff.
    assert backoff_delay(0, 7.0) == 7.0
    assert backoff_delay(0, 100.0) == 20.0


def test_usage_tracker_counts_and_prices_by_hand(monkeypatch):
    from cupid.utils.models.request import Usage
    from cupid.utils.models.usage import UsageTracker

    use_prices(monkeypatch)
    monkeypatch.setattr(config, "BATCH_DISCOUNT", 0.5)
    tracker = UsageTracker()
    assert tracker.snapshot("model-a") == {
        "calls": 0, "failed_calls": 0, "attempts": 0, "retries": 0, "cache_hits": 0,
        "rate_limited": 0, "batch_calls": 0, "batch_prompt_tokens": 0, "batch_completion_tokens": 0,
        "prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0, "cached_prompt_tokens": 0,
        "cache_write_tokens": 0, "endings": dict.fromkeys(ENDINGS, 0),
        "latency_total_s": 0, "latency_median_s": None,
        "estimated_cost_usd": 0.0}
    tracker.count(attempts=1, retries=0)
    tracker.count(attempts=1, retries=1)
    tracker.count(Usage(600_000, 100_000), "stop", 1.23456, calls=1)
    tracker.count(None, "refused", 0.10004, calls=1)
    tracker.count(Usage(0, 0), "length", 2.0, calls=1)
    tracker.count(Usage(300_000, 60_000, batch=True), "stop", calls=1, batch_calls=1)
    tracker.count(Usage(100_000, 40_000, batch=True), "stop", calls=1, batch_calls=1)
    tracker.count(None, "stop", calls=1, batch_calls=1)
    tracker.count(failed_calls=2, rate_limited=2, cache_hits=2)
    snap = tracker.snapshot("model-a")
    assert snap == {
        "calls": 6, "failed_calls": 2, "attempts": 2, "retries": 1, "cache_hits": 2,
        "rate_limited": 2, "batch_calls": 3, "batch_prompt_tokens": 400_000,
        "batch_completion_tokens": 100_000, "prompt_tokens": 1_000_000, "completion_tokens": 200_000,
        "reasoning_tokens": 0, "cached_prompt_tokens": 0, "cache_write_tokens": 0,
        "endings": {**dict.fromkeys(ENDINGS, 0), "stop": 4, "refused": 1, "length": 1},
        "latency_total_s": 3.335, "latency_median_s": 1.2346,
        # online 600k x 2.5 + 100k x 10 = 2.50 USD; batch (400k x 2.5 + 100k x 10) x 0.5 = 1.00
        "estimated_cost_usd": 3.5}
    assert tracker.snapshot()["estimated_cost_usd"] is None
    assert tracker.snapshot("")["estimated_cost_usd"] is None


def sdk_error_with(status: int, error: dict) -> openai.APIStatusError:
    response = httpx.Response(status, request=httpx.Request("POST", URL), json={"error": error})
    return openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")._make_status_error_from_response(response)


VLLM_TOO_LONG = ("This model's maximum context length is 4096 tokens. However, your request has "
                 "5000 input tokens. Please reduce the length of the input messages.")


@pytest.mark.parametrize("exc, message", [
    (sdk_error_with(400, {"message": VLLM_TOO_LONG, "type": "BadRequestError"}), VLLM_TOO_LONG),
    (sdk_error_with(400, {"message": "too many tokens", "code": "context_length_exceeded"}), "too many tokens"),
    (sdk_error_with(400, {"message": "request (9000 tokens) is too big", "type": "exceed_context_size_error"}),
     "request (9000 tokens) is too big"),
    (Raised(status_code=400, body={"error": {"message": VLLM_TOO_LONG}}), VLLM_TOO_LONG),
])
def test_a_context_length_refusal_is_not_retried_and_says_so(exc, message):
    assert classify_error(exc) == (
        False, None, f"the request does not fit the model's context (HTTP 400): {message}")


@pytest.mark.parametrize("exc", [
    sdk_error_with(500, {"message": VLLM_TOO_LONG}),           # a server error: retried as one
    sdk_error_with(400, {"message": "temperature must be at most 2", "type": "invalid_request_error"}),
])
def test_other_errors_are_not_context_length_refusals(exc):
    from cupid.utils.models.retry import context_length_message

    assert context_length_message(exc) is None


def test_context_length_words_found_outside_a_json_body():
    from cupid.utils.models.retry import context_length_message

    assert context_length_message(Raised(status=400, body="maximum context length is 2048")) is None
    assert context_length_message(ValueError("exceeds the available context size (2048 tokens)")) == \
        "exceeds the available context size (2048 tokens)"
