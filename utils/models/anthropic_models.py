"""Anthropic's Claude models through the ``anthropic`` SDK (messages API).

Addressed as ``anthropic:NAME`` or a bare ``claude-*`` name. The system prompt goes in the
``system`` field; ``max_tokens`` is required by the API (4096 when the caller gives none).

Claude 3.7 Sonnet runs with the paper's settings (Table 8): temperature 1 and extended
thinking with a budget of 1024 tokens; ``max_tokens`` is raised above the budget when
needed, and only the text blocks of the answer are returned (the thinking is dropped).
The Claude 4 models up to 4.6 think only when asked (``--model_args thinking_budget=N``,
N >= 1024; 0 turns thinking off), with the same rules. Claude Opus 4.7 and later and the
Claude 5 models think adaptively on their own and refuse a temperature and a budget: they
are sent neither (``ADAPTIVE_ONLY``).

Temperature: anthropic SDK 2.x removed the sampling parameters from ``messages.create`` and
its default API version (2026-10-21, ``anthropic._constants.ANTHROPIC_API_VERSION``) rejects
them with HTTP 400 (https://platform.claude.com/docs/en/api/versioning: "The temperature,
top_p, and top_k request parameters are removed"). The paper's settings need
one (0 for Claude 3.5 Sonnet, 1 for 3.7), so when a request has a temperature it is sent in
the body under the API version that accepts it (``legacy_api_version``). A model built with
``temperature=None`` sends none and uses the SDK's default version.
"""
from __future__ import annotations

import re
from typing import Any

from .adaptations import Adaptation, refused_temperature
from .batch import BatchAdapter, BatchItemError, Unanswered
from .catalog import ModelFacts, dated_table
from .hosted import HostedModel, call_with_headers
from .rate_limit_headers import header_family
from .call_errors import ModelConfigurationError
from .model import register_provider
from .request import Completion, Request, Usage


# Anthropic's rate-limit headers; their reset times are RFC 3339 dates
# (rate_limit_headers.parse_duration). Anthropic's page (https://docs.claude.com/en/api/rate-limits)
# is not in a stored source (as of 2026-11-23); the names and the date format agree with the
# copies quoting it (docs/provider_sources.md).
RATE_LIMIT_HEADERS = header_family(
    tokens=("anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining",
            "anthropic-ratelimit-tokens-reset"),
    requests=("anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining",
              "anthropic-ratelimit-requests-reset"))


# How a message ended (endings.py): ``stop_reason`` as the anthropic SDK's Message documents it
# ("end_turn", "max_tokens" when the requested max_tokens or the model's maximum was exceeded,
# "stop_sequence", "tool_use", "pause_turn", "refusal" "when streaming classifiers intervene to
# handle potential policy violations", "model_context_window_exceeded"; anthropic 2.14,
# anthropic/types/message.py). A message holding only thinking blocks ends "end_turn" with no
# text: "empty" by the shared rule.
FINISH_SIGNALS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "pause_turn": "stop",
                  "max_tokens": "length", "model_context_window_exceeded": "length",
                  "refusal": "refused"}


def _claude(input_price: float, output_price: float, window: int) -> ModelFacts:
    """A Claude model's facts, its prompt cache priced from its input price: reads at 0.1x, writes
    (five-minute cache, the default) at 1.25x ("Cache reads: 0.10x input price", "Cache write
    (5m): 1.25x input price", from https://www.anthropic.com/pricing, as quoted by docs.rs synaps
    0.3.3 ``pricing``; one-hour writes, 2x, are priced as five-minute ones)."""
    return ModelFacts(input_price, output_price, window, round(input_price * 0.1, 4),
                      round(input_price * 1.25, 4))


