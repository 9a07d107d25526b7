"""The paper's published numbers (Tables 1, 3, 9, 10, 11), for side-by-side comparison.

The numbers live in ``data/published/table*.json``, one file per table, each naming the
table it was transcribed from. P/R/F1 are percents and judge scores are 1-10, as printed.
Models go by the paper's display names; ``paper_model_name`` maps the API names of
Table 8 (with or without a ``provider:`` prefix, Bedrock ids included) to them.

Published numbers are only shown next to ours for the exact model versions of Table 8:
another snapshot of a model (e.g. gpt-4o-2024-11-20, the evaluator) is a different model.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache

from ... import config

TABLE_FILES = ("table1", "table3", "table9", "table10", "table11")

# The paper's row order (Tables 1, 3, 9, 10, 11).
PAPER_MODELS = (
    "Mistral 7B", "Qwen2.5 72B", "Llama 3.1 405B", "DeepSeek-R1", "GPT-4o", "o3-mini",
    "Claude 3.5 Sonnet", "Claude 3.7 Sonnet", "Gemini 2.0 Flash Thinking", "Gemini 2.0 Pro",
)

# API names of the versions in Table 8 -> the paper's display names. Keys are lower case.
# Table 8 prints GPT-4o's version as "2024-08-07"; the OpenAI snapshot is 2024-08-06.
MODEL_NAMES: dict[str, str] = {
    "gpt-4o-2024-08-06": "GPT-4o",
    "o3-mini-2025-01-31": "o3-mini",
    "o3-mini": "o3-mini",  # the alias has only ever pointed at 2025-01-31
    "claude-3-7-sonnet-20250219": "Claude 3.7 Sonnet",
    "anthropic.claude-3-7-sonnet-20250219-v1:0": "Claude 3.7 Sonnet",
    "us.anthropic.claude-3-7-sonnet-20250219-v1:0": "Claude 3.7 Sonnet",
    "claude-3-5-sonnet-20240620": "Claude 3.5 Sonnet",
    "anthropic.claude-3-5-sonnet-20240620-v1:0": "Claude 3.5 Sonnet",
    "us.anthropic.claude-3-5-sonnet-20240620-v1:0": "Claude 3.5 Sonnet",
    "meta-llama/meta-llama-3.1-405b-instruct-turbo": "Llama 3.1 405B",
    "mistralai/mistral-7b-instruct-v0.3": "Mistral 7B",
    "qwen/qwen2.5-72b-instruct-turbo": "Qwen2.5 72B",
    "deepseek-ai/deepseek-r1": "DeepSeek-R1",
    "gemini-2.0-flash-thinking-exp-01-21": "Gemini 2.0 Flash Thinking",
    "gemini-2.0-pro-exp-02-05": "Gemini 2.0 Pro",
}

_PROVIDER_PREFIX = re.compile(r"^(openai|anthropic|bedrock|together|google|vertex|gemini|vllm|"
                              r"local-server):", re.IGNORECASE)


def paper_model_name(api_name: str | None) -> str | None:
    """The paper's display name of a model, or None when the paper did not test it."""
    if not api_name:
        return None
    name = _PROVIDER_PREFIX.sub("", api_name.strip()).lower()
    if name in MODEL_NAMES:
        return MODEL_NAMES[name]
    # A display name given directly ("GPT-4o") is accepted as itself.
    return next((paper_name for paper_name in PAPER_MODELS if api_name.strip().lower() == paper_name.lower()), None)


def scorer_kind(scorer: str | None, matcher: str | None = None) -> str:
    """'prefmatcher' when PrefMatcher matched (Table 11), else 'gpt-4o' (Tables 1, 3, 9, 10)."""
    text = f"{scorer or ''} {matcher or ''}".lower()
    return "prefmatcher" if "prefmatcher" in text else "gpt-4o"


@lru_cache(maxsize=None)
def load_table(key: str) -> dict:
    return json.loads((config.PUBLISHED_DIR / f"{key}.json").read_text(encoding="utf-8"))


def lookup(paper_model: str | None, task: str, setting: str, instance_type: str = "all",
           scorer: str = "gpt-4o") -> dict | None:
    """Published numbers for one cell, or None.

    Returns ``{"table": "Table 1", "values": {...}}``: for inference the values are
    ``precision``, ``recall`` and ``f1`` in percent, for generation ``score``.
    """
    if not paper_model:
        return None
    for key in TABLE_FILES:
        table = load_table(key)
        if table["task"] != task or table["scorer"] != scorer:
            continue
        for column, where in table["columns"].items():
            if where["setting"] != setting or where["instance_type"] != instance_type:
                continue
            for row in table["rows"]:
                if row["model"] == paper_model and column in row["values"]:
                    return {"table": table["table"], "values": dict(row["values"][column])}
    return None
