"""Anthropic's Claude models through the ``anthropic`` SDK (messages API).

Addressed as ``anthropic:NAME`` or a bare ``claude-*`` name. The system prompt goes in the
``system`` field; ``max_tokens`` is required by the API (4096 when the caller gives none).

Claude 3.7 Sonnet runs with the paper's settings (Table 8): temperature 1 and extended
thinking with a budget of 1024 tokens; ``max_tokens`` is raised above the budget when
needed, and only the text blocks of the answer are returned (the thinking is dropped).

Temperature: anthropic SDK 2.x removed the sampling parameters from ``messages.create`` and
its default API version (2026-10-21) rejects them with HTTP 400. The paper's settings need
one (0 for Claude 3.5 Sonnet, 1 for 3.7), so when a request has a temperature it is sent in
the body under the API version that accepts it (``legacy_api_version``). A model built with
``temperature=None`` sends none and uses the SDK's default version.
"""
from __future__ import annotations

from typing import Any

from utils.models.hosted import HostedModel, call_sdk_with_headers
from utils.models.errors import TransientModelError
from utils.models.registry import register_provider
from utils.models.request import Completion, Request, Usage


@register_provider("anthropic")
class AnthropicModel(HostedModel):
    """Claude through the messages API. Honours ANTHROPIC_BASE_URL (read at the first call)."""

    provider = "anthropic"
    api_key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"
    provider_label = "Anthropic models"
    default_max_tokens = 4096
    # Extended thinking as in the paper (Claude 3.7 Sonnet, Table 8).
    thinking_prefixes: tuple[str, ...] = ("claude-3-7-sonnet",)
    thinking_budget = 1024
    thinking_temperature = 1  # the integer, as the release sends it
    # The API version under which the messages API accepts `temperature`.
    legacy_api_version = "2023-06-01"

    def uses_thinking(self) -> bool:
        return self.name.lower().startswith(self.thinking_prefixes)

    def make_client(self, base_url: str | None, api_key: str) -> Any:
        import anthropic

        return anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0)

    def build_params(self, request: Request) -> dict:
        max_tokens = request.max_tokens if request.max_tokens is not None else self.default_max_tokens
        temperature = request.temperature
        params: dict[str, Any] = {
            "model": self.name,
            "messages": [{"role": m["role"], "content": m["content"]} for m in request.messages],
        }
        if request.system_prompt:
            params["system"] = request.system_prompt
        if self.uses_thinking():
            params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
            if max_tokens <= self.thinking_budget:
                # The budget counts towards max_tokens; keep the caller's room for the answer.
                max_tokens += self.thinking_budget
            temperature = self.thinking_temperature
        params["max_tokens"] = max_tokens
        if temperature is not None:
            params["extra_body"] = {"temperature": temperature}
            params["extra_headers"] = {"anthropic-version": self.legacy_api_version}
        if request.timeout is not None:
            params["timeout"] = request.timeout
        return params

    def complete(self, request: Request) -> Completion:
        client = self.client()
        response, headers = call_sdk_with_headers(self.name, client.messages, "create",
                                                  **self.build_params(request))
        completion = parse_message(response, self.name)
        completion.headers = headers
        return completion


def parse_message(response: Any, model_name: str) -> Completion:
    """Join the text blocks of a message (thinking blocks are dropped)."""
    blocks = getattr(response, "content", None) or []
    texts = [block.text for block in blocks
             if getattr(block, "type", None) == "text" and isinstance(getattr(block, "text", None), str)]
    if not texts:
        raise TransientModelError(
            f"{model_name}: malformed response without a text block "
            f"(stop_reason={getattr(response, 'stop_reason', None)!r})")
    usage = getattr(response, "usage", None)
    return Completion(
        text="".join(texts),
        usage=(Usage(getattr(usage, "input_tokens", 0) or 0, getattr(usage, "output_tokens", 0) or 0)
               if usage is not None else None),
        raw=response,
    )