# Prices (USD per million tokens, input and output, at the online rate) and context
# windows (prompt plus output tokens), as the sources said on the table's date
# (catalog.py looks them up). Each model's page (platform.claude.com/docs/en/models/MODEL/
# overview) gives both for Claude Sonnet 4.5, Haiku 4.5, Opus 4.5 and later; the Claude 3.x,
# Sonnet 4, Opus 4 and Opus 4.1 prices are the pricing page's as quoted in
# docs/provider_sources.md, and their 200K windows are not confirmed in a stored source (as of
# 2026-11-23).
CATALOG = dated_table("anthropic", date="2026-11-23", sources=(
        "https://platform.claude.com/docs/en/about-claude/pricing and each model's page "
        "(https://platform.claude.com/docs/en/models/MODEL/overview)"), models={
    "claude-3-5-sonnet-20241022": _claude(3.00, 15.00, 200_000),
    "claude-3-5-sonnet-20240620": _claude(3.00, 15.00, 200_000),
    "claude-3-7-sonnet-20250219": _claude(3.00, 15.00, 200_000),
    "claude-3-5-haiku-20241022": _claude(0.80, 4.00, 200_000),
    "claude-sonnet-4-20250514": _claude(3.00, 15.00, 200_000),
    "claude-sonnet-4-5-20250929": _claude(3.00, 15.00, 200_000),
    "claude-sonnet-4-5": _claude(3.00, 15.00, 200_000),
    "claude-opus-4-20250514": _claude(15.00, 75.00, 200_000),
    "claude-opus-4-1-20250805": _claude(15.00, 75.00, 200_000),
    "claude-opus-4-1": _claude(15.00, 75.00, 200_000),
    "claude-opus-4-5-20251101": _claude(5.00, 25.00, 200_000),
    "claude-opus-4-5": _claude(5.00, 25.00, 200_000),
    "claude-haiku-4-5-20251001": _claude(1.00, 5.00, 200_000),
    "claude-haiku-4-5": _claude(1.00, 5.00, 200_000),
    # Adaptive-thinking models (Opus 4.6 takes a budget too); Opus 4.7's page is not in a stored
    # source (as of 2026-11-23): its window is Amazon Bedrock's model card's
    # (docs.aws.amazon.com/bedrock/latest/userguide/model-card-anthropic-claude-opus-4-7.md).
    "claude-opus-4-6": _claude(5.00, 25.00, 1_000_000),
    "claude-opus-4-7": _claude(5.00, 25.00, 1_000_000),
    "claude-sonnet-5": _claude(2.00, 10.00, 1_000_000),
    "claude-opus-5": _claude(5.00, 25.00, 1_000_000),
    "claude-opus-5-5": _claude(4.00, 20.00, 1_000_000),
    "claude-fable-5-1": _claude(10.00, 50.00, 1_000_000),
})


