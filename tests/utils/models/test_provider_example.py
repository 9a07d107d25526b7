"""The worked example of docs/architecture.md ("A provider"): the file it shows is a whole
provider, run here as it is written against the loopback server."""
from __future__ import annotations

import importlib.util
import re
import sys
import textwrap

import pytest

from cupid import config
from cupid.utils.models.model import PROVIDER_CLASSES
from cupid.utils.models.registry import guess_provider, resolve_model
from fake_llm_server import FakeLLMServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def example_source() -> str:
    doc = (config.ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    found = re.search(r"saved as `utils/models/openrouter_models\.py`.*?```python\n(.*?)```", doc, re.S)
    assert found, "docs/architecture.md no longer shows the example provider"
    return textwrap.dedent(found.group(1))


@pytest.fixture
def example_provider(tmp_path):
    path = tmp_path / "openrouter_models.py"
    path.write_text(example_source(), encoding="utf-8")
    # Loaded as the file it says it is, utils/models/openrouter_models.py: its imports are relative.
    spec = importlib.util.spec_from_file_location("cupid.utils.models.openrouter_models", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    try:
        yield module
    finally:
        PROVIDER_CLASSES.pop("openrouter", None)
        sys.modules.pop(spec.name, None)


def test_the_documented_provider_is_a_whole_provider(example_provider, fake_server: FakeLLMServer,
                                                     monkeypatch):
    assert len(example_source().strip().splitlines()) <= 20
    monkeypatch.delenv("OPENROUTER_BASE_URL", raising=False)
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-test-openrouter")
    model = resolve_model("openrouter:meta-llama/llama-3.1-8b-instruct", role="evaluated")
    assert type(model).__name__ == "OpenRouterModel"
    assert model.resolved_base_url() == "https://openrouter.ai/api/v1"
    # Its calls answer online in --batch, and a bare org/name stays Together's.
    assert model.batch_adapter() is None
    assert guess_provider("meta-llama/llama-3.1-8b-instruct") == "together"

    monkeypatch.setenv("OPENROUTER_BASE_URL", fake_server.openai_base_url)
    fake_server.responder = lambda req: "routed answer"
    completion = model.generate("system words", [{"role": "user", "content": "a b c"}])

    assert completion.text == "routed answer"
    request = fake_server.requests[-1]
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "meta-llama/llama-3.1-8b-instruct"
    assert request["body"]["messages"] == [{"role": "system", "content": "system words"},
                                           {"role": "user", "content": "a b c"}]
    assert request["body"]["max_tokens"] == config.ROLE_PARAMS["evaluated"]["max_tokens"]
    assert model.usage.snapshot()["calls"] == 1


def test_the_documented_provider_names_its_missing_key(example_provider, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    model = resolve_model("openrouter:some/model")
    with pytest.raises(Exception, match="OPENROUTER_API_KEY"):
        model.check()
