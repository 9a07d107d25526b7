"""The model layer through the real SDKs (openai, anthropic, together) against the loopback
fake server: answers, retries that succeed and give up, timeouts, malformed bodies, errors
that fail at once, usage accounting, many threads at once, provider-specific parameters."""
from __future__ import annotations

import json
import threading
import time

import pytest

from cupid import config
from cupid.utils.models.anthropic_models import AnthropicModel
from cupid.utils.models.cache import ResponseCache
from cupid.utils.models.call_errors import AuthenticationFailed, ModelCallFailed, ModelConfigurationError
from cupid.utils.models.registry import resolve_model
from cupid.utils.models.usage import estimate_cost
from cupid.utils.models.hosted import CLIENTS
from cupid.utils.models.openai_models import OpenAIModel
from cupid.utils.models.vllm_models import PrefMatcherModel, VLLMModel
from cupid.utils.models.together_models import TogetherModel
from fake_llm_server import FakeLLMServer, FakeResponse, count_tokens

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


class SleepRecorder:
    """Injected as Model(sleep=...): records the backoff delays instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def expected_prompt_tokens(system: str, messages: list[dict]) -> int:
    return count_tokens(system) + sum(count_tokens(m["content"]) for m in messages)


# ---------------------------------------------------------------------------------------
# OpenAI: answers and what reaches the server
# ---------------------------------------------------------------------------------------
def test_openai_answer_and_request(fake_llm_env: FakeLLMServer):
    fake_llm_env.responder = lambda req: f"You said: {req['messages'][-1]['content']}"
    model = resolve_model("gpt-4o-2024-11-20", role="evaluator")
    assert isinstance(model, OpenAIModel)
    conversation = [{"role": "user", "content": "first question"},
                    {"role": "assistant", "content": "first answer"},
                    {"role": "user", "content": "second question"}]

    completion = model.generate("You are terse.", conversation)

    assert completion.text == "You said: second question"
    (req,) = fake_llm_env.requests
    assert req["api"] == "openai" and req["path"] == "/v1/chat/completions"
    assert req["model"] == "gpt-4o-2024-11-20"
    assert req["system"] == "You are terse."
    assert req["messages"] == conversation
    # As the release's evaluator asks OpenAI models (utils/generation.py): a developer
    # message, max_completion_tokens, the integer temperature 0.
    assert req["body"]["messages"][0] == {"role": "developer", "content": "You are terse."}
    assert req["body"]["temperature"] == 0 and isinstance(req["body"]["temperature"], int)
    assert req["body"]["max_completion_tokens"] == config.ROLE_PARAMS["evaluator"]["max_tokens"] == 8192
    assert "max_tokens" not in req["body"]
    assert req["headers"]["authorization"] == "Bearer sk-test-openai"


def test_openai_evaluated_model_request_is_the_releases(fake_llm_env: FakeLLMServer):
    # The release's evaluated model class (utils/models/gpt_41_nano.py): a system
    # message, temperature 0, max_tokens 8192; the body byte for byte as its SDK call sends it.
    model = resolve_model("gpt-4.1-nano-2025-04-14", role="evaluated")
    model.generate("S", user("U"))
    assert fake_llm_env.requests[0]["body_bytes"] == (
        b'{"model":"gpt-4.1-nano-2025-04-14","messages":[{"role":"system","content":"S"},'
        b'{"role":"user","content":"U"}],"max_tokens":8192,"temperature":0}')
    with pytest.raises(ValueError, match="system_role"):
        OpenAIModel("gpt-4o", system_role="assistant")


def test_openai_without_system_prompt_sends_no_system_message(fake_llm_env: FakeLLMServer):
    model = OpenAIModel("gpt-4o-mini")
    assert model.chat("", user("hello")) == "OK"
    body = fake_llm_env.requests[0]["body"]
    assert [m["role"] for m in body["messages"]] == ["user"]


@pytest.mark.parametrize("name", ["o3-mini-2025-01-31", "o1-preview", "o4-mini"])
def test_openai_reasoning_models_take_no_temperature(fake_llm_env: FakeLLMServer, name: str):
    model = resolve_model(name, role="evaluator")
    assert model.chat("sys", user("q")) == "OK"
    body = fake_llm_env.requests[0]["body"]
    assert "temperature" not in body
    assert "max_tokens" not in body
    assert body["max_completion_tokens"] == config.ROLE_PARAMS["evaluator"]["max_tokens"]


def test_openai_ignores_json_schema(fake_llm_env: FakeLLMServer):
    model = OpenAIModel("gpt-4o")
    model.generate("sys", user("q"), json_schema={"type": "object"})
    assert "response_format" not in fake_llm_env.requests[0]["body"]


def test_hosted_and_server_adapters_send_no_answer_grammar(fake_llm_env: FakeLLMServer):
    # The layout grammar is for the embedded model only: the benchmark's models answer
    # unconstrained, as in the paper.
    from cupid.evaluation.steps.infer import LAYOUT
    OpenAIModel("gpt-4o").generate("sys", user("q"), layout=LAYOUT)
    body = fake_llm_env.requests[0]["body"]
    assert "Most Likely" not in json.dumps(body) and "grammar" not in json.dumps(body)


def test_answer_grammar_is_part_of_the_cache_key():
    from cupid.utils.models.request import Request
    plain = Request("sys", ({"role": "user", "content": "q"},))
    laid_out = Request("sys", ({"role": "user", "content": "q"},), answer_grammar="root ::= \"x\"")
    assert plain.cache_key("m") != laid_out.cache_key("m")


def test_usage_summed_per_model(fake_llm_env: FakeLLMServer):
    answers = {"alpha": "one two three", "beta": "four five", "gamma": "six"}
    fake_llm_env.responder = lambda req: answers[req["messages"][-1]["content"].split()[0]]
    evaluator = resolve_model("gpt-4o-2024-11-20", role="evaluator")
    other = resolve_model("gpt-4o-mini", role="evaluated")

    for word in ("alpha", "beta", "gamma"):
        evaluator.chat("system prompt here", user(f"{word} please answer"))
    other.chat("", user("beta only"))

    snap = evaluator.usage.snapshot(evaluator.name)
    assert snap["calls"] == 3 and snap["attempts"] == 3 and snap["retries"] == 0
    assert snap["prompt_tokens"] == 3 * (3 + 3)  # "system prompt here" + "WORD please answer"
    assert snap["completion_tokens"] == 3 + 2 + 1
    assert snap["estimated_cost_usd"] == estimate_cost("gpt-4o-2024-11-20", 18, 6) > 0
    assert snap["latency_median_s"] is not None and snap["latency_median_s"] > 0
    other_snap = other.usage.snapshot(other.name)
    assert (other_snap["calls"], other_snap["prompt_tokens"], other_snap["completion_tokens"]) == (1, 2, 2)


# ---------------------------------------------------------------------------------------
# Retries
# ---------------------------------------------------------------------------------------
def test_429_retry_after_is_honoured(fake_llm_env: FakeLLMServer, monkeypatch):
    monkeypatch.setattr(config, "RETRY_MAX_DELAY", 60.0)  # so that a 3 s Retry-After is not capped
    sleeps = SleepRecorder()
    model = OpenAIModel("gpt-4o", sleep=sleeps)
    fake_llm_env.script(FakeResponse(status=429, text="slow down", headers={"Retry-After": "3"}),
                        "finally")

    assert model.chat("", user("q")) == "finally"
    assert len(sleeps.delays) == 1 and sleeps.delays[0] >= 3.0
    snap = model.usage.snapshot()
    assert (snap["calls"], snap["attempts"], snap["retries"]) == (1, 2, 1)
    assert len(fake_llm_env.requests) == 2


def test_429_retry_after_ms_and_real_wait(fake_llm_env: FakeLLMServer, monkeypatch):
    monkeypatch.setattr(config, "RETRY_MAX_DELAY", 5.0)
    model = OpenAIModel("gpt-4o")  # real time.sleep
    fake_llm_env.script(FakeResponse(status=429, headers={"retry-after-ms": "300"}), "ok now")
    started = time.monotonic()
    assert model.chat("", user("q")) == "ok now"
    assert time.monotonic() - started >= 0.3


@pytest.mark.parametrize("status", [500, 502, 503, 529])
def test_server_error_then_success(fake_llm_env: FakeLLMServer, status: int):
    sleeps = SleepRecorder()
    model = OpenAIModel("gpt-4o", sleep=sleeps)
    fake_llm_env.script(FakeResponse(status=status), "recovered")
    assert model.chat("", user("q")) == "recovered"
    assert len(sleeps.delays) == 1
    assert model.usage.snapshot()["retries"] == 1


def test_backoff_grows_between_attempts(fake_llm_env: FakeLLMServer, monkeypatch):
    monkeypatch.setattr(config, "RETRY_BASE_DELAY", 1.0)
    monkeypatch.setattr(config, "RETRY_MAX_DELAY", 100.0)
    sleeps = SleepRecorder()
    model = OpenAIModel("gpt-4o", sleep=sleeps, max_retries=4)
    fake_llm_env.script(*[FakeResponse(status=503)] * 4, "done")
    assert model.chat("", user("q")) == "done"
    # Full jitter in [ceiling/2, ceiling] with ceiling 1, 2, 4, 8 s.
    for attempt, delay in enumerate(sleeps.delays):
        assert 0.5 * 2 ** attempt <= delay <= 2 ** attempt


def test_retries_give_up(fake_llm_env: FakeLLMServer):
    model = OpenAIModel("gpt-4o", max_retries=2, sleep=SleepRecorder())
    fake_llm_env.script(*[FakeResponse(status=503, text="overloaded")] * 3, "too late")
    with pytest.raises(ModelCallFailed) as info:
        model.chat("", user("q"))
    assert info.value.attempts == 3
    assert "HTTP 503" in info.value.reason and "after 3 attempts" in str(info.value)
    assert len(fake_llm_env.requests) == 3
    assert fake_llm_env.pending == 1
    snap = model.usage.snapshot()
    assert (snap["calls"], snap["failed_calls"], snap["attempts"]) == (0, 1, 3)


def test_timeout_retried_then_answered(fake_llm_env: FakeLLMServer):
    model = OpenAIModel("gpt-4o", timeout=0.3)
    fake_llm_env.script(FakeResponse(hang=True), "awake")
    started = time.monotonic()
    assert model.chat("", user("q")) == "awake"
    assert 0.3 <= time.monotonic() - started < 5
    assert model.usage.snapshot()["retries"] == 1


def test_timeouts_give_up(fake_llm_env: FakeLLMServer):
    import openai

    model = OpenAIModel("gpt-4o", timeout=0.2, max_retries=2)
    fake_llm_env.script(*[FakeResponse(hang=True)] * 3)
    started = time.monotonic()
    with pytest.raises(ModelCallFailed) as info:
        model.chat("", user("q"))
    assert time.monotonic() - started < 5  # the hung server did not stall the call
    assert info.value.attempts == 3
    assert isinstance(info.value.__cause__, openai.APITimeoutError)


def test_slow_answer_within_timeout_is_not_retried(fake_llm_env: FakeLLMServer):
    model = OpenAIModel("gpt-4o", timeout=5)
    fake_llm_env.script(FakeResponse(text="slow but fine", delay=0.3))
    assert model.chat("", user("q")) == "slow but fine"
    assert model.usage.snapshot()["attempts"] == 1


def test_connection_refused_is_retried_then_fails(monkeypatch):
    with FakeLLMServer() as server:
        dead_url = server.openai_base_url
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = OpenAIModel("gpt-4o", base_url=dead_url, max_retries=2)
    with pytest.raises(ModelCallFailed) as info:
        model.chat("", user("q"))
    assert info.value.attempts == 3
    assert "Connection" in type(info.value.__cause__).__name__


@pytest.mark.parametrize("malformed", [
    FakeResponse(raw_body=b"{not json at all"),
    FakeResponse(raw_body=b"<html>502 Bad Gateway</html>"),
    FakeResponse(raw_body=b'{"object": "chat.completion"}'),  # JSON without choices
])
def test_malformed_answer_is_retried(fake_llm_env: FakeLLMServer, malformed: FakeResponse):
    model = OpenAIModel("gpt-4o")
    fake_llm_env.script(malformed, "well formed")
    assert model.chat("", user("q")) == "well formed"
    snap = model.usage.snapshot()
    assert (snap["attempts"], snap["retries"], snap["calls"]) == (2, 1, 1)


@pytest.mark.parametrize("status, message", [
    (400, "This model's maximum context length is 128000 tokens"),
    (401, "Incorrect API key provided"),
    (403, "Project does not have access"),
    (404, "The model `gpt-9` does not exist"),
    (422, "Unprocessable"),
])
def test_client_errors_fail_at_once(fake_llm_env: FakeLLMServer, status: int, message: str):
    sleeps = SleepRecorder()
    model = OpenAIModel("gpt-4o", sleep=sleeps)
    fake_llm_env.script(FakeResponse(status=status, text=message), "never reached")
    if status in (401, 403):
        # A refused key: every call would fail alike, so it is a setup error that stops a run.
        with pytest.raises(AuthenticationFailed) as auth:
            model.chat("", user("q"))
        assert f"HTTP {status}" in str(auth.value) and message in str(auth.value)
    else:
        with pytest.raises(ModelCallFailed) as info:
            model.chat("", user("q"))
        assert info.value.attempts == 1
        assert f"HTTP {status}" in info.value.reason and message in info.value.reason
    assert sleeps.delays == []
    assert len(fake_llm_env.requests) == 1


# ---------------------------------------------------------------------------------------
# Concurrency
# ---------------------------------------------------------------------------------------
def test_many_threads_at_once(fake_llm_env: FakeLLMServer):
    fake_llm_env.latency = 0.005
    fake_llm_env.responder = lambda req: "answer to " + req["messages"][-1]["content"]
    model = resolve_model("gpt-4o-2024-11-20", role="evaluator")
    n_threads, per_thread = 32, 4
    errors: list[BaseException] = []
    wrong: list[tuple[str, str]] = []
    start = threading.Barrier(n_threads)

    def work(t: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                prompt = f"thread {t} call {i}"
                text = model.chat("shared system", user(prompt))
                if text != "answer to " + prompt:
                    wrong.append((prompt, text))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == [] and wrong == []
    total = n_threads * per_thread
    snap = model.usage.snapshot()
    assert snap["calls"] == total and snap["attempts"] == total
    assert len(fake_llm_env.requests) == total
    # 2 system words + 4 prompt words in; "answer to thread T call I" = 6 words out.
    assert snap["prompt_tokens"] == total * 6
    assert snap["completion_tokens"] == total * 6
    assert len(CLIENTS) == 1  # one client shared by all threads


def test_many_threads_with_transient_failures(fake_llm_env: FakeLLMServer):
    """Every third request fails with 429 or 500; every call still ends answered once."""
    counter = {"n": 0}
    lock = threading.Lock()

    def responder(req: dict):
        with lock:
            counter["n"] += 1
            n = counter["n"]
        if n % 3 == 0:
            return FakeResponse(status=429 if n % 2 else 500, headers={"Retry-After": "0"})
        return "ok " + req["messages"][-1]["content"]

    fake_llm_env.responder = responder
    model = OpenAIModel("gpt-4o", max_retries=8)
    results: dict[int, str] = {}

    def work(i: int) -> None:
        results[i] = model.chat("", user(f"n{i}"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(48)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == {i: f"ok n{i}" for i in range(48)}
    snap = model.usage.snapshot()
    assert snap["calls"] == 48 and snap["failed_calls"] == 0
    assert snap["attempts"] == len(fake_llm_env.requests) == 48 + snap["retries"]
    assert snap["retries"] > 0


def test_client_made_once_per_class_url_and_key(fake_llm_env: FakeLLMServer, monkeypatch):
    a, b = OpenAIModel("gpt-4o"), OpenAIModel("gpt-4o-mini")
    clients: list = []
    barrier = threading.Barrier(16)

    def grab() -> None:
        barrier.wait()
        clients.append(a.client())

    threads = [threading.Thread(target=grab) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(c) for c in clients}) == 1
    assert b.client() is a.client()
    assert OpenAIModel("gpt-4o", api_key="another-key").client() is not a.client()
    assert OpenAIModel("gpt-4o", base_url="http://127.0.0.1:1/v1").client() is not a.client()


def test_response_cache_replays_without_calling(fake_llm_env: FakeLLMServer, tmp_path):
    cache = ResponseCache(tmp_path / ".llm_cache")
    model = OpenAIModel("gpt-4o", cache=cache)
    fake_llm_env.script("first answer", "second answer")
    assert model.chat("s", user("q")) == "first answer"
    assert model.chat("s", user("q")) == "first answer"
    assert model.chat("s", user("q"), variant=1) == "second answer"
    assert len(fake_llm_env.requests) == 2
    assert model.usage.snapshot()["cache_hits"] == 1
    cache.close()


# ---------------------------------------------------------------------------------------
# Anthropic
# ---------------------------------------------------------------------------------------
def test_anthropic_answer_and_request(fake_llm_env: FakeLLMServer):
    fake_llm_env.responder = lambda req: "Claude says hi"
    model = resolve_model("claude-3-5-sonnet-20241022", role="evaluated")
    assert isinstance(model, AnthropicModel)
    conversation = [{"role": "user", "content": "hello there"},
                    {"role": "assistant", "content": "hi"},
                    {"role": "user", "content": "how are you"}]

    completion = model.generate("Be kind.", conversation)

    assert completion.text == "Claude says hi"
    (req,) = fake_llm_env.requests
    assert req["api"] == "anthropic" and req["path"] == "/v1/messages"
    assert req["body"]["system"] == "Be kind."
    assert req["body"]["messages"] == conversation
    assert req["body"]["max_tokens"] == config.ROLE_PARAMS["evaluated"]["max_tokens"]
    assert req["body"]["temperature"] == 0.0
    assert "thinking" not in req["body"]
    # SDK 2.x dropped `temperature`; it is sent under the API version that accepts it.
    assert req["headers"]["anthropic-version"] == AnthropicModel.legacy_api_version
    assert "sk-test-anthropic" in (req["headers"].get("authorization", "")
                                   + req["headers"].get("x-api-key", ""))
    assert completion.usage.prompt_tokens == expected_prompt_tokens("Be kind.", conversation)
    assert completion.usage.completion_tokens == 3


def test_anthropic_claude_37_uses_paper_settings(fake_llm_env: FakeLLMServer):
    fake_llm_env.responder = lambda req: "final answer only"
    model = resolve_model("claude-3-7-sonnet-20250219", role="evaluated")

    completion = model.generate("sys", user("think about it"))

    body = fake_llm_env.requests[0]["body"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["temperature"] == 1
    assert body["max_tokens"] == config.ROLE_PARAMS["evaluated"]["max_tokens"] == 8192
    # The server answered a thinking block then a text block: only the text is returned.
    assert completion.text == "final answer only"


def test_anthropic_thinking_budget_fits_under_max_tokens(fake_llm_env: FakeLLMServer):
    model = AnthropicModel("claude-3-7-sonnet-20250219", max_tokens=512)
    model.chat("", user("q"))
    assert fake_llm_env.requests[0]["body"]["max_tokens"] == 512 + 1024


def test_anthropic_defaults_without_temperature_or_max_tokens(fake_llm_env: FakeLLMServer):
    model = AnthropicModel("claude-sonnet-4-5", temperature=None, max_tokens=None)
    assert model.chat("", user("q")) == "OK"
    req = fake_llm_env.requests[0]
    assert req["body"]["max_tokens"] == 4096
    assert "temperature" not in req["body"] and "system" not in req["body"]
    # No temperature: the SDK's own API version, not the legacy one we force for temperature
    # (before anthropic 2.x the SDK's default was that legacy version itself).
    import anthropic

    sdk_default = anthropic.Anthropic(api_key="k").default_headers["anthropic-version"]
    assert req["headers"]["anthropic-version"] == sdk_default
    if int(anthropic.__version__.split(".")[0]) >= 2:
        assert sdk_default != AnthropicModel.legacy_api_version


def test_anthropic_retries_and_errors(fake_llm_env: FakeLLMServer, monkeypatch):
    monkeypatch.setattr(config, "RETRY_MAX_DELAY", 60.0)
    sleeps = SleepRecorder()
    model = AnthropicModel("claude-3-5-sonnet-20241022", sleep=sleeps)
    fake_llm_env.script(FakeResponse(status=429, headers={"retry-after": "2"}),
                        FakeResponse(status=529, text="Overloaded"),
                        FakeResponse(raw_body=b"not json"),
                        "at last")
    assert model.chat("", user("q")) == "at last"
    assert len(sleeps.delays) == 3 and sleeps.delays[0] >= 2.0

    fake_llm_env.script(FakeResponse(status=400, text="prompt is too long: 250000 tokens > 200000"))
    with pytest.raises(ModelCallFailed) as info:
        model.chat("", user("q"))
    assert info.value.attempts == 1 and "prompt is too long" in info.value.reason


def test_anthropic_timeout_gives_up(fake_llm_env: FakeLLMServer):
    import anthropic

    model = AnthropicModel("claude-3-5-sonnet-20241022", timeout=0.2, max_retries=1)
    fake_llm_env.script(FakeResponse(hang=True), FakeResponse(hang=True))
    with pytest.raises(ModelCallFailed) as info:
        model.chat("", user("q"))
    assert info.value.attempts == 2
    assert isinstance(info.value.__cause__, anthropic.APITimeoutError)


def test_anthropic_many_threads(fake_llm_env: FakeLLMServer):
    fake_llm_env.responder = lambda req: "re " + req["messages"][-1]["content"]
    model = AnthropicModel("claude-3-5-sonnet-20241022")
    results: dict[int, str] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, model.chat("s", user(f"m{i}"))))
               for i in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == {i: f"re m{i}" for i in range(32)}
    snap = model.usage.snapshot()
    assert (snap["calls"], snap["prompt_tokens"], snap["completion_tokens"]) == (32, 64, 64)


# ---------------------------------------------------------------------------------------
# Together
# ---------------------------------------------------------------------------------------
def test_together_through_its_sdk(fake_llm_env: FakeLLMServer):
    fake_llm_env.responder = lambda req: "llama answer here"
    model = resolve_model("meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo", role="evaluated")
    assert isinstance(model, TogetherModel)
    fake_llm_env.script(FakeResponse(status=429, headers={"Retry-After": "0"}),
                        FakeResponse(status=503))

    completion = model.generate("system words", user("a b c"))

    assert completion.text == "llama answer here"
    req = fake_llm_env.requests[-1]
    assert req["path"] == "/v1/chat/completions"
    assert req["model"] == "meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo"
    assert req["system"] == "system words"
    assert req["body"]["temperature"] == 0 and req["body"]["max_tokens"] == 8192
    assert req["body"]["messages"][0]["role"] == "system"
    assert req["headers"]["authorization"] == "Bearer test-together"
    snap = model.usage.snapshot(model.name)
    assert (snap["calls"], snap["retries"], snap["prompt_tokens"], snap["completion_tokens"]) == (1, 2, 5, 3)
    assert snap["estimated_cost_usd"] == estimate_cost(model.name, 5, 3)


def test_together_errors(fake_llm_env: FakeLLMServer):
    model = TogetherModel("org/model", timeout=0.2, max_retries=1)
    fake_llm_env.script(FakeResponse(status=404, text="model not found"))
    with pytest.raises(ModelCallFailed) as info:
        model.chat("", user("q"))
    assert info.value.attempts == 1 and "HTTP 404" in info.value.reason
    fake_llm_env.script(FakeResponse(hang=True), FakeResponse(raw_body=b"{oops"))
    with pytest.raises(ModelCallFailed) as info:
        model.chat("", user("q"))
    assert info.value.attempts == 2 and "malformed" in info.value.reason


# ---------------------------------------------------------------------------------------
# OpenAI-compatible servers (vLLM) and PrefMatcher
# ---------------------------------------------------------------------------------------
def test_vllm_name_at_url_and_guided_decoding(fake_server: FakeLLMServer):
    model = resolve_model(f"vllm:kixlab/prefmatcher-7b@{fake_server.openai_base_url}", role="matcher")
    assert isinstance(model, VLLMModel)
    assert model.name == "kixlab/prefmatcher-7b"
    assert model.resolved_base_url() == fake_server.openai_base_url
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    fake_server.script('{"score": 3}')

    assert model.generate("sys", user("match"), json_schema=schema).text == '{"score": 3}'

    body = fake_server.requests[0]["body"]
    assert body["model"] == "kixlab/prefmatcher-7b"
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "response", "schema": schema}}
    assert body["temperature"] == 0 and body["max_tokens"] == 8192
    assert body["messages"][0]["role"] == "system"
    assert fake_server.requests[0]["headers"]["authorization"] == f"Bearer {config.LOCAL_SERVER_API_KEY}"
    model.check()  # the server is up: no error


def test_local_server_prefix_uses_configured_url(fake_server: FakeLLMServer, monkeypatch):
    monkeypatch.setattr(config, "LOCAL_SERVER_BASE_URL", fake_server.openai_base_url + "/")
    model = resolve_model("local-server:my-model")
    assert isinstance(model, VLLMModel)
    model.check()
    assert model.chat("", user("q")) == "OK"
    assert fake_server.requests[0]["model"] == "my-model"
    assert "response_format" not in fake_server.requests[0]["body"]


def test_vllm_check_names_unreachable_url():
    with FakeLLMServer() as server:
        dead_url = server.openai_base_url
    model = VLLMModel(f"served-model@{dead_url}")
    with pytest.raises(ModelConfigurationError) as info:
        model.check()
    assert f"{dead_url}/models" in str(info.value)
    assert "CUPID_LOCAL_SERVER_URL" in str(info.value)


def test_prefmatcher_model(fake_server: FakeLLMServer, monkeypatch):
    monkeypatch.setattr(config, "PREFMATCHER_BASE_URL", fake_server.openai_base_url)
    model = resolve_model(config.PREFMATCHER_MODEL, role="matcher")
    assert isinstance(model, PrefMatcherModel) and model.name == config.PREFMATCHER_MODEL
    model.check()
    assert model.chat("", user("q")) == "OK"
    assert fake_server.requests[0]["model"] == config.PREFMATCHER_MODEL

    assert (model.temperature, model.max_tokens) == (0, 8192)
    # An evaluator role's OpenAI options do not reach a served model.
    served = resolve_model(config.PREFMATCHER_MODEL, role="evaluator")
    assert (served.system_role, served.max_tokens_field) == ("system", "max_tokens")

    with FakeLLMServer() as other:
        dead_url = other.openai_base_url
    monkeypatch.setattr(config, "PREFMATCHER_BASE_URL", dead_url)
    with pytest.raises(ModelConfigurationError, match="CUPID_PREFMATCHER_URL") as info:
        resolve_model(config.PREFMATCHER_MODEL, role="matcher").check()
    assert dead_url in str(info.value)
