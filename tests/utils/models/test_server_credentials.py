"""A served model behind a proxy that asks for HTTP basic auth: ``NAME@http://user:password@
host:port/v1`` (or CUPID_LOCAL_SERVER_URL with them). The user and password reach the chat
route (through the real openai SDK), the models list and vLLM's /tokenize as
``Authorization: Basic``, and no message shows the password. The loopback server answers 401
without them, as nginx's auth_basic does."""
from __future__ import annotations

import base64
import logging

import pytest

from cupid import config
from cupid.utils.models.call_errors import ModelConfigurationError
from cupid.utils.models.hosted import split_credentials
from cupid.utils.models.registry import check_models, resolve_model
from cupid.utils.models.vllm_models import split_name_and_url
from cupid.utils.redact import mask_url_passwords, redact
from fake_llm_server import FakeLLMServer

USER, PASSWORD = "alice", "pw:with@odd/chars"
ESCAPED = "pw%3Awith%40odd%2Fchars"  # as it is written in a URL
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


@pytest.fixture
def proxy():
    with FakeLLMServer(responder=lambda req: "fine") as server:
        server.serve_as_vllm({"m": 32768})
        server.basic_auth = (USER, PASSWORD)
        yield server


def url_with_credentials(server: FakeLLMServer, password: str = ESCAPED) -> str:
    return f"http://{USER}:{password}@127.0.0.1:{server.port}/v1"


def test_a_name_is_split_from_a_url_that_holds_a_password():
    assert split_name_and_url("m@http://u:p@h:1/v1") == ("m", "http://u:p@h:1/v1")
    assert split_name_and_url("org/m@v2@https://u:p@h/v1,https://u:q@g/v1") == (
        "org/m@v2", "https://u:p@h/v1,https://u:q@g/v1")
    assert split_name_and_url("m@h:1") == ("m@h:1", None)
    assert split_credentials(f"http://{USER}:{ESCAPED}@h:1/v1") == ("http://h:1/v1",
                                                                    {"Authorization": BASIC})
    assert split_credentials("http://h:1/v1") == ("http://h:1/v1", {})


def test_the_password_is_masked_wherever_a_url_is_written(monkeypatch):
    text = "at http://alice:s3cr@t@h:1/v1,https://bob:x@g/v1 or http://h:2/v1 (mail a@b.c)"
    assert mask_url_passwords(text) == ("at http://alice:***@h:1/v1,https://bob:***@g/v1 or "
                                        "http://h:2/v1 (mail a@b.c)")
    assert redact({"raw": [text]}) == {"raw": [mask_url_passwords(text)]}  # every file and line
    # A password given in an environment variable's URL is redacted alone too.
    monkeypatch.setenv("CUPID_LOCAL_SERVER_URL", "http://alice:long-secret-pw@h:1/v1")
    assert redact({"error": ["the proxy said long-secret-pw"]}) == {"error": ["the proxy said [redacted]"]}


def test_chat_models_list_and_tokenize_send_the_credentials(proxy):
    model = resolve_model(f"vllm:m@{url_with_credentials(proxy)}", role="matcher")
    assert model.name == "m" and model.endpoint() == proxy.openai_base_url
    check_models([model])
    assert model.max_model_len == 32768
    assert model.count_prompt_tokens("system words", "three user words") == 5
    assert model.generate("", [{"role": "user", "content": "hello"}]).text == "fine"
    assert proxy.unauthorized == 0 and proxy.tokenize_calls == 1
    assert [r["headers"]["authorization"] for r in proxy.model_list_requests] == [BASIC]
    assert [r["headers"]["authorization"] for r in proxy.requests] == [BASIC]


def test_the_environment_variables_url_sends_them(proxy, monkeypatch):
    monkeypatch.setattr(config, "LOCAL_SERVER_BASE_URL", url_with_credentials(proxy))
    model = resolve_model("local-server:m")
    check_models([model])
    assert model.generate("", [{"role": "user", "content": "hello"}]).text == "fine"
    assert proxy.unauthorized == 0 and proxy.requests[-1]["headers"]["authorization"] == BASIC


def test_wrong_credentials_stop_the_run_with_the_password_masked(proxy):
    model = resolve_model(f"vllm:m@{url_with_credentials(proxy, 'wrong-password')}")
    with pytest.raises(ModelConfigurationError) as refused:
        check_models([model])
    message = str(refused.value)
    assert "refused the user and password in its URL (HTTP basic auth, HTTP 401)" in message
    assert f"http://{USER}:***@127.0.0.1:{proxy.port}/v1/models" in message
    assert "wrong-password" not in message
    unauthenticated = resolve_model(f"vllm:m@{proxy.openai_base_url}")
    with pytest.raises(ModelConfigurationError, match="refused the API key"):
        check_models([unauthenticated])


def test_the_url_credentials_take_the_header_an_api_key_would(proxy, monkeypatch, caplog):
    """One Authorization header: the URL's basic auth wins over the key (as httpx and
    requests do with such a URL), and the run says the key is not sent."""
    monkeypatch.setattr(config, "LOCAL_SERVER_API_KEY", "sk-served-key")
    model = resolve_model(f"vllm:m@{url_with_credentials(proxy)}")
    with caplog.at_level(logging.WARNING, logger="cupid.models"):
        check_models([model])
    assert any("the API key (CUPID_LOCAL_SERVER_API_KEY) is not sent" in r.getMessage()
               for r in caplog.records)
    model.generate("", [{"role": "user", "content": "hello"}])
    assert proxy.requests[-1]["headers"]["authorization"] == BASIC
    # Without a user and password in the URL the key goes as before.
    proxy.basic_auth = None
    keyed = resolve_model(f"vllm:m@{proxy.openai_base_url}")
    keyed.generate("", [{"role": "user", "content": "hello again"}])
    assert proxy.requests[-1]["headers"]["authorization"] == "Bearer sk-served-key"
