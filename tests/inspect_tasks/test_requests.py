"""The parameters each model family is sent through inspect (our adapters' rules as inspect's
GenerateConfig) and the grader's OpenAI requests made the release's (a developer message and
max_completion_tokens, where inspect's provider would send a system message and max_tokens)."""
from __future__ import annotations

import pytest

from inspect_runs import require_inspect

require_inspect()

from inspect_ai.model import GenerateConfig, get_model  # noqa: E402

from cupid.evaluation.steps import decompose, match  # noqa: E402
from cupid.inspect_tasks.requests import config_of, release_config, release_parameters  # noqa: E402


def config(model: str, role: str = "evaluated", max_tokens: int | None = None) -> dict:
    return config_of(release_parameters(model, role, max_tokens)[0]).model_dump(exclude_none=True)


@pytest.mark.parametrize("model, expected", [
    ("openai/gpt-4.1-nano-2025-04-14", {"temperature": 0, "max_tokens": 8192}),
    ("openai/o3-mini", {"max_tokens": 8192}),                              # no temperature but the default
    ("anthropic/claude-3-7-sonnet-20250219", {"temperature": 1, "max_tokens": 8192, "reasoning_tokens": 1024}),
    ("anthropic/claude-3-5-sonnet-20241022", {"temperature": 0, "max_tokens": 8192}),
    ("anthropic/claude-opus-4-7", {"max_tokens": 8192}),                   # takes no sampling parameter
    ("google/gemini-2.0-flash", {"temperature": 0, "max_tokens": 8192}),
    ("together/meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo", {"temperature": 0, "max_tokens": 8192}),
    ("mockllm/model", {"temperature": 0, "max_tokens": 8192}),             # a provider we do not know: the role's
])
def test_each_family_gets_the_parameters_cupid_eval_sends_it(model, expected):
    assert config(model) == expected


def test_the_decomposer_keeps_its_own_limit():
    assert config("openai/gpt-4o-2024-11-20", "evaluator", decompose.PARAMS["max_tokens"]) == {"temperature": 0, "max_tokens": 4096}


@pytest.fixture
def openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def test_the_graders_openai_request_is_the_releases(openai_key):
    ask = match.ask("The user wants it short.", ["Is it short?"])
    chosen = release_config(get_model("openai/gpt-4o-2024-11-20"), "evaluator", ask)
    system_prompt, user_prompt = ask.render()
    assert chosen.max_tokens is None and chosen.temperature == 0
    assert chosen.extra_body == {"max_completion_tokens": 8192,
                                 "messages": [{"role": "developer", "content": system_prompt},
                                              {"role": "user", "content": user_prompt}]}


def test_a_reasoning_grader_needs_nothing_laid_over(openai_key):
    ask = match.ask("The user wants it short.", ["Is it short?"])
    chosen = release_config(get_model("openai/o3-mini", responses_api=False), "evaluator", ask)
    assert chosen.extra_body is None and chosen.max_tokens == 8192 and chosen.temperature is None


def test_what_the_user_sets_for_the_grader_role_wins(openai_key):
    ask = decompose.ask("The user wants it short.")
    grader = get_model("openai/gpt-4o-2024-11-20", config=GenerateConfig(temperature=0.5, max_tokens=100))
    chosen = release_config(grader, "evaluator", ask)
    assert chosen.temperature == 0.5 and chosen.max_tokens == 100
    assert "max_completion_tokens" not in chosen.extra_body  # one token limit, the user's
