"""Prices and context windows of the models the harness knows, in one dated table.

``price_of(name)`` feeds the cost estimate (usage.py ``estimate_cost``, ``--dry_run``);
``context_window_of(name)`` feeds the seam's check that a request fits before it is sent
(model.py). A model missing here costs ``None`` (unknown) and is sent unchecked.

Prices are USD per million tokens (input, output) at the online rate; reasoning and
thinking tokens are billed as output by every provider (they are counted in the
completion tokens, see request.py ``Usage``). The context window is the total of prompt
and output tokens the model accepts.

Table compiled on ``TABLE_DATE`` from the providers' own model and pricing pages
(``SOURCES``). Providers change prices: check the pages before budgeting a large run.
"""
from __future__ import annotations

import re
from typing import NamedTuple

TABLE_DATE = "2026-11-23"
SOURCES = {
    "openai": "https://developers.openai.com/api/docs/models (each model's page: context "
              "window, price per 1M tokens) and https://developers.openai.com/api/docs/pricing",
    "anthropic": "https://docs.claude.com/en/docs/about-claude/models/overview, "
                 "https://docs.claude.com/en/docs/about-claude/pricing and each model's page "
                 "(https://platform.claude.com/docs/en/models/MODEL/overview)",
    "google": "https://ai.google.dev/gemini-api/docs/models and "
              "https://ai.google.dev/gemini-api/docs/pricing (prompts up to 200k tokens)",
    "together": "https://www.together.ai/pricing and https://docs.together.ai/docs/serverless-models",
}


class ModelFacts(NamedTuple):
    input_per_mtok: float | None
    output_per_mtok: float | None
    context_window: int | None


_GPT41_WINDOW = 1_047_576
_GEMINI_WINDOW = 1_048_576

