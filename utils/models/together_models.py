"""Open models hosted by Together AI, through the ``together`` SDK (chat completions).

Addressed as ``together:ORG/NAME`` or a bare ``org/name`` (e.g.
``meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo``). The SDK is OpenAI-like: the system prompt
is the first message, usage comes back as prompt/completion tokens. TOGETHER_API_KEY is
required; TOGETHER_BASE_URL (read at the first call) points the client elsewhere.
"""
from __future__ import annotations

from typing import Any

from utils.models.hosted import HostedModel
from utils.models.model import Completion, Request, register_provider
from utils.models.openai_models import chat_messages, send_chat_completion, with_seed_and_timeout


@register_provider("together")
class TogetherModel(HostedModel):
    provider = "together"
    api_key_env = "TOGETHER_API_KEY"
    base_url_env = "TOGETHER_BASE_URL"
    provider_label = "models hosted by Together"

    def make_client(self, base_url: str | None, api_key: str) -> Any:
        import together

        return together.Together(api_key=api_key, base_url=base_url, max_retries=0)

    def build_params(self, request: Request) -> dict:
        params: dict[str, Any] = {"model": self.name, "messages": chat_messages(request)}
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        return with_seed_and_timeout(params, request)

    def complete(self, request: Request) -> Completion:
        return send_chat_completion(self, request)
