"""OpenAI's models, addressed as ``openai:NAME`` or a bare ``gpt-*``/``o1*``/``o3*``/``o4*``
name: a small subclass of the OpenAI-compatible base (openai_compatible.py) holding OpenAI's
model families' parameter rules, its refusals of a parameter, and its Batch API.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .. import events
from .adaptations import Adaptation
from .catalog import ModelFacts, dated_table
from .call_errors import ModelConfigurationError
from .model import register_provider
from .openai_compatible import ChatCompletionsBatch, OpenAICompatibleModel, refused_parameter
from .request import Request



# Prices (USD per million tokens, input and output, at the online rate) and context
# windows (prompt plus output tokens), as the sources said on the table's date
# (catalog.py looks them up). OpenAI's own pages are not in a stored source (as of
# 2026-11-23): every price and window here agrees with copies quoting them
# (docs/provider_sources.md lists which); gpt-4.1's exact 1,047,576 and gpt-4o-2024-05-13's
# price are not confirmed in a stored source (as of 2026-11-23). The fourth figure, cached
# input (``prompt_tokens_details.cached_tokens``, which OpenAI caches on its own for prompts of
# 1,024 tokens and more), is the pricing page's as copied in github.com/photiary/ai-foo
# prompts/OpenAI-Pricing.md (gpt-5.1's in benchlm.ai/blog/posts/openai-api-pricing);
# gpt-4o-2024-05-13 has none, gpt-5.1-chat-latest's is not confirmed in a stored source.
_GPT41_WINDOW = 1_047_576
CATALOG = dated_table("openai", date="2026-11-23", sources=(
        "https://developers.openai.com/api/docs/pricing and https://developers.openai.com/"
        "api/docs/models, as quoted by the copies listed in docs/provider_sources.md"), models={
    # the paper's models (Table 8)
    "gpt-4o-2024-11-20": ModelFacts(2.50, 10.00, 128_000, 1.25),
    "gpt-4o-2024-08-06": ModelFacts(2.50, 10.00, 128_000, 1.25),
    "gpt-4o-2024-05-13": ModelFacts(5.00, 15.00, 128_000),
    "gpt-4o": ModelFacts(2.50, 10.00, 128_000, 1.25),
    "gpt-4o-mini": ModelFacts(0.15, 0.60, 128_000, 0.075),
    "gpt-4o-mini-2024-07-18": ModelFacts(0.15, 0.60, 128_000, 0.075),
    "gpt-4.1-2025-04-14": ModelFacts(2.00, 8.00, _GPT41_WINDOW, 0.5),
    "gpt-4.1": ModelFacts(2.00, 8.00, _GPT41_WINDOW, 0.5),
    "gpt-4.1-mini-2025-04-14": ModelFacts(0.40, 1.60, _GPT41_WINDOW, 0.1),
    "gpt-4.1-mini": ModelFacts(0.40, 1.60, _GPT41_WINDOW, 0.1),
    "gpt-4.1-nano-2025-04-14": ModelFacts(0.10, 0.40, _GPT41_WINDOW, 0.025),
    "gpt-4.1-nano": ModelFacts(0.10, 0.40, _GPT41_WINDOW, 0.025),
    "o1-2024-12-17": ModelFacts(15.00, 60.00, 200_000, 7.5),
    "o1": ModelFacts(15.00, 60.00, 200_000, 7.5),
    "o3-mini-2025-01-31": ModelFacts(1.10, 4.40, 200_000, 0.55),
    "o3-mini": ModelFacts(1.10, 4.40, 200_000, 0.55),
    # current models
    "o3-2025-04-16": ModelFacts(2.00, 8.00, 200_000, 0.5),
    "o3": ModelFacts(2.00, 8.00, 200_000, 0.5),
    "o4-mini-2025-04-16": ModelFacts(1.10, 4.40, 200_000, 0.275),
    "o4-mini": ModelFacts(1.10, 4.40, 200_000, 0.275),
    "gpt-5-2025-08-07": ModelFacts(1.25, 10.00, 400_000, 0.125),
    "gpt-5": ModelFacts(1.25, 10.00, 400_000, 0.125),
    "gpt-5-mini-2025-08-07": ModelFacts(0.25, 2.00, 400_000, 0.025),
    "gpt-5-mini": ModelFacts(0.25, 2.00, 400_000, 0.025),
    "gpt-5-nano-2025-08-07": ModelFacts(0.05, 0.40, 400_000, 0.005),
    "gpt-5-nano": ModelFacts(0.05, 0.40, 400_000, 0.005),
    "gpt-5-chat-latest": ModelFacts(1.25, 10.00, 128_000, 0.125),
    "gpt-5.1-2025-11-13": ModelFacts(1.25, 10.00, 400_000, 0.125),
    "gpt-5.1": ModelFacts(1.25, 10.00, 400_000, 0.125),
    "gpt-5.1-chat-latest": ModelFacts(1.25, 10.00, 128_000),
})


@dataclass(frozen=True)
class OpenAIFamily:
    """What one family of OpenAI models accepts on the chat completions API."""

    name: str
    # None: the role's field (config.ROLE_PARAMS); else the only one the family accepts.
    token_field: str | None = None
    temperature: bool = True                        # a non-default temperature accepted
    temperature_with_effort: tuple[str, ...] = ()   # ... only at these efforts
    efforts: tuple[str, ...] = ()                   # reasoning_effort values accepted
    default_effort: str | None = None               # the effort without one; None: no reasoning
    # True: an effort outside ``efforts`` is passed on with a warning (the family's newer
    # models may take newer efforts); False: refused before any request, as sourced.
    open_efforts: bool = False

    def takes_temperature(self, effort: str | None) -> bool:
        return self.temperature or (effort is not None and effort in self.temperature_with_effort)


# The rules per family, each with its source (docs/provider_sources.md). Reasoning models
# (o-series, gpt-5 family) reject max_tokens ("Unsupported parameter: 'max_tokens' is not
# supported with this model. Use 'max_completion_tokens' instead.", code
# unsupported_parameter; openai-python's max_tokens docstring: "not compatible with o-series
# models") and any temperature but the default 1 ("Unsupported value: 'temperature' does not
# support 0 with this model. Only the default (1) value is supported.", code unsupported_value).
# The bodies as reported in github.com/autohandai/code-cli/issues/77 (gpt-5.4) and
# github.com/openai/openai-python/issues/2104 (o3-mini); OpenAI's reasoning guide
# (https://platform.openai.com/docs/guides/reasoning) is not in a stored source (as of 2026-11-23).
O_SERIES = OpenAIFamily(
    "o-series", token_field="max_completion_tokens", temperature=False,
    # reasoning_effort on o1 (not o1-mini/o1-preview), o3, o3-mini, o4-mini: low/medium/high
    # (openai-python's ReasoningEffort docstring: "All models before gpt-5.1 default to medium
    # reasoning effort, and do not support none"; "minimal" came with gpt-5).
    efforts=("low", "medium", "high"), default_effort="medium")
# o1-mini and o1-preview reason at a level no option sets: forecast as medium (our assumption).
O1_EARLY = OpenAIFamily("o1-mini/o1-preview", token_field="max_completion_tokens",
                        temperature=False, default_effort="medium")
# gpt-5, gpt-5-mini, gpt-5-nano (2025-08-07): reasoning models, effort minimal..high, not
# "none" (openai-python 2.44, src/openai/types/chat/completion_create_params.py,
# reasoning_effort: "All models before gpt-5.1 ... do not support none").
GPT5 = OpenAIFamily("gpt-5", token_field="max_completion_tokens", temperature=False,
                    efforts=("minimal", "low", "medium", "high"), default_effort="medium")
# gpt-5-pro: "defaults to (and only supports) high reasoning effort" (same docstring); the
# later -pro models are given the same rule, which no stored source confirms (as of 2026-11-23).
GPT5_PRO = OpenAIFamily("gpt-5-pro", token_field="max_completion_tokens", temperature=False,
                        efforts=("high",), default_effort="high")
# gpt-5.1: effort "none" added (its default); "The supported reasoning values for gpt-5.1 are
# none, low, medium, and high" (same docstring; OpenAI's 400: "Unsupported value: 'minimal' is
# not supported with the 'gpt-5.1' model. Supported values are: 'none', 'low', 'medium', and
# 'high'.", github.com/anomalyco/opencode/issues/4451). Temperature and top_p are accepted only
# when the effort is "none" (https://platform.openai.com/docs/guides/latest-model
# #gpt-5-1-parameter-compatibility, as cited by github.com/vercel/ai/pull/10940).
GPT5_1 = OpenAIFamily("gpt-5.1", token_field="max_completion_tokens", temperature=False,
                      temperature_with_effort=("none",),
                      efforts=("none", "low", "medium", "high"), default_effort="none")
# gpt-5.2 and later: as gpt-5.1, plus "xhigh" ("xhigh is supported for all models after
# gpt-5.1-codex-max", same docstring); temperature with effort "none" as on gpt-5.1
# (github.com/vercel/ai/pull/11174; for gpt-5.3 and later not confirmed in a stored source, as
# of 2026-11-23). Later efforts (openai-python 2.45 adds "max") are not
# confirmed per model in a stored source (as of 2026-11-23); nor is their default effort, taken
# to be gpt-5.1's "none".
GPT5_2 = OpenAIFamily("gpt-5.2+", token_field="max_completion_tokens", temperature=False,
                      temperature_with_effort=("none",),
                      efforts=("none", "low", "medium", "high", "xhigh"), default_effort="none",
                      open_efforts=True)
# gpt-5-chat-latest, gpt-5.1-chat-latest: the non-reasoning ChatGPT models; they take a
# temperature (github.com/labring/fastgpt-plugin/pull/297 lists gpt-5-chat with a
# temperature range; OpenAI's model page https://platform.openai.com/docs/models/gpt-5-chat-latest
# is not in a stored source, as of 2026-11-23) but, as every model since o1, count their limit
# in max_completion_tokens (max_tokens "is now deprecated in favor of max_completion_tokens":
# openai-python, completion_create_params.py).
GPT5_CHAT = OpenAIFamily("gpt-5-chat", token_field="max_completion_tokens")
# gpt-4o, gpt-4.1, gpt-4o-mini, gpt-3.5: the paper's family; both token fields, any
# temperature, no reasoning options. The release sent max_tokens for the evaluated model
# and max_completion_tokens for the evaluator (config.ROLE_PARAMS), and so do we.
GPT4 = OpenAIFamily("gpt-4.x")
# A name none of the rules knows (a model released after them): sent as a gpt-4.x model;
# a refusal of temperature or max_tokens is learned (``parameter_adaptation``), and a
# reasoning_effort the user asks for is passed on for the server to judge.
UNKNOWN = OpenAIFamily("unknown", efforts=("none", "minimal", "low", "medium", "high", "xhigh", "max"),
                       open_efforts=True)


# Reasoning tokens one call spends at each effort, for --dry_run's forecast: our assumption for
# CUPID's requests (a long history in, a paragraph out), not a measurement. OpenAI says only
# that reasoning takes "from a few hundred to tens of thousands" of tokens a request and
# advises reserving 25,000 for reasoning and output (its reasoning guide,
# https://platform.openai.com/docs/guides/reasoning, as quoted in
# vstorm-co.github.io/pydantic-ai-examples/examples/reasoning-effort). A run's recorded
# reasoning tokens replace these figures (utils/forecast.py recorded_reasoning).
REASONING_TOKENS_AT_EFFORT = {"none": 0, "minimal": 150, "low": 600, "medium": 1500,
                              "high": 4000, "xhigh": 8000, "max": 16000}


FAMILIES = (O_SERIES, O1_EARLY, GPT5, GPT5_PRO, GPT5_1, GPT5_2, GPT5_CHAT, GPT4)


def reasoning_option(family: OpenAIFamily) -> str:
    """What a family takes for reasoning, in a line (``--list-models``)."""
    if family.efforts:
        return f"reasoning_effort {'/'.join(family.efforts)} (default {family.default_effort})"
    return "reasons; no option" if family.default_effort else "none"


def openai_family(name: str) -> OpenAIFamily:
    lowered = name.lower().split("/")[-1]
    if re.match(r"o1-(mini|preview)", lowered):
        return O1_EARLY
    if re.match(r"o\d", lowered):
        return O_SERIES
    if re.match(r"gpt-5(\.\d+)?-chat", lowered):
        return GPT5_CHAT
    if re.match(r"gpt-5(\.\d+)?-pro", lowered):
        return GPT5_PRO
    if re.match(r"gpt-5\.1(\D|$)", lowered):
        return GPT5_1
    if re.match(r"gpt-5\.\d", lowered):
        return GPT5_2
    if re.match(r"gpt-5(-|$)", lowered):
        return GPT5
    if lowered.startswith(("gpt-4", "gpt-3.5", "chatgpt-4o")):
        return GPT4
    return UNKNOWN


@register_provider("openai")
class OpenAIModel(OpenAICompatibleModel):
    """OpenAI chat completions. Honours OPENAI_BASE_URL (read at the first call).

    ``system_role`` ("system" or "developer") is the role of the system prompt's message and
    ``max_tokens_field`` ("max_tokens" or "max_completion_tokens") the field of the token
    limit; config.ROLE_PARAMS sets them per role as the released harness sent them. The
    model's family (``openai_family``) may override both choices: reasoning models take only
    max_completion_tokens and no temperature but their default.
    """

    provider = "openai"
    api_key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"
    provider_label = "OpenAI models"
    reasoning_options = ("reasoning_effort",)

    bare_names = "gpt-*/o1*/o3*/o4*"
    families = tuple((family.name, reasoning_option(family)) for family in FAMILIES)

    @classmethod
    def name_guess(cls, name: str) -> int:
        return 2 if name.lower().startswith(("gpt-", "o1", "o3", "o4", "chatgpt-")) else 0

    @classmethod
    def family_of(cls, name: str) -> str:
        return openai_family(name).name

    def __init__(self, name: str | None = None, *, system_role: str = "system",
                 max_tokens_field: str = "max_tokens", **params: Any) -> None:
        if system_role not in ("system", "developer"):
            raise ValueError(f"system_role must be 'system' or 'developer', got {system_role!r}")
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_field must be 'max_tokens' or 'max_completion_tokens', "
                             f"got {max_tokens_field!r}")
        super().__init__(name, **params)
        self.system_role = system_role
        self.max_tokens_field = max_tokens_field

    def family(self) -> OpenAIFamily:
        return openai_family(self.name)

    def validate_overrides(self, overrides: dict) -> None:
        super().validate_overrides(overrides)
        family = self.family()
        effort = overrides.get("reasoning_effort")
        if effort is not None and effort not in family.efforts:
            takes = (f"it takes {', '.join(family.efforts)}" if family.efforts
                     else "it is not a reasoning model")
            if not family.open_efforts:
                raise ModelConfigurationError(
                    f"{self.name}: reasoning_effort={effort} is not accepted by the {family.name} "
                    f"family ({takes})")
            events.warning(f"{self.name}: reasoning_effort={effort} is not known for the {family.name} "
                           f"family ({takes}); it is sent as given, for OpenAI to accept or refuse")
        if "temperature" in overrides and not family.takes_temperature(effort):
            raise ModelConfigurationError(
                f"{self.name}: the {family.name} family accepts no temperature but its default"
                + (f" (except with reasoning_effort={family.temperature_with_effort[0]})"
                   if family.temperature_with_effort else ""))

    def parameter_adaptation(self, exc: BaseException) -> Adaptation | None:
        """OpenAI's 400 naming a parameter the model does not take (openai_compatible.py
        ``refused_parameter``)."""
        return refused_parameter(exc, self.overrides)

    # -- one attempt: the family's rules in the base's hooks ----------------------------------
    def token_field(self) -> str:
        return self.family().token_field or self.max_tokens_field

    def takes_temperature(self, request: Request) -> bool:
        return self.family().takes_temperature(request.reasoning_effort)

    def options(self, request: Request) -> dict:
        return {} if request.reasoning_effort is None else {"reasoning_effort": request.reasoning_effort}

    def batch_adapter(self) -> ChatCompletionsBatch:
        return ChatCompletionsBatch(self)

    def reasoning_forecast(self, request: Request) -> tuple[int, str]:
        """The effort's figure (``REASONING_TOKENS_AT_EFFORT``), within max_completion_tokens
        (which counts the reasoning)."""
        family = self.family()
        effort = request.reasoning_effort or family.default_effort
        if effort is None:
            return 0, f"the {family.name} family does not reason"
        tokens = REASONING_TOKENS_AT_EFFORT.get(effort, 0)
        given = "set" if request.reasoning_effort else f"the {family.name} family's default"
        return (min(tokens, request.max_tokens) if request.max_tokens else tokens,
                f"reasoning_effort {effort} ({given}): {tokens:,} tokens a call, our assumption")
