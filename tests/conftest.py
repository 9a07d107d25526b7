"""Shared fixtures. Tests never reach the internet and never need a real API key.

* An autouse fixture makes retries fast (tiny backoff delays), removes every provider's key
  and base-URL variable from the environment, and drops the cached SDK clients and rate
  limiters after each test.
* ``fake_server``: a started tests/support/fake_llm_server.FakeLLMServer, stopped after the test.
* ``fake_llm_env``: ``fake_server`` plus fake keys, with OPENAI_BASE_URL, ANTHROPIC_BASE_URL,
  TOGETHER_BASE_URL and GOOGLE_GEMINI_BASE_URL pointing at it, so that
  ``resolve_model("gpt-4o")`` etc. talk to the fake server through the real SDKs.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

# This checkout's code before an installed copy; then the shared fakes and fixtures, imported
# by their own names (none is the name of a product module: tests/test_layout.py checks).
ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT / "tests" / "support", ROOT):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from cupid import config  # noqa: E402
from fake_llm_server import FakeLLMServer  # noqa: E402

# Every variable through which a real key, account or endpoint could leak into a test.
PROVIDER_ENV_VARS = (
    "OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
    "OPENAI_CUSTOM_HEADERS",
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE",
    "ANTHROPIC_CUSTOM_HEADERS",
    "TOGETHER_API_KEY", "TOGETHER_BASE_URL", "TOGETHER_PROJECT_ID", "TOGETHER_CUSTOM_HEADERS",
    "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_APPLICATION_CREDENTIALS",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a test that takes more than a few seconds")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, longest (``slow(minutes=N)``) first: with ``-n 2`` the workers then
    start on the long embedded-model runs together instead of one worker ending on one alone."""
    def minutes(item: pytest.Item) -> float:
        marker = item.get_closest_marker("slow")
        return -1.0 if marker is None else float(marker.kwargs.get("minutes", 0))

    items.sort(key=minutes, reverse=True)


@pytest.fixture(autouse=True)
def _isolated_model_layer(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(config, "RETRY_BASE_DELAY", 0.001)
    monkeypatch.setattr(config, "RETRY_MAX_DELAY", 0.01)
    for name in PROVIDER_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    # A command's main() run in-process attaches handlers to pytest's captured stderr of that
    # test; kept, they would write to a closed stream in every later test.
    loggers = [logging.getLogger(name) for name in ("", "cupid", "evaluation", "synthesis")]
    saved = [(logger, list(logger.handlers), logger.level) for logger in loggers]
    yield
    for logger, handlers, level in saved:
        logger.handlers[:] = handlers
        logger.setLevel(level)
    # Clients and limiters are keyed by base URL; the next test's server has another port.
    from cupid.utils.models.adaptations import ADAPTATIONS
    from model_state import reset_clients, reset_limiters
    from cupid.utils.models.retry import reset_cancel

    reset_clients()
    reset_limiters()
    reset_cancel()  # a test that stopped a run in-process must not stop the next one
    ADAPTATIONS.reset()  # what a run learned about a model's parameters


@pytest.fixture
def fake_server():
    server = FakeLLMServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_llm_env(fake_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.openai_base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_server.base_url)
    monkeypatch.setenv("TOGETHER_API_KEY", "test-together")
    monkeypatch.setenv("TOGETHER_BASE_URL", fake_server.base_url)
    monkeypatch.setenv("GOOGLE_API_KEY", "test-google")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake_server.base_url)
    return fake_server
