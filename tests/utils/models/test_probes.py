"""The preflight probe of every hosted provider, through its real SDK against the loopback
server: a listed model or a route the endpoint lacks (404) lets the run start; a refused key
or an endpoint nobody answers stops it before any work, naming what to fix."""
from __future__ import annotations

import socket
import time

import pytest

from fake_llm_server import FakeLLMServer, FakeResponse
from cupid.utils.models.call_errors import ModelCallFailed, ModelConfigurationError
from cupid.utils.models.registry import check_models, resolve_model
from cupid.utils.models.together_models import TogetherModel, api_root, together_sdk_base_url

SPECS = {
    "openai": "openai:gpt-4o-2024-11-20",
    "anthropic": "anthropic:claude-3-5-sonnet-20241022",
    "together": "together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
    "google": "google:gemini-2.0-flash",
}
KEY_ENVS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY",
            "together": "TOGETHER_API_KEY", "google": "GOOGLE_API_KEY"}


KEYS = {"openai": "sk-test-openai", "anthropic": "sk-test-anthropic", "together": "test-together",
        "google": "test-google"}  # as tests/conftest.py's fake_llm_env sets them


def assert_one_probe(server: FakeLLMServer, provider: str) -> None:
    """The probe was sent, once, to the models route with the configured key (in whichever
    header the provider's SDK puts it), and nothing was generated."""
    (probe,) = server.model_list_requests
    # google-genai names the Gemini API's version in the path: v1beta up to some releases
    # (the floor in pyproject.toml, which CI also tests), v1 after.
    routes = ("/v1/models", "/v1beta/models") if provider == "google" else ("/v1/models",)
    assert probe["path"] in routes
    assert any(value.endswith(KEYS[provider]) for value in probe["headers"].values())
    assert server.requests == []


@pytest.mark.parametrize("provider", sorted(SPECS))
def test_probe_passes_when_the_endpoint_lists_its_models(fake_llm_env, provider):
    fake_llm_env.models_bare_list = provider == "together"
    check_models([resolve_model(SPECS[provider])], probe=True)
    assert_one_probe(fake_llm_env, provider)


def test_without_probe_no_request_is_sent(fake_llm_env):
    check_models([resolve_model(spec) for spec in SPECS.values()], probe=False)
    assert fake_llm_env.model_list_requests == [] and fake_llm_env.requests == []


@pytest.mark.parametrize("provider", sorted(SPECS))
@pytest.mark.parametrize("status", [401, 403])
def test_probe_stops_on_a_refused_key(fake_llm_env, provider, status):
    fake_llm_env.models_status = status
    with pytest.raises(ModelConfigurationError) as info:
        check_models([resolve_model(SPECS[provider])], probe=True)
    message = str(info.value)
    assert f"HTTP {status}" in message and KEY_ENVS[provider] in message
    assert "refused" in message
    assert_one_probe(fake_llm_env, provider)  # a refused key is not asked again


@pytest.mark.parametrize("provider", sorted(SPECS))
def test_probe_passes_when_the_models_route_is_missing(fake_llm_env, provider):
    """A proxy that forwards chat calls but not the models route answers 404: up."""
    fake_llm_env.models_status = 404
    check_models([resolve_model(SPECS[provider])], probe=True)
    assert_one_probe(fake_llm_env, provider)


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("provider", sorted(SPECS))
def test_probe_stops_when_nothing_answers(fake_llm_env, monkeypatch, provider):
    url = _closed_port_url()
    env = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL",
           "together": "TOGETHER_BASE_URL", "google": "GOOGLE_GEMINI_BASE_URL"}[provider]
    monkeypatch.setenv(env, url + ("/v1" if provider == "openai" else ""))
    with pytest.raises(ModelConfigurationError) as info:
        check_models([resolve_model(SPECS[provider])], probe=True)
    assert "cannot reach" in str(info.value) and url.split("//")[1] in str(info.value)


# ---------------------------------------------------------------------------------------
# Together through the OpenAI-compatible path
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("given", ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/"])
def test_together_base_url_with_or_without_v1(given):
    assert api_root(given) == "http://h:1"
    assert api_root(None) == "https://api.together.xyz"
    assert together_sdk_base_url("http://h:1", "2.0.0") == "http://h:1/v1"
    assert together_sdk_base_url("http://h:1", "3.1.1") == "http://h:1"


@pytest.mark.parametrize("suffix", ["", "/v1"])
def test_together_posts_the_release_request_to_v1(fake_llm_env, monkeypatch, suffix):
    monkeypatch.setenv("TOGETHER_BASE_URL", fake_llm_env.base_url + suffix)
    fake_llm_env.responder = lambda req: "ok"
    model = resolve_model("together:org/model", role="evaluated")
    assert model.chat("sys", [{"role": "user", "content": "q"}]) == "ok"
    request = fake_llm_env.requests[-1]
    assert request["path"] == "/v1/chat/completions"
    # The release's body: model, messages, temperature, max_tokens, nothing else.
    assert set(request["body"]) == {"model", "messages", "temperature", "max_tokens"}


def test_together_timeout_is_enforced(fake_llm_env):
    """A hanging server ends each attempt at the request timeout."""
    model = TogetherModel("org/model", timeout=0.3, max_retries=1)
    fake_llm_env.script(FakeResponse(hang=True), FakeResponse(hang=True))
    started = time.monotonic()
    with pytest.raises(ModelCallFailed) as info:
        model.chat("", [{"role": "user", "content": "q"}])
    assert info.value.attempts == 2
    assert time.monotonic() - started < 10  # two 0.3 s timeouts plus backoff, not a hang