# Models that take extended thinking (``thinking={"type": "enabled", "budget_tokens": N}``):
# Claude 3.7 Sonnet and the Claude 4 models up to 4.6 (Opus 4/4.1/4.5/4.6, Sonnet 4/4.5/4.6,
# Haiku 4.5). Source: https://platform.claude.com/docs/en/build-with-claude/extended-thinking
# (its per-model table is not in a stored source, as of 2026-11-23; Bedrock's Opus 4.7 card:
# "Unlike Claude Opus 4.6, thinking.type: enabled with budget_tokens is not supported"). The
# Claude 3.5 and 3 models reject a thinking block (not confirmed in a stored source). A budget
# is at least 1024 and below max_tokens ("thinking.enabled.budget_tokens: Input should be
# greater than or equal to 1024": github.com/themaximalist/llm.js/issues/30; "`max_tokens` must
# be greater than `thinking.budget_tokens`": github.com/liuw1535/antigravity2api-nodejs/issues/150),
# and the temperature with it only 1 ("`temperature` may only be set to 1 when thinking is
# enabled": github.com/MartialBE/one-hub/issues/529).
THINKING_MODELS = re.compile(r"claude-(3-7-sonnet|(opus|sonnet|haiku)-4)")
# Claude Opus 4.7 / 4.8 and the Claude 5 models (Sonnet 5, Opus 5, Opus 5.5, Fable 5.1 ...)
# think adaptively by default and answer 400 to manual thinking (budget_tokens) and to any
# sampling parameter (temperature, top_p, top_k): Anthropic's error reference,
# github.com/anthropics/skills skills/claude-api/shared/error-codes.md ("Model-specific 400s
# on Claude Opus 5 / Fable 5/5.1 / Opus 4.8 / 4.7": sampling parameters "sending any of them
# returns 400"; budget_tokens "sending it returns 400"), and
# https://platform.claude.com/docs/en/models/sonnet-5/migration-guide ("sampling parameters
# (temperature, top_p, top_k) set to non-default values return a 400 error"; manual extended
# thinking "returns a 400 error"). They are sent no temperature and no thinking block.
ADAPTIVE_ONLY = re.compile(r"claude-([a-z]+-4-([7-9]|\d\d)|[a-z]+-([5-9]|\d\d))(\b|-|$)")
MIN_THINKING_BUDGET = 1024
# The thinking tokens a call of an adaptive-thinking model spends, for --dry_run's forecast: our
# assumption (OpenAI's medium effort's, openai_models.py); Anthropic states none, and its usage
# does not report thinking apart from output_tokens, so no run records it either.
ADAPTIVE_THINKING_TOKENS = 1500
# Claude Sonnet 4.5 / 4.6, Haiku 4.5 and Opus 4.1 and later refuse temperature and top_p
# together ("`temperature` and `top_p` cannot both be specified for this model. Please use only
# one."): Sonnet 4.5 github.com/BerriAI/litellm/issues/15097, Sonnet 4.6
# github.com/Vali-98/ChatterUI/issues/564, Opus 4.1 github.com/anomalyco/opencode/issues/1644,
# Opus 4.5 github.com/OpenHands/OpenHands/issues/11838, Haiku 4.5 github.com/comet-ml/opik/pull/3728.
# No stored Anthropic page states it (as of 2026-11-23).
# The harness sends temperature only and never top_p, so every Claude model takes its requests.


