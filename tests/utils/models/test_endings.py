"""The one rule that reads how an answer ended (utils/models/endings.py), in process: a
provider's signal through its table, an unknown signal as "stop", and "stop" without text,
whitespace included, as "empty"; which endings withhold an answer, and their reasons."""
from __future__ import annotations

import enum

import pytest

from cupid.utils.models import endings

TABLE = {"stop": "stop", "length": "length", "content_filter": "filtered", "refusal": "refused",
         "SAFETY": "filtered", "PROHIBITED_CONTENT": "blocked"}


@pytest.mark.parametrize("text", ["", " ", "\n\n", " \t\r\n ", "\u00a0", "\u2028"])
def test_stop_with_no_text_or_whitespace_only_is_empty(text):
    assert endings.ending_of(TABLE, "stop", text) == "empty"
    assert endings.ending_of(TABLE, None, text) == "empty"          # no signal reads as stop
    assert endings.ending_of(TABLE, "unheard_of", text) == "empty"
    assert endings.is_withheld("empty", text) is True


@pytest.mark.parametrize("finish, ending", [
    ("stop", "stop"), ("length", "length"), ("content_filter", "filtered"), ("refusal", "refused"),
    ("PROHIBITED_CONTENT", "blocked"), ("unheard_of", "stop"), (None, "stop")])
def test_a_signal_is_read_through_its_table_and_an_unknown_one_is_stop(finish, ending):
    assert endings.ending_of(TABLE, finish, " An answer. ") == ending


@pytest.mark.parametrize("finish", ["length", "content_filter", "refusal", "PROHIBITED_CONTENT"])
def test_only_stop_turns_empty_without_text(finish):
    assert endings.ending_of(TABLE, finish, "  ") == TABLE[finish]


def test_an_sdk_enum_is_read_by_its_name():
    class Reason(enum.Enum):
        SAFETY = 3

    assert endings.signal_name(Reason.SAFETY) == "SAFETY"
    assert endings.ending_of(TABLE, Reason.SAFETY, "text") == "filtered"
    assert endings.signal_name("stop") == "stop" and endings.signal_name(None) is None
    assert endings.signal_name(7) == "7"


@pytest.mark.parametrize("ending, text, withheld", [
    ("filtered", "", True), ("refused", " \n", True), ("blocked", "", True), ("empty", "", True),
    ("filtered", "Part of an answer", False), ("refused", "I can't help.", False),
    ("stop", "", False), ("length", "", False), ("length", "cut", False)])
def test_what_is_withheld(ending, text, withheld):
    assert endings.is_withheld(ending, text) is withheld


def test_the_six_endings_and_their_groups():
    assert endings.ENDINGS == ("stop", "length", "filtered", "refused", "blocked", "empty")
    assert endings.WITHHOLDING == ("filtered", "refused", "blocked", "empty")
    assert endings.FLAGGED == ("filtered", "refused")


@pytest.mark.parametrize("ending, finish, words, reason", [
    ("filtered", "content_filter", None, "the answer was filtered (content_filter), no text"),
    ("refused", "refusal", "I cannot help with that.", "the model refused (refusal): I cannot help with that."),
    ("blocked", None, "SAFETY", "the prompt was blocked: SAFETY"),
    ("empty", "stop", "", "the answer was empty (stop), no text"),
])
def test_a_withheld_answers_reason(ending, finish, words, reason):
    assert endings.describe(ending, finish, words) == reason
