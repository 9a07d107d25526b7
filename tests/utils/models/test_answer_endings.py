"""The providers' awkward answers through their real SDKs against the loopback server, which
answers each shape as its provider documents it: how each ended (utils/models/endings.py), how
often it is asked, and that every billed token is counted.

For every shape: the ending, the requests sent (a withheld answer is asked again once, a
blocked prompt never), the refusal's own words in the reason, and the tokens the run counted
(the step's usage and the model's tracker) equal to what the server billed.
"""
from __future__ import annotations

import pytest

from cupid.utils.models.reask import ask_until_usable
from cupid.utils.models.call_errors import AnswerWithheld
from cupid.utils.models.registry import resolve_model
from cupid.utils.models.usage import cost_of
from awkward_shapes import CLAUDE, FRAGMENT, GEMINI, GPT, SHAPES, SORRY
from fake_llm_server import FakeResponse


def ask(model):
    return ask_until_usable(model, "Be brief.", [{"role": "user", "content": "What does the user prefer?"}],
                            lambda text: text, tries=3)


@pytest.mark.parametrize("model_name, answer, ending, withheld, words",
                         [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_each_shape_ends_is_asked_and_is_counted(fake_llm_env, model_name, answer, ending, withheld, words):
    fake_llm_env.responder = lambda req: answer
    model = resolve_model(model_name, role="evaluated")
    if withheld:
        with pytest.raises(AnswerWithheld) as info:
            ask(model)
        result = info.value.answer
        assert words in info.value.reason and ending in info.value.reason
        # Asked again once (the same request ends the same way); a blocked prompt never.
        assert len(fake_llm_env.requests) == (1 if ending == "blocked" else 2)
        assert result.raws == [""] * len(fake_llm_env.requests) and result.value is None
    else:
        result = ask(model)
        assert result.value == FRAGMENT and result.flagged == ending  # read as given, marked
        assert len(fake_llm_env.requests) == 1
    assert result.endings == [ending] * len(fake_llm_env.requests)
    billed = fake_llm_env.billed_totals()
    assert billed["prompt_tokens"] > 0 and (billed["completion_tokens"] > 0 or ending == "blocked")
    counted = model.usage.snapshot(model.name)
    for name in ("prompt_tokens", "completion_tokens"):
        assert result.usage[name] == counted[name] == billed[name], name
    assert counted["endings"][ending] == len(fake_llm_env.requests)
    assert counted["retries"] == 0  # not a transport retry: the re-ask is the step's


def test_a_refusal_without_text_fails_the_run_step_in_its_words(fake_llm_env):
    """OpenAI's message.refusal is the step's reason, not "malformed response"."""
    fake_llm_env.responder = lambda req: FakeResponse(refusal=SORRY)
    model = resolve_model(GPT, role="evaluated")
    with pytest.raises(AnswerWithheld) as info:
        model.chat("", [{"role": "user", "content": "q"}])
    assert info.value.reason == f"the model refused (message.refusal): {SORRY}"
    assert "malformed" not in str(info.value)


@pytest.mark.parametrize("model_name", [GPT, CLAUDE, GEMINI])
def test_cached_prompt_tokens_are_counted_and_priced(fake_llm_env, model_name):
    fake_llm_env.responder = lambda req: FakeResponse(text="Short answers.", cached_tokens=3)
    model = resolve_model(model_name, role="evaluated")
    result = ask(model)
    billed = fake_llm_env.billed_totals()
    assert result.usage["cached_prompt_tokens"] == billed["cached_tokens"] == 3
    assert result.usage["prompt_tokens"] == billed["prompt_tokens"]  # Anthropic's parts summed
    full = cost_of(model.name, {**result.usage, "cached_prompt_tokens": 0})
    assert cost_of(model.name, result.usage) < full


def test_a_retried_transport_failure_then_a_withheld_answer(fake_llm_env):
    """A 5xx is retried by the seam (not billed); the withheld answers after it are asked
    once more and each billed answer is counted."""
    fake_llm_env.script(FakeResponse(status=503), FakeResponse(text=FRAGMENT, finish="content_filter",
                                                               hide_text=True))
    fake_llm_env.responder = lambda req: FakeResponse(text=FRAGMENT, finish="content_filter", hide_text=True)
    model = resolve_model(GPT, role="evaluated")
    with pytest.raises(AnswerWithheld) as info:
        ask(model)
    assert len(fake_llm_env.requests) == 3 and len(fake_llm_env.billed) == 2
    assert info.value.answer.usage["completion_tokens"] == fake_llm_env.billed_totals()["completion_tokens"]
    assert model.usage.snapshot()["retries"] == 1
