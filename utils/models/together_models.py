"""Open models hosted by Together AI, through its OpenAI-compatible endpoint.

Addressed as ``together:ORG/NAME`` or a bare ``org/name`` (e.g.
``meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo``). Chat calls go through the ``openai``
SDK with Together's base URL, as the released harness sends them: the SDK enforces the
request timeout (the ``together`` 1.x SDK sent it in the body and never enforced it) and
the request is the release's. The ``together`` SDK (2.x or later) is used only for the
batch API, whose presigned uploads the OpenAI SDK cannot do (utils/models/batch.py).

TOGETHER_API_KEY is required. TOGETHER_BASE_URL (read at the first call) points both
clients elsewhere; it may be given with or without the trailing ``/v1``.
"""
from __future__ import annotations

import re
from typing import Any

from utils.models.hosted import CLIENTS, HostedModel
from utils.models.model import Completion, Request, register_provider
from utils.models.request import normalise_endpoint
from utils.models.openai_models import chat_messages, send_chat_completion, with_seed_and_timeout

DEFAULT_ROOT = "https://api.together.xyz"


def api_root(base_url: str | None) -> str:
    """The host part of a Together base URL: ``https://api.together.xyz/v1/`` and
    ``https://api.together.xyz`` both give ``https://api.together.xyz``."""
    root = (base_url or DEFAULT_ROOT).rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def together_sdk_base_url(root: str, sdk_version: str) -> str:
    """The base URL the installed ``together`` SDK expects: 2.x appends paths to ``.../v1``,
    3.x puts ``/v1`` in its paths and takes the bare host."""
    major = int(sdk_version.split(".", 1)[0])
    return f"{root}/v1" if major < 3 else root


@register_provider("together")
class TogetherModel(HostedModel):
    provider = "together"
    api_key_env = "TOGETHER_API_KEY"
    base_url_env = "TOGETHER_BASE_URL"
    provider_label = "models hosted by Together"

    def make_client(self, base_url: str | None, api_key: str) -> Any:
        import openai

        return openai.OpenAI(api_key=api_key, base_url=f"{api_root(base_url)}/v1", max_retries=0)

    def endpoint(self) -> str | None:
        """Together's host with or without ``/v1`` is one server."""
        return normalise_endpoint(api_root(self.resolved_base_url()))

    def batch_client(self) -> Any:
        """The ``together`` SDK's client (for its batch API), shared like ``client()``."""
        root, api_key = api_root(self.resolved_base_url()), self.resolved_api_key()
        if not api_key:
            self.check()

        def make() -> Any:
            import together

            return together.Together(api_key=api_key, max_retries=0,
                                     base_url=together_sdk_base_url(root, together.__version__))
        return CLIENTS.get(("together-sdk", root, api_key), make)

    def build_params(self, request: Request) -> dict:
        params: dict[str, Any] = {"model": self.name, "messages": chat_messages(request)}
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        return with_seed_and_timeout(params, request)

    def complete(self, request: Request) -> Completion:
        completion = send_chat_completion(self, request)
        completion.text = strip_thinking(completion.text)
        return completion


# Open reasoning models on Together (DeepSeek-R1, Qwen3 in thinking mode) write their
# reasoning into the answer, between <think> and </think> before the reply
# (https://docs.together.ai/docs/deepseek-r1, "reasoning ... inside <think> tags"). The
# answer that is parsed is the reply alone; the tokens are counted by usage all the same.
_THINK_BLOCK = re.compile(r"\A\s*<think>.*?</think>\s*", re.S)


def strip_thinking(text: str) -> str:
    return _THINK_BLOCK.sub("", text, count=1) if text.lstrip().startswith("<think>") else text
