"""What one call sends and gets back: ``Request``, ``Completion``, ``Usage``."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import urlsplit

from .answer_layout import Layout

Message = dict  # {"role": "user" | "assistant", "content": str}


@dataclass
class Usage:
    prompt_tokens: int = 0
    # Every output token billed, the reasoning (thinking) tokens included: the providers
    # bill those as output (OpenAI's completion_tokens and Anthropic's output_tokens already
    # count them; Google's are added by its adapter).
    completion_tokens: int = 0
    batch: bool = False  # answered through a provider's batch API, at the batch price
    reasoning_tokens: int = 0  # the part of completion_tokens spent reasoning, when reported
    # The parts of prompt_tokens the provider read from its prompt cache (billed at its cached
    # price) and wrote to it (Anthropic's cache creation, billed above the input price).
    cached_prompt_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass
class Completion:
    text: str
    usage: Usage | None = None
    raw: Any = None  # the SDK's own response, for a user's adapter to keep beside the text
    # The answer's HTTP headers, when the adapter has them: the limiter reads the
    # provider's rate-limit statement from them.
    headers: Any = None
    # How the provider said the answer ended (its raw signal: finish_reason, stop_reason,
    # finishReason, or a field set: "message.refusal", "promptFeedback.blockReason") and its
    # own words when it refused or blocked; the seam reads them into ``ending`` (endings.py).
    finish: Any = None
    refusal: str | None = None
    ending: str = "stop"
    # The generation parameters as the adapter sent them (set by the seam), and the
    # adaptations to the model's refusals that were applied (adaptations.py).
    parameters: dict | None = None
    adaptations: tuple = ()


@dataclass(frozen=True)
class Request:
    system_prompt: str
    messages: tuple[Message, ...]
    temperature: float | None = None
    max_tokens: int | None = None
    json_schema: dict | None = None
    # The layout of a free-text answer as a llama.cpp GBNF grammar, written from ``layout`` by
    # the seam (embedded_grammar.py). Only the embedded model follows it: a 135M model does
    # not keep a markdown layout on its own. Other adapters never send it, so the benchmark's
    # models answer unconstrained, as in the paper.
    answer_grammar: str | None = None
    timeout: float | None = None
    # Sent to providers that take one (OpenAI, Together, Google, vLLM, the embedded model);
    # None leaves the provider's default. Set only by a user's --seed or seed= override.
    seed: int | None = None
    # Reasoning options a user chose (--model_args reasoning_effort=low, thinking_budget=N),
    # validated per provider by the adapter that sends them; None: the model's default.
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    # Distinguishes a deliberate re-ask (e.g. after an unparseable answer) from the first
    # ask in the cache key. It is never sent to the model.
    variant: int = 0
    # The answer's layout as the step declared it (answer_layout.py). ``Model.constrain`` turns
    # it into what the model follows (answer_grammar, json_schema) before the cache key is
    # computed, and drops it: it is neither sent nor part of the key.
    layout: Layout | None = None

    @property
    def user_prompt(self) -> str:
        """The conversation as one user prompt, for models that take a single turn."""
        if len(self.messages) == 1:
            return self.messages[0]["content"]
        return "\n\n".join(f"{'User' if m['role'] == 'user' else 'AI Assistant'}: {m['content']}"
                           for m in self.messages)

    def cache_key(self, model_name: str, provider: str = "custom",
                  endpoint: str | None = None) -> str:
        """Every field that changes the answer, and who answers it: the provider and the
        endpoint (``normalise_endpoint``), so the same model name served by two servers,
        or by two providers, never shares an answer. ``timeout`` is left out: it does not
        change what a finished answer says."""
        fields = [model_name, self.system_prompt, list(self.messages), self.temperature,
                  self.max_tokens, self.json_schema, self.answer_grammar, self.variant,
                  {"provider": provider, "endpoint": endpoint}]
        if self.seed is not None:
            fields.append({"seed": self.seed})
        reasoning = {k: v for k, v in (("reasoning_effort", self.reasoning_effort),
                                       ("thinking_budget", self.thinking_budget)) if v is not None}
        if reasoning:  # only when set: requests without reasoning options keep their keys
            fields.append(reasoning)
        payload = json.dumps(fields, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def chat_messages(request: Request, system_role: str = "system") -> list[dict]:
    """The OpenAI-style message list: the system prompt (if any) as a ``system_role``
    message, then the conversation."""
    messages = [{"role": system_role, "content": request.system_prompt}] if request.system_prompt else []
    messages.extend({"role": m["role"], "content": m["content"]} for m in request.messages)
    return messages


_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_endpoint(url: str | None) -> str | None:
    """One spelling per server: scheme and host lowercased, the default port and trailing
    slashes dropped, credentials in the URL left out. A comma-separated farm (``URL1,URL2``) becomes its sorted set, so the
    order the URLs were given in does not matter."""
    if not url:
        return None
    parts = [p.strip() for p in url.split(",") if p.strip()]
    if len(parts) > 1:
        return ",".join(sorted({normalise_endpoint(p) for p in parts}))
    split = urlsplit(parts[0])
    if not split.scheme or not split.netloc:
        return parts[0].rstrip("/")
    host = (split.hostname or "").lower()
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    port = split.port
    netloc = host if port is None or port == _DEFAULT_PORTS.get(split.scheme.lower()) else f"{host}:{port}"
    path = split.path.rstrip("/")
    query = f"?{split.query}" if split.query else ""
    return f"{split.scheme.lower()}://{netloc}{path}{query}"


def validate_messages(messages: Sequence[Message]) -> tuple[Message, ...]:
    if not messages:
        raise ValueError("a request needs at least one message")
    out = []
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            raise ValueError(f"message {i}: role must be 'user' or 'assistant', got {role!r}")
        if not isinstance(content, str):
            raise ValueError(f"message {i}: content must be a string")
        out.append({"role": role, "content": content})
    if out[-1]["role"] != "user":
        raise ValueError("the last message must come from the user")
    return tuple(out)
