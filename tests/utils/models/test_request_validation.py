"""A request's messages are checked before any call: each refusal says what is wrong."""
from __future__ import annotations

import pytest

from cupid.utils.models.request import validate_messages


@pytest.mark.parametrize("messages, message", [
    ([], "a request needs at least one message"),
    ([{"role": "system", "content": "x"}], "message 0: role must be 'user' or 'assistant', got 'system'"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": None}],
     "message 1: content must be a string"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
     "the last message must come from the user"),
])
def test_refusals_name_the_problem(messages, message):
    with pytest.raises(ValueError) as info:
        validate_messages(messages)
    assert str(info.value) == message


def test_messages_are_copied_to_role_and_content_only():
    assert validate_messages([{"role": "user", "content": "q", "name": "x"}]) == (
        {"role": "user", "content": "q"},)
