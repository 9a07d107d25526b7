"""The registry (decorator, discovery, name resolution), user models that implement only
``__call__``, fail-fast ``check()`` errors, and import hygiene of utils.models."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from cupid import config
from cupid.utils.models import registry
from cupid.utils.models.anthropic_models import AnthropicModel
from cupid.utils.models.google_models import GoogleModel
from cupid.utils.models.call_errors import ModelCallFailed, ModelConfigurationError, UnknownModelError
from cupid.utils.models.model import Model
from cupid.utils.models.registry import (
    register_model,
    registered_models,
    resolve_model,
)
from cupid.utils.models.openai_models import OpenAIModel
from cupid.utils.models.vllm_models import PrefMatcherModel, VLLMModel
from cupid.utils.models.together_models import TogetherModel


@pytest.fixture
def scratch_registry():
    """Registrations made by a test vanish after it."""
    registry.discover_models()
    saved = dict(registry._REGISTRY)
    yield registry._REGISTRY
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)


# ---------------------------------------------------------------------------------------
# Discovery and resolution
# ---------------------------------------------------------------------------------------
def test_discovery_finds_every_adapter():
    registry.discover_models()
    assert {"openai", "anthropic", "together", "google", "vllm", "local-server"} <= set(registry._PROVIDERS)
    assert registered_models()[config.PREFMATCHER_MODEL] is PrefMatcherModel


@pytest.mark.parametrize("spec, cls, name", [
    ("gpt-4o-2024-11-20", OpenAIModel, "gpt-4o-2024-11-20"),
    ("gpt-4.1-nano-2025-04-14", OpenAIModel, "gpt-4.1-nano-2025-04-14"),
    ("o1-mini", OpenAIModel, "o1-mini"),
    ("o3-mini-2025-01-31", OpenAIModel, "o3-mini-2025-01-31"),
    ("o4-mini", OpenAIModel, "o4-mini"),
    ("claude-3-5-sonnet-20241022", AnthropicModel, "claude-3-5-sonnet-20241022"),
    ("gemini-2.0-flash", GoogleModel, "gemini-2.0-flash"),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", TogetherModel,
     "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"),
    ("openai:my-finetune", OpenAIModel, "my-finetune"),
    ("anthropic:claude-custom", AnthropicModel, "claude-custom"),
    ("together:Qwen/Qwen2.5-72B-Instruct-Turbo", TogetherModel, "Qwen/Qwen2.5-72B-Instruct-Turbo"),
    ("google:gemini-exp", GoogleModel, "gemini-exp"),
    ("vllm:Qwen/Qwen2.5-7B-Instruct", VLLMModel, "Qwen/Qwen2.5-7B-Instruct"),
    ("local-server:llama", VLLMModel, "llama"),
    # The original README's synthesis command names a Bedrock id.
    ("anthropic.claude-3-5-sonnet-20241022-v2:0", AnthropicModel, "claude-3-5-sonnet-20241022"),
    ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", AnthropicModel, "claude-3-7-sonnet-20250219"),
    (config.PREFMATCHER_MODEL, PrefMatcherModel, config.PREFMATCHER_MODEL),
])
def test_name_resolution(spec, cls, name):
    model = resolve_model(spec)
    assert type(model) is cls
    assert model.name == name


def test_prefix_beats_guess_and_registered_beats_guess():
    # "org/name" would be guessed as Together; the prefix and the registry win.
    assert type(resolve_model(f"vllm:{config.PREFMATCHER_MODEL}")) is VLLMModel
    assert type(resolve_model(config.PREFMATCHER_MODEL)) is PrefMatcherModel
    # An unknown prefix is part of the name, not a provider.
    with pytest.raises(UnknownModelError):
        resolve_model("nosuchprovider:model")
    # Only Claude ids of Bedrock's shape are translated.
    with pytest.raises(UnknownModelError):
        resolve_model("anthropic.titan-text-v1:0")


def test_role_parameters_and_overrides():
    evaluator = resolve_model("gpt-4o", role="evaluator")
    assert (evaluator.temperature, evaluator.max_tokens) == (0, 8192)
    assert (evaluator.system_role, evaluator.max_tokens_field) == ("developer", "max_completion_tokens")
    evaluated = resolve_model("gpt-4o", role="evaluated")
    assert (evaluated.system_role, evaluated.max_tokens_field) == ("system", "max_tokens")
    synthesizer = resolve_model("gpt-4o", role="synthesizer", max_tokens=100, timeout=7, max_retries=1)
    assert (synthesizer.temperature, synthesizer.max_tokens) == (0.7, 100)
    assert (synthesizer.timeout, synthesizer.max_retries) == (7, 1)
    assert resolve_model("gpt-4o").timeout == config.REQUEST_TIMEOUT


def test_unknown_name_is_a_clear_configuration_error():
    with pytest.raises(UnknownModelError) as info:
        resolve_model("my-mystery-model")
    message = str(info.value)
    assert "my-mystery-model" in message
    assert config.PREFMATCHER_MODEL in message  # lists what is registered
    assert "openai:" in message and "vllm:" in message  # and how to name hosted models
    assert isinstance(info.value, ModelConfigurationError)


# ---------------------------------------------------------------------------------------
# The decorator and user models
# ---------------------------------------------------------------------------------------
def test_register_model_decorator(scratch_registry):
    @register_model
    class EchoModel(Model):
        model_name = "echo-test-model"

        def __call__(self, system_prompt, user_prompt):
            return f"[{system_prompt}] {user_prompt}"

    model = resolve_model("echo-test-model", role="evaluator")
    assert isinstance(model, EchoModel) and model.name == "echo-test-model"
    assert model.max_tokens == 8192
    assert model.chat("sys", [{"role": "user", "content": "hi"}]) == "[sys] hi"

    with pytest.raises(ValueError, match="registered twice"):
        register_model(type("EchoModel2", (Model,), {"model_name": "echo-test-model"}))
    with pytest.raises(TypeError, match="model_name"):
        register_model(type("Nameless", (Model,), {}))
    with pytest.raises(TypeError):
        register_model(type("NotAModel", (), {"model_name": "x"}))


def test_user_call_only_model_gets_retries_and_accounting(scratch_registry):
    sleeps: list[float] = []

    class FlakyModel(Model):
        model_name = "flaky-user-model"

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.seen: list[tuple[str, str]] = []

        def __call__(self, system_prompt, user_prompt):
            self.seen.append((system_prompt, user_prompt))
            if len(self.seen) <= 2:
                raise ConnectionError("dropped")
            return "third time lucky"

    register_model(FlakyModel)
    model = resolve_model("flaky-user-model", sleep=sleeps.append)
    conversation = [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"},
                    {"role": "user", "content": "Q2"}]

    completion = model.generate("system", conversation)

    assert completion.text == "third time lucky"
    assert len(sleeps) == 2
    assert model.seen[-1] == ("system", "User: Q1\n\nAI Assistant: A1\n\nUser: Q2")
    snap = model.usage.snapshot()
    assert (snap["calls"], snap["attempts"], snap["retries"]) == (1, 3, 2)


def test_user_model_bug_fails_at_once():
    class BuggyModel(Model):
        def __call__(self, system_prompt, user_prompt):
            raise KeyError("missing field")

    model = BuggyModel(sleep=lambda s: None)
    with pytest.raises(ModelCallFailed) as info:
        model.chat("", [{"role": "user", "content": "q"}])
    assert info.value.attempts == 1 and "KeyError" in info.value.reason


def test_model_without_call_or_complete_is_rejected():
    with pytest.raises(ModelCallFailed, match="must implement"):
        Model(sleep=lambda s: None).chat("", [{"role": "user", "content": "q"}])


# ---------------------------------------------------------------------------------------
# check(): one clear error before any work
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, variable", [
    ("gpt-4o", "OPENAI_API_KEY"),
    ("o3-mini", "OPENAI_API_KEY"),
    ("claude-3-5-sonnet-20241022", "ANTHROPIC_API_KEY"),
    ("meta-llama/Llama-3-8b", "TOGETHER_API_KEY"),
    ("gemini-2.0-flash", "GOOGLE_API_KEY"),
])
def test_check_names_the_missing_variable(spec, variable):
    model = resolve_model(spec)
    with pytest.raises(ModelConfigurationError, match=variable):
        model.check()
    # A call without the key fails at once with the same reason, without retrying.
    model.max_retries = 3
    model._sleep = lambda s: pytest.fail("a missing key must not be retried")
    with pytest.raises(ModelCallFailed, match=variable) as info:
        model.chat("", [{"role": "user", "content": "q"}])
    assert info.value.attempts == 1


@pytest.mark.parametrize("spec, variable", [
    ("gpt-4o", "OPENAI_API_KEY"),
    ("claude-3-5-sonnet-20241022", "ANTHROPIC_API_KEY"),
    ("meta-llama/Llama-3-8b", "TOGETHER_API_KEY"),
    ("gemini-2.0-flash", "GOOGLE_API_KEY"),
])
def test_check_passes_with_key(spec, variable, monkeypatch, fake_llm_env):
    monkeypatch.setenv(variable, "set")
    model = resolve_model(spec)
    model.check()
    # check() reads the key and sends nothing; probe() sends one models-list request.
    assert fake_llm_env.model_list_requests == [] and fake_llm_env.requests == []
    model.probe()
    (probe,) = fake_llm_env.model_list_requests
    assert probe["path"].endswith("/models") and fake_llm_env.requests == []


def test_google_vertex_check(monkeypatch):
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    model = GoogleModel("gemini-2.0-flash")
    assert model.uses_vertex() and model.resolved_location() == "us-central1"
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    assert model.resolved_location() == "europe-west4"

    def no_credentials(*args, **kwargs):
        raise DefaultCredentialsError("none")

    monkeypatch.setattr(google.auth, "default", no_credentials)
    with pytest.raises(ModelConfigurationError, match="GOOGLE_CLOUD_PROJECT") as info:
        model.check()
    assert "application-default" in str(info.value)
    monkeypatch.setattr(google.auth, "default", lambda *a, **k: (object(), "my-project"))
    model.check()


# ---------------------------------------------------------------------------------------
# Import hygiene
# ---------------------------------------------------------------------------------------
def test_importing_the_model_layer_imports_no_sdk_reads_no_key_opens_no_socket():
    """In a fresh interpreter: discover every module of utils/models with keys set,
    recording environment reads and refusing any socket connection."""
    script = textwrap.dedent("""
        import json, os, socket, sys
        reads = []
        original = os._Environ.__getitem__
        def spy(self, key):
            reads.append(key)
            return original(self, key)
        os._Environ.__getitem__ = spy
        def refuse(*args, **kwargs):
            raise AssertionError("a socket was opened at import")
        socket.socket.connect = refuse
        socket.create_connection = refuse

        from cupid.utils.models import registry
        registry.discover_models()
        import cupid.utils.models.openai_models, cupid.utils.models.anthropic_models
        import cupid.utils.models.together_models, cupid.utils.models.google_models
        sdks = [name for name in ("openai", "anthropic", "together", "google.genai", "httpx",
                                  "httpx2", "google.auth") if name in sys.modules]
        print(json.dumps({"sdks": sdks, "reads": reads,
                          "providers": sorted(registry._PROVIDERS)}))
    """)
    env = {"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk-secret", "ANTHROPIC_API_KEY": "secret",
           "TOGETHER_API_KEY": "secret", "GOOGLE_API_KEY": "secret",
           "PYTHONPATH": str(config.ROOT)}
    result = subprocess.run([sys.executable, "-c", script], cwd=config.ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["sdks"] == []
    assert {"openai", "anthropic", "together", "google", "vllm"} <= set(report["providers"])
    # _PYTHON_* are the interpreter's own settings (sysconfig reads _PYTHON_PROJECT_BASE when
    # an extension such as orjson imports zoneinfo), not a provider's.
    secret_reads = [name for name in report["reads"]
                    if not name.startswith(("CUPID_", "_PYTHON_"))
                    and any(word in name for word in ("KEY", "TOKEN", "SECRET", "BASE_URL", "PROJECT"))]
    assert secret_reads == []


def test_the_extension_point_is_the_model_layer_package():
    """``from cupid.utils.models import Model, register_model`` is the very module of
    utils/models/model.py, so a model registered through it is in the registry in use."""
    from cupid.utils.models import Model, register_model
    import cupid.utils.models.model as shared

    assert Model is shared.Model and register_model is shared.register_model