@register_provider("anthropic")
class AnthropicModel(HostedModel):
    """Claude through the messages API. Honours ANTHROPIC_BASE_URL (read at the first call)."""

    provider = "anthropic"
    finish_signals = FINISH_SIGNALS
    api_key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"
    provider_label = "Anthropic models"
    default_max_tokens = 4096
    reasoning_options = ("thinking_budget",)
    # Extended thinking by default as in the paper (Claude 3.7 Sonnet, Table 8); other
    # thinking models think only when the user sets thinking_budget.
    thinking_prefixes: tuple[str, ...] = ("claude-3-7-sonnet",)
    thinking_budget = 1024
    thinking_temperature = 1  # the integer, as the release sends it
    # The API version under which the messages API accepts `temperature`.
    legacy_api_version = "2023-06-01"

    bare_names = "claude-*"
    families = (("extended thinking", f"thinking_budget >= {MIN_THINKING_BUDGET}, 0 off "
                                      f"(claude-3-7-sonnet: {thinking_budget}, the paper's)"),
                ("adaptive thinking", "none: thinks on its own, takes no temperature"),
                ("no thinking", "none"))

    @classmethod
    def name_guess(cls, name: str) -> int:
        return 2 if name.lower().startswith("claude-") else 0

    @classmethod
    def family_of(cls, name: str) -> str:
        lowered = name.lower()
        if ADAPTIVE_ONLY.search(lowered):
            return "adaptive thinking"
        return "extended thinking" if THINKING_MODELS.search(lowered) else "no thinking"

    def adaptive_only(self) -> bool:
        """Adaptive thinking only, and no sampling parameters (Opus 4.7 and later)."""
        return ADAPTIVE_ONLY.search(self.name.lower()) is not None

    def thinking_budget_for(self, request: Request) -> int | None:
        """The budget of this request's thinking, or None: no thinking (a user's 0 too)."""
        if request.thinking_budget is not None:
            return request.thinking_budget or None
        return self.thinking_budget if self.name.lower().startswith(self.thinking_prefixes) else None

    def reasoning_forecast(self, request: Request) -> tuple[int, str]:
        """The thinking budget (the most a call may spend: "Claude may not use the entire
        budget", https://platform.claude.com/docs/en/build-with-claude/extended-thinking), or
        ``ADAPTIVE_THINKING_TOKENS`` for a model that thinks on its own."""
        budget = self.thinking_budget_for(request)
        if budget is not None:
            given = "set" if request.thinking_budget else "the paper's"
            return budget, f"thinking_budget {budget:,} ({given}), spent in full: an upper bound"
        if self.adaptive_only():
            return (ADAPTIVE_THINKING_TOKENS,
                    f"adaptive thinking: {ADAPTIVE_THINKING_TOKENS:,} tokens a call, our assumption")
        return 0, "no extended thinking unless thinking_budget is set"

    def validate_overrides(self, overrides: dict) -> None:
        super().validate_overrides(overrides)
        if "temperature" in overrides and self.adaptive_only():
            raise ModelConfigurationError(
                f"{self.name}: this model refuses any temperature (Claude Opus 4.7 and later take "
                f"no sampling parameters)")
        budget = overrides.get("thinking_budget")
        if budget is None or budget == 0:
            return
        if self.adaptive_only():
            raise ModelConfigurationError(
                f"{self.name}: thinking_budget={budget}: this model thinks adaptively and refuses "
                f"a thinking budget (Claude Opus 4.7 and later)")
        if not THINKING_MODELS.search(self.name.lower()):
            raise ModelConfigurationError(
                f"{self.name}: thinking_budget={budget}: this model has no extended thinking "
                f"(Claude 3.7 Sonnet and the Claude 4 models have)")
        if budget < MIN_THINKING_BUDGET:
            raise ModelConfigurationError(
                f"{self.name}: thinking_budget={budget} is below Anthropic's minimum of "
                f"{MIN_THINKING_BUDGET} tokens (0 turns thinking off)")
        if "temperature" in overrides and overrides["temperature"] != 1:
            raise ModelConfigurationError(
                f"{self.name}: with thinking_budget the temperature can only be 1")

    def parameter_adaptation(self, exc: BaseException) -> Adaptation | None:
        body = getattr(exc, "body", None)
        error = body.get("error") if isinstance(body, dict) else None
        return refused_temperature(exc, self.overrides,
                                   (error.get("message") if isinstance(error, dict) else None) or str(exc))

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
        budget = self.thinking_budget_for(request)
        if budget is not None:
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
            if max_tokens <= budget:
                # The budget counts towards max_tokens; keep the caller's room for the answer.
                max_tokens += budget
            temperature = self.thinking_temperature
        params["max_tokens"] = max_tokens
        if self.adaptive_only() or any(a.parameter == "temperature" for a in self.learned_adaptations()):
            temperature = None
        if temperature is not None:
            params["extra_body"] = {"temperature": temperature}
            params["extra_headers"] = {"anthropic-version": self.legacy_api_version}
        if request.timeout is not None:
            params["timeout"] = request.timeout
        return params

    def batch_adapter(self) -> AnthropicBatch:
        return AnthropicBatch(self)

    def complete(self, request: Request) -> Completion:
        response, headers = call_with_headers(self.client().messages, "create", **self.build_params(request))
        return parse_message(response, headers)