MODELS: dict[str, ModelFacts] = {
    # -- OpenAI: the paper's models (Table 8) ---------------------------------------------
    "gpt-4o-2024-11-20": ModelFacts(2.50, 10.00, 128_000),
    "gpt-4o-2024-08-06": ModelFacts(2.50, 10.00, 128_000),
    "gpt-4o-2024-05-13": ModelFacts(5.00, 15.00, 128_000),
    "gpt-4o": ModelFacts(2.50, 10.00, 128_000),
    "gpt-4o-mini": ModelFacts(0.15, 0.60, 128_000),
    "gpt-4o-mini-2024-07-18": ModelFacts(0.15, 0.60, 128_000),
    "gpt-4.1-2025-04-14": ModelFacts(2.00, 8.00, _GPT41_WINDOW),
    "gpt-4.1": ModelFacts(2.00, 8.00, _GPT41_WINDOW),
    "gpt-4.1-mini-2025-04-14": ModelFacts(0.40, 1.60, _GPT41_WINDOW),
    "gpt-4.1-mini": ModelFacts(0.40, 1.60, _GPT41_WINDOW),
    "gpt-4.1-nano-2025-04-14": ModelFacts(0.10, 0.40, _GPT41_WINDOW),
    "gpt-4.1-nano": ModelFacts(0.10, 0.40, _GPT41_WINDOW),
    "o1-2024-12-17": ModelFacts(15.00, 60.00, 200_000),
    "o1": ModelFacts(15.00, 60.00, 200_000),
    "o3-mini-2025-01-31": ModelFacts(1.10, 4.40, 200_000),
    "o3-mini": ModelFacts(1.10, 4.40, 200_000),
    # -- OpenAI: current models ------------------------------------------------------------
    "o3-2025-04-16": ModelFacts(2.00, 8.00, 200_000),
    "o3": ModelFacts(2.00, 8.00, 200_000),
    "o4-mini-2025-04-16": ModelFacts(1.10, 4.40, 200_000),
    "o4-mini": ModelFacts(1.10, 4.40, 200_000),
    "gpt-5-2025-08-07": ModelFacts(1.25, 10.00, 400_000),
    "gpt-5": ModelFacts(1.25, 10.00, 400_000),
    "gpt-5-mini-2025-08-07": ModelFacts(0.25, 2.00, 400_000),
    "gpt-5-mini": ModelFacts(0.25, 2.00, 400_000),
    "gpt-5-nano-2025-08-07": ModelFacts(0.05, 0.40, 400_000),
    "gpt-5-nano": ModelFacts(0.05, 0.40, 400_000),
    "gpt-5-chat-latest": ModelFacts(1.25, 10.00, 128_000),
    "gpt-5.1-2025-11-13": ModelFacts(1.25, 10.00, 400_000),
    "gpt-5.1": ModelFacts(1.25, 10.00, 400_000),
    "gpt-5.1-chat-latest": ModelFacts(1.25, 10.00, 128_000),
    # -- Anthropic -------------------------------------------------------------------------
    "claude-3-5-sonnet-20241022": ModelFacts(3.00, 15.00, 200_000),
    "claude-3-5-sonnet-20240620": ModelFacts(3.00, 15.00, 200_000),
    "claude-3-7-sonnet-20250219": ModelFacts(3.00, 15.00, 200_000),
    "claude-3-5-haiku-20241022": ModelFacts(0.80, 4.00, 200_000),
    "claude-sonnet-4-20250514": ModelFacts(3.00, 15.00, 200_000),
    "claude-sonnet-4-5-20250929": ModelFacts(3.00, 15.00, 200_000),
    "claude-sonnet-4-5": ModelFacts(3.00, 15.00, 200_000),
    "claude-opus-4-20250514": ModelFacts(15.00, 75.00, 200_000),
    "claude-opus-4-1-20250805": ModelFacts(15.00, 75.00, 200_000),
    "claude-opus-4-1": ModelFacts(15.00, 75.00, 200_000),
    "claude-opus-4-5-20251101": ModelFacts(5.00, 25.00, 200_000),
    "claude-opus-4-5": ModelFacts(5.00, 25.00, 200_000),
    "claude-haiku-4-5-20251001": ModelFacts(1.00, 5.00, 200_000),
    "claude-haiku-4-5": ModelFacts(1.00, 5.00, 200_000),
    # Adaptive-thinking models (platform.claude.com/docs/en/models/<model>/overview).
    "claude-opus-4-6": ModelFacts(5.00, 25.00, 1_000_000),
    "claude-opus-4-7": ModelFacts(5.00, 25.00, 1_000_000),
    "claude-sonnet-5": ModelFacts(2.00, 10.00, 1_000_000),
    "claude-opus-5": ModelFacts(5.00, 25.00, 1_000_000),
    "claude-opus-5-5": ModelFacts(4.00, 20.00, 1_000_000),
    "claude-fable-5-1": ModelFacts(10.00, 50.00, 1_000_000),
    # -- Google: the release's Gemini models, then current ones ----------------------------
    "gemini-2.0-pro-exp-02-05": ModelFacts(None, None, 2_097_152),  # experimental: unpriced
    "gemini-2.0-flash-thinking-exp-01-21": ModelFacts(None, None, _GEMINI_WINDOW),
    "gemini-2.0-flash": ModelFacts(0.10, 0.40, _GEMINI_WINDOW),
    "gemini-2.0-flash-lite": ModelFacts(0.075, 0.30, _GEMINI_WINDOW),
    "gemini-2.5-pro": ModelFacts(1.25, 10.00, _GEMINI_WINDOW),
    "gemini-2.5-flash": ModelFacts(0.30, 2.50, _GEMINI_WINDOW),
    "gemini-2.5-flash-lite": ModelFacts(0.10, 0.40, _GEMINI_WINDOW),
    # -- Together (the paper's Llama 3.1) ----------------------------------------------------
    "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo": ModelFacts(0.18, 0.18, 131_072),
    "meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo": ModelFacts(0.88, 0.88, 131_072),
    "meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo": ModelFacts(3.50, 3.50, 130_815),
    # -- Embedded (free; its own loader bounds the context) ---------------------------------
    "smollm2-135m": ModelFacts(0.0, 0.0, None),
}

# A dated snapshot (``gpt-5-mini-2025-08-07``, ``claude-sonnet-4-5-20250929``) not listed
# above is looked up under its alias, whose price and window the providers keep for every
# snapshot of the same model.
_SNAPSHOT_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


def facts_of(name: str | None) -> ModelFacts | None:
    if not name:
        return None
    facts = MODELS.get(name)
    if facts is None:
        alias = _SNAPSHOT_SUFFIX.sub("", name)
        if alias != name:
            facts = MODELS.get(alias)
    return facts


def price_of(name: str | None) -> tuple[float, float] | None:
    """(input, output) USD per million tokens, or None when unknown."""
    facts = facts_of(name)
    if facts is None or facts.input_per_mtok is None or facts.output_per_mtok is None:
        return None
    return facts.input_per_mtok, facts.output_per_mtok


def context_window_of(name: str | None) -> int | None:
    """Prompt plus output tokens the model accepts, or None when unknown."""
    facts = facts_of(name)
    return None if facts is None else facts.context_window


def priced_models() -> dict[str, tuple[float, float]]:
    """{name: (input, output)} of every model the table prices."""
    return {name: (f.input_per_mtok, f.output_per_mtok) for name, f in MODELS.items()
            if f.input_per_mtok is not None and f.output_per_mtok is not None}
