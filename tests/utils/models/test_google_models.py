"""The Google (google-genai) adapter: request building and response parsing without the
network, error mapping, and one round trip through the real SDK against the fake server."""
from __future__ import annotations

import pytest

from cupid.utils.models.google_models import GoogleModel, build_request, map_error, parse_response
from cupid.utils.models.call_errors import ModelCallFailed, PermanentModelError, TransientModelError
from cupid.utils.models.registry import resolve_model
from cupid.utils.models.request import Request
from cupid.utils.models.retry import classify_error
from fake_llm_server import FakeLLMServer, FakeResponse


def make_request(**overrides) -> Request:
    fields = dict(system_prompt="Be brief.",
                  messages=({"role": "user", "content": "Q1"},
                            {"role": "assistant", "content": "A1"},
                            {"role": "user", "content": "Q2"}),
                  temperature=0.0, max_tokens=256, timeout=12.5)
    fields.update(overrides)
    return Request(**fields)


def test_build_request():
    kwargs = build_request(make_request(), "gemini-2.0-flash")
    assert kwargs["model"] == "gemini-2.0-flash"
    assert kwargs["contents"] == [
        {"role": "user", "parts": [{"text": "Q1"}]},
        {"role": "model", "parts": [{"text": "A1"}]},
        {"role": "user", "parts": [{"text": "Q2"}]},
    ]
    cfg = kwargs["config"]
    assert cfg["system_instruction"] == "Be brief."
    assert cfg["temperature"] == 0.0 and cfg["max_output_tokens"] == 256
    assert cfg["http_options"] == {"timeout": 12500, "retry_options": {"attempts": 1}}


def test_build_request_omits_what_is_not_given():
    cfg = build_request(make_request(system_prompt="", temperature=None, max_tokens=None,
                                     timeout=None, json_schema={"type": "object"}), "g")["config"]
    assert cfg == {}


def test_build_request_is_accepted_by_the_sdk_types():
    from google.genai import types

    cfg = types.GenerateContentConfig(**build_request(make_request(), "g")["config"])
    assert cfg.http_options.timeout == 12500 and cfg.http_options.retry_options.attempts == 1
    assert cfg.max_output_tokens == 256


def test_parse_response_from_sdk_objects():
    from google.genai import types

    response = types.GenerateContentResponse(
        candidates=[types.Candidate(content=types.Content(role="model", parts=[
            types.Part(text="private reasoning", thought=True),
            types.Part(text="Hello "),
            types.Part(text="world"),
        ]))],
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=11, candidates_token_count=2, thoughts_token_count=5),
    )
    completion = parse_response(response, "gemini-2.5-flash")
    assert completion.text == "Hello world"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (11, 7)
    assert completion.usage.reasoning_tokens == 5 and completion.ending != "length"


def test_parse_response_failures():
    from google.genai import types

    model = GoogleModel("gemini-2.5-flash")
    blocked = parse_response(types.GenerateContentResponse(
        candidates=[], prompt_feedback=types.GenerateContentResponsePromptFeedback(
            block_reason="SAFETY", block_reason_message="unsafe prompt"),
        usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=6357)))
    # A blocked prompt is an answer without text, its prompt tokens billed and counted.
    assert (model.ending(blocked), blocked.refusal, blocked.usage.prompt_tokens) == \
        ("blocked", "SAFETY: unsafe prompt", 6357)
    with pytest.raises(TransientModelError, match="without candidates"):
        parse_response(types.GenerateContentResponse())
    no_text = parse_response(types.GenerateContentResponse.model_validate(
        {"candidates": [{"content": {"parts": []}, "finish_reason": "STOP"}]}))
    assert model.ending(no_text) == "empty"
    # Cut at the limit before any text (the thinking used max_output_tokens): the same
    # request would be cut again, so it is an empty answer that ended "length", not a retry.
    cut = parse_response(types.GenerateContentResponse.model_validate(
        {"candidates": [{"content": {"parts": []}, "finish_reason": "MAX_TOKENS"}]}))
    assert cut.text == "" and model.ending(cut) == "length"


def test_error_codes_reach_the_seam():
    from google.genai import errors

    def api_error(code, status):
        return errors.APIError(code, {"error": {"code": code, "message": "m", "status": status}})

    for code, status, retryable in [(429, "RESOURCE_EXHAUSTED", True), (503, "UNAVAILABLE", True),
                                    (500, "INTERNAL", True), (400, "INVALID_ARGUMENT", False),
                                    (403, "PERMISSION_DENIED", False), (404, "NOT_FOUND", False)]:
        exc = api_error(code, status)
        assert map_error(exc) is exc
        assert classify_error(exc)[0] is retryable, (code, status)
    # A body without a numeric code is classified through its status name.
    no_code = errors.APIError(0, {"error": {"message": "m", "status": "RESOURCE_EXHAUSTED"}})
    assert isinstance(map_error(no_code), TransientModelError)
    bad = errors.APIError(0, {"error": {"message": "m", "status": "INVALID_ARGUMENT"}})
    assert isinstance(map_error(bad), PermanentModelError)


def test_google_through_its_sdk(fake_llm_env: FakeLLMServer):
    fake_llm_env.responder = lambda req: "gemini says " + req["messages"][-1]["content"]
    model = resolve_model("gemini-2.0-flash", role="evaluator")
    assert isinstance(model, GoogleModel)
    fake_llm_env.script(FakeResponse(status=429, headers={"Retry-After": "0"}),
                        FakeResponse(status=503))

    completion = model.generate("sys words", [{"role": "user", "content": "one"},
                                              {"role": "assistant", "content": "two"},
                                              {"role": "user", "content": "three"}])

    assert completion.text == "gemini says three"
    req = fake_llm_env.requests[-1]
    assert req["api"] == "google" and req["model"] == "gemini-2.0-flash"
    assert req["system"] == "sys words"
    assert [m["role"] for m in req["messages"]] == ["user", "assistant", "user"]
    assert req["body"]["generationConfig"] == {"temperature": 0, "maxOutputTokens": 8192}
    assert req["headers"]["x-goog-api-key"] == "test-google"
    snap = model.usage.snapshot()
    assert (snap["calls"], snap["retries"], snap["prompt_tokens"], snap["completion_tokens"]) == (1, 2, 5, 3)

    fake_llm_env.script(FakeResponse(status=400, text="bad request"))
    with pytest.raises(ModelCallFailed) as info:
        model.chat("", [{"role": "user", "content": "q"}])
    assert info.value.attempts == 1 and "HTTP 400" in info.value.reason


def test_google_timeout_through_its_sdk(fake_llm_env: FakeLLMServer):
    model = GoogleModel("gemini-2.0-flash", timeout=0.3, max_retries=1)
    fake_llm_env.script(FakeResponse(hang=True), "after the hang")
    assert model.chat("", [{"role": "user", "content": "q"}]) == "after the hang"
    assert model.usage.snapshot()["retries"] == 1


def test_a_key_given_in_code_is_redacted():
    from cupid.utils.redact import redact

    key = "AIzaFAKEcodeKey0123456789abcdef"
    GoogleModel("gemini-2.0-flash", api_key=key)
    assert key not in redact(f"400 API key not valid: {key}")

