"""The error-type step (Table 2): its request carries each session's dialogue under the data's
labels and the two preferences, its answer is read to exactly one of the four types, and its row in STEPS
enters no task's result (the evaluation never asks it, its failure fails no instance)."""
from __future__ import annotations

import pytest

from cupid.evaluation import steps
from cupid.evaluation.aggregate import problems_by_task
from cupid.evaluation.chains import needed_steps
from cupid.evaluation.strategies import PAPER_STRATEGIES
from cupid.evaluation.steps import error_type
from cupid.utils.answers import ParseError
from cupid.utils.dataset import Session, Turn
from cupid.utils.models.answer_layout import Choice

ANALYSIS = "### Analysis\n\nThe inferred preference restates the request; no session is used.\n\n"


@pytest.mark.parametrize("section, kind", [
    ("### Error Type\n\nShallow Inference", "Shallow Inference"),
    ("### Error Type\n\n**Incorrect Context**", "Incorrect Context"),
    ("### Error Type\n\n2. Shallow Inference.", "Shallow Inference"),
    ("**Error Type:** vagueness", "Vagueness"),
    ("## error type\n\nHallucination (nothing in the sessions supports it)", "Hallucination"),
    ("### Error Type: Incorrect Context\n\nIt uses session 3's context.", "Incorrect Context"),
])
def test_the_one_type_named_is_read_through_decoration(section, kind):
    out = error_type.parse(ANALYSIS + section)
    assert out["type"] == kind
    assert out["analysis"] == "The inferred preference restates the request; no session is used."
    assert steps.ERROR_TYPE.check(out) is None


@pytest.mark.parametrize("text, why", [
    ("Shallow Inference.", "no 'Error Type' section"),
    (ANALYSIS + "### Error Type\n\nIncorrect Context or Vagueness", "names 2 of the types"),
    (ANALYSIS + "### Error Type\n\nWrong preference", "names none of the types"),
    (ANALYSIS + "### Error Type\n\n", "names none of the types"),
])
def test_an_answer_naming_no_type_or_several_is_unusable(text, why):
    with pytest.raises(ParseError, match=why):
        error_type.parse(text)


def test_a_stored_type_outside_the_four_is_refused():
    assert "not one of" in steps.ERROR_TYPE.check({"type": "Off Topic", "analysis": ""})
    assert "not an object" in steps.ERROR_TYPE.check(["Vagueness"])


def test_the_request_shows_each_sessions_dialogue_under_its_labels_and_both_preferences():
    """The type is judged on the evidence the model had: each session's dialogue (the labels
    alone once stood for it, so "Hallucination", no clear evidence, was judged without it)."""
    sessions = [Session(f"Factor {i}", f"Preference {i}.", (Turn("user", f"hi {i}"), Turn("assistant", f"hello {i}"),
                                                             Turn("user", f"shorter, please {i}")))
                for i in (1, 2)]
    system, user = error_type.ask(sessions, "Factor 2", "Plan the trip.", "TRUE PREF", "INFERRED PREF").render()
    assert ("### Session 2\n\nContext: Factor 2\n\nPreference revealed: Preference 2.\n\n#### User\n\nhi 2\n\n"
            "#### AI Assistant\n\nhello 2\n\n#### User\n\nshorter, please 2\n\n---") in user
    assert "shorter, please 1\n\n---\n\n### Session 2" in user
    assert "## Current Request\n\nContext: Factor 2\n\nPlan the trip." in user
    assert user.index("TRUE PREF") < user.index("INFERRED PREF")
    assert "then its dialogue" in system
    for kind in error_type.TYPES:  # the four definitions, Table 2's words
        assert f"{kind}: The model" in system


def test_the_row_enters_no_task_so_evaluation_never_asks_it():
    assert steps.ERROR_TYPE in steps.STEPS and steps.ERROR_TYPE.tasks == ()
    assert steps.ERROR_TYPE not in steps.of_task("inference") + steps.of_task("generation")
    for setting in PAPER_STRATEGIES.values():
        for task in setting.tasks:
            assert steps.ERROR_TYPE not in needed_steps(task, setting)
    # A damaged stored classification is no problem of the instance's results.
    record = {"steps": {}, "evaluations": {"s": {"steps": {"error_type": {"status": "done", "output": {"type": "x"}}}}}}
    assert problems_by_task(record, "s") == {"inference": [], "generation": []}


@pytest.mark.parametrize("section, kind", [
    ("### Error Type\n\nVagueness\n\nNot Hallucination: session 2 supports the inference.", "Vagueness"),
    ("### Error Type\n\n\n  Incorrect Context  \nIt is close to Shallow Inference, but uses session 4.",
     "Incorrect Context"),
    ("**Error Type**\nShallow Inference\n(Vagueness would need a generic preference.)", "Shallow Inference"),
])
def test_the_type_is_read_from_the_first_line_of_its_section_only(section, kind):
    """The explanation under the type may name other types; only the first non-empty line
    counts (read over the whole section, these would name two types and be refused)."""
    assert error_type.parse(ANALYSIS + section)["type"] == kind


def test_the_analysis_stops_at_the_error_type_header():
    out = error_type.parse("### Analysis\n\nFirst reason.\nSecond reason.\n**Error Type:** Hallucination")
    assert out == {"type": "Hallucination", "analysis": "First reason.\nSecond reason."}
    assert error_type.parse("### Error Type\n\nVagueness")["analysis"] == ""


def test_the_layout_offers_the_four_types():
    (choice,) = [p for p in error_type.LAYOUT.parts if isinstance(p, Choice)]
    assert choice.options == error_type.TYPES
    assert error_type.LAYOUT.parts[0] == "### Analysis\n\n"


def test_the_ask_reads_its_answer_with_parse_and_declares_the_layout():
    asked = error_type.ask([], "Factor", "Request.", "TRUE", "INFERRED")
    assert asked.prompt == error_type.PROMPT == "evaluation/error_type"
    assert asked.parse is error_type.parse and asked.layout == error_type.LAYOUT
    assert asked.values == {"sessions": "", "context": "Factor", "request": "Request.", "true_preference": "TRUE",
                            "inferred_preference": "INFERRED"}


TYPE_LIST = "Incorrect Context, Shallow Inference, Vagueness, Hallucination"


def test_the_refusals_say_exactly_what_is_wrong():
    with pytest.raises(ParseError) as info:
        error_type.parse("Shallow Inference.")
    assert str(info.value) == "no 'Error Type' section"
    with pytest.raises(ParseError) as info:
        error_type.parse(ANALYSIS + "### Error Type\n\n  \n")
    assert str(info.value) == f"the 'Error Type' line '' names none of the types {TYPE_LIST}"
    long = "x" * 79 + "yz and more words after it"
    with pytest.raises(ParseError) as info:
        error_type.parse(ANALYSIS + f"### Error Type\n\n{long}")
    assert str(info.value) == f"the 'Error Type' line {long[:80]!r} names none of the types {TYPE_LIST}"
    assert error_type.check({"type": "Off Topic"}) == f"type 'Off Topic' is not one of {TYPE_LIST}"
    assert error_type.check({"analysis": ""}) == f"type None is not one of {TYPE_LIST}"
    assert error_type.check({"type": "Vagueness"}) is None
