"""The shared re-ask loop (utils/models/reask.py): what a re-ask sends, the variants,
and what a failure carries."""
from __future__ import annotations

import pytest

from cupid.utils.models.reask import UnusableAnswer, ask_until_usable
from cupid.utils.models.call_errors import ModelCallFailed
from cupid.utils.models.request import Completion, Usage


class Recorder:
    """Answers from a list and keeps every (messages, variant) it was sent."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.sent = []

    def generate(self, system, messages, *, variant=0, **request):
        self.sent.append((list(messages), variant, request))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Completion(text=answer, usage=Usage(prompt_tokens=3, completion_tokens=2))


def number(text: str) -> int:
    if not text.strip().isdigit():
        raise ValueError(f"{text!r} is not a number")
    return int(text)


def test_blind_reask_repeats_the_request_with_new_variants():
    model = Recorder(["no", "7"])
    answer = ask_until_usable(model, "sys", [{"role": "user", "content": "q"}], number, tries=3,
                              first_variant=4, temperature=0)
    assert answer.value == 7 and answer.raws == ["no", "7"] and answer.attempts == 2
    assert [s[0] for s in model.sent] == [[{"role": "user", "content": "q"}]] * 2
    assert [s[1] for s in model.sent] == [4, 5] and model.sent[0][2] == {"temperature": 0}
    assert answer.usage == {"prompt_tokens": 6, "completion_tokens": 4}


def test_reask_with_feedback_shows_the_unusable_answer_and_reason():
    model = Recorder(["", "8"])
    ask_until_usable(model, "sys", [{"role": "user", "content": "q"}], number, tries=2,
                     show_invalid="Bad: {reason}")
    second = model.sent[1][0]
    assert second[1] == {"role": "assistant", "content": "(empty answer)"}
    assert second[2] == {"role": "user", "content": "Bad: '' is not a number"}


def test_previous_failure_is_shown_on_the_first_attempt():
    model = Recorder(["9"])
    ask_until_usable(model, "sys", [{"role": "user", "content": "q"}], number, tries=1,
                     show_invalid="Bad: {reason}", previous=("x", "not a number"), first_variant=3)
    assert model.sent[0][0][1:] == [{"role": "assistant", "content": "x"},
                                    {"role": "user", "content": "Bad: not a number"}]
    assert model.sent[0][1] == 3


def test_failure_carries_every_answer_and_where_to_continue():
    model = Recorder(["a", "b"])
    with pytest.raises(UnusableAnswer) as caught:
        ask_until_usable(model, "sys", [{"role": "user", "content": "q"}], number, tries=2, first_variant=1)
    assert caught.value.answer.raws == ["a", "b"] and caught.value.answer.next_variant == 3
    assert caught.value.reason == "'b' is not a number" and caught.value.answer.value is None


def test_a_failed_call_stops_at_once_and_is_named():
    error = ModelCallFailed("m", "HTTP 500", 3)
    model = Recorder(["a", error, "5"])
    with pytest.raises(ModelCallFailed) as caught:
        ask_until_usable(model, "sys", [{"role": "user", "content": "q"}], number, tries=3)
    # The model layer's own error, not wrapped, carrying what was received before it.
    assert caught.value is error and caught.value.answer.raws == ["a"]
    assert caught.value.answer.next_variant == 1 and len(model.answers) == 1