def parse_message(response: Any, headers: Any = None) -> Completion:
    """Join the text blocks of a message (thinking blocks are dropped: the answer that is
    parsed never holds the thinking), with its stop_reason and, for a refusal, Anthropic's
    explanation (``stop_details``). One cut before any text (the thinking used the limit) is
    an empty answer that ended "length"."""
    blocks = getattr(response, "content", None) or []
    texts = [block.text for block in blocks
             if getattr(block, "type", None) == "text" and isinstance(getattr(block, "text", None), str)]
    usage = getattr(response, "usage", None)
    details = getattr(response, "stop_details", None)
    # output_tokens includes the thinking tokens (billed as output). input_tokens leaves out
    # the prompt tokens read from the prompt cache (cache_read_input_tokens) and written to it
    # (cache_creation_input_tokens), each billed at its own price (anthropic/types/usage.py):
    # prompt_tokens is their sum, as OpenAI's and Google's are.
    read, written = (getattr(usage, name, 0) or 0 for name in ("cache_read_input_tokens",
                                                               "cache_creation_input_tokens"))
    thinking = getattr(getattr(usage, "output_tokens_details", None), "thinking_tokens", 0) or 0
    return Completion(
        text="".join(texts),
        usage=(Usage((getattr(usage, "input_tokens", 0) or 0) + read + written,
                     getattr(usage, "output_tokens", 0) or 0, reasoning_tokens=thinking,
                     cached_prompt_tokens=read, cache_write_tokens=written)
               if usage is not None else None),
        finish=getattr(response, "stop_reason", None),
        refusal=getattr(details, "explanation", None) or getattr(details, "category", None),
        headers=headers,
    )


# The HTTP status of each error type (https://docs.anthropic.com/en/api/errors): a batch's
# errored result names the type only (``{"type": "error", "error": {"type":
# "invalid_request_error", "message": ...}}``, the body an online request gets:
# https://docs.anthropic.com/en/docs/build-with-claude/batch-processing, "errored").
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                "rate_limit_error": 429, "api_error": 500, "timeout_error": 504,
                "overloaded_error": 529}


class AnthropicBatch(BatchAdapter):
    """Anthropic's Message Batches API (each item says whether the batch ended before it)."""

    def line(self, custom_id: str, request: Request) -> dict:
        params = self.model.build_params(request)
        body = {k: v for k, v in params.items() if k not in ("timeout", "extra_body", "extra_headers")}
        body.update(params.get("extra_body") or {})
        return {"custom_id": custom_id, "params": body}

    def submit(self, lines: list[dict]) -> str:
        client = self.model.client()
        # The API version under which a request may carry a temperature (see the adapter).
        headers = {"anthropic-version": self.model.legacy_api_version} \
            if any("temperature" in line["params"] for line in lines) else None
        return client.messages.batches.create(requests=lines, extra_headers=headers).id

    def poll(self, batch_id: str) -> tuple[bool, str, int, int]:
        batch = self.model.client().messages.batches.retrieve(batch_id)
        c = batch.request_counts
        done = c.succeeded + c.errored + c.canceled + c.expired
        return batch.processing_status == "ended", batch.processing_status, done, done + c.processing

    def fetch(self, batch_id: str) -> dict[str, Completion | str | BatchItemError]:
        out: dict[str, Completion | str | BatchItemError] = {}
        for item in self.model.client().messages.batches.results(batch_id):
            result = item.result
            if result.type == "succeeded":
                try:
                    out[item.custom_id] = parse_message(result.message)
                except Exception as exc:  # a malformed item fails alone
                    out[item.custom_id] = f"malformed batch answer: {exc}"
            elif result.type in ("canceled", "expired"):  # the batch ended before this item
                out[item.custom_id] = Unanswered(f"it ended with requests {result.type}")
            else:
                error = getattr(result, "error", None)
                reason = f"{result.type}: {getattr(error, 'error', error)}"
                body = error.model_dump() if hasattr(error, "model_dump") else None
                kind = ((body or {}).get("error") or {}).get("type")
                # As the anthropic SDK raises it online: the status, the whole body.
                out[item.custom_id] = (BatchItemError(reason, ERROR_STATUS[kind], body)
                                       if kind in ERROR_STATUS else reason)
        return out
