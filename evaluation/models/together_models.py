"""Open models hosted by Together AI, through the ``together`` SDK (chat completions).

Addressed as ``together:ORG/NAME`` or a bare ``org/name`` (e.g.
``meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo``). The SDK is OpenAI-like: the system prompt
is the first message, usage comes back as prompt/completion tokens. TOGETHER_API_KEY is
required; TOGETHER_BASE_URL (read at the first call) points the client elsewhere.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable

from evaluation.models.model import (
    Completion,
    Model,
    ModelConfigurationError,
    Request,
    ResponseCache,
    register_provider,
)
from evaluation.models.openai_models import CLIENTS, call_sdk, chat_messages, parse_chat_completion


@register_provider("together")
class TogetherModel(Model):
    provider = "together"
    api_key_env = "TOGETHER_API_KEY"
    base_url_env = "TOGETHER_BASE_URL"

    def __init__(self, name: str | None = None, *, base_url: str | None = None,
                 api_key: str | None = None, temperature: float | None = 0.0,
                 max_tokens: int | None = None, timeout: float | None = None,
                 max_retries: int | None = None, cache: ResponseCache | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(name, temperature=temperature, max_tokens=max_tokens, timeout=timeout,
                         max_retries=max_retries, cache=cache, sleep=sleep)
        self._base_url = base_url
        self._api_key = api_key

    def resolved_base_url(self) -> str | None:
        return self._base_url or os.environ.get(self.base_url_env) or None

    def resolved_api_key(self) -> str | None:
        return self._api_key or os.environ.get(self.api_key_env) or None

    def check(self) -> None:
        if not self.resolved_api_key():
            raise ModelConfigurationError(
                f"{self.name}: the environment variable {self.api_key_env} is not set; "
                f"export {self.api_key_env}=... to use models hosted by Together")

    def client(self) -> Any:
        base_url, api_key = self.resolved_base_url(), self.resolved_api_key()
        if not api_key:
            self.check()

        def make() -> Any:
            import together

            return together.Together(api_key=api_key, base_url=base_url, max_retries=0)

        return CLIENTS.get((type(self).__qualname__, base_url, api_key), make)

    def build_params(self, request: Request) -> dict:
        params: dict[str, Any] = {"model": self.name, "messages": chat_messages(request)}
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        if request.timeout is not None:
            params["timeout"] = request.timeout
        return params

    def complete(self, request: Request) -> Completion:
        client = self.client()
        response = call_sdk(self.name, client.chat.completions.create, **self.build_params(request))
        return parse_chat_completion(response, self.name)
