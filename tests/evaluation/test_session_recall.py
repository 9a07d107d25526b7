"""Session recall and precision (evaluation/session_recall.py) on hand-made instance records:
undefined (None, left out of the mean) where an instance has no relevant session or was shown
none, never 0; results.json's block counts each mean's instances."""
from __future__ import annotations

import pytest

from cupid.evaluation.session_recall import instance_selection, session_selection, shown_record
from cupid.evaluation.strategies import Shown
from cupid.utils.dataset import Session, Turn


def record(kind: str, shown, relevant, tokens: int | None = 100) -> dict:
    return {"instance_type": kind, "shown": {"positions": shown, "history_tokens": tokens},
            "history": {"relevant_positions": relevant}}


def test_recall_is_undefined_for_an_instance_without_a_relevant_session():
    out = instance_selection(record("contrastive", [1, 2, 3], []))
    assert out == {"n_shown": 3, "tokens": 100, "recall": None, "precision": 0.0}
    missing = instance_selection({"shown": {"positions": [1], "history_tokens": 5}, "history": {}})
    assert missing["recall"] is None and missing["precision"] == 0.0


def test_precision_is_undefined_when_no_session_was_shown():
    out = instance_selection(record("consistent", [], [2, 4]))
    assert out == {"n_shown": 0, "tokens": 100, "recall": 0.0, "precision": None}


@pytest.mark.parametrize("shown, relevant, recall, precision", [
    ([1, 2, 3, 4], [2, 4], 1.0, 0.5),
    ([4], [2, 4], 0.5, 1.0),
    ([1, 3], [2, 4], 0.0, 0.0),
    ([3, 4, 5], [1, 2, 4, 5], 0.5, 2 / 3),
    ([2, 2, 4], [2, 4], 1.0, 1.0),   # a position shown twice counts once
])
def test_recall_and_precision_of_one_instance(shown, relevant, recall, precision):
    out = instance_selection(record("consistent", shown, relevant))
    assert out["recall"] == pytest.approx(recall) and out["precision"] == pytest.approx(precision)
    assert out["n_shown"] == len(shown)


def test_a_strategy_that_only_rendered_text_has_no_recall_and_no_record_none():
    assert instance_selection(record("consistent", None, [1], tokens=42)) == {
        "n_shown": None, "tokens": 42, "recall": None, "precision": None}
    assert instance_selection({"history": {"relevant_positions": [1]}}) is None
    assert instance_selection({"shown": "all"}) is None


def test_the_run_block_averages_defined_values_only_and_counts_them():
    records = [record("consistent", [1, 2], [2, 4], tokens=100),     # recall 0.5, precision 0.5
               record("consistent", [2, 4], [2, 4], tokens=300),     # recall 1, precision 1
               record("contrastive", [1, 2, 3], [], tokens=200),     # recall undefined, precision 0
               record("changing", [], [5], tokens=None),             # recall 0, precision undefined
               {"instance_type": "changing"}]                        # records nothing: left out
    out = session_selection(records)
    assert out["instances"] == 4
    assert out["recall"] == pytest.approx((0.5 + 1 + 0) / 3) and out["n_recall"] == 3
    assert out["precision"] == pytest.approx((0.5 + 1 + 0) / 3) and out["n_precision"] == 3
    assert out["sessions_shown"] == pytest.approx((2 + 2 + 3 + 0) / 4)
    assert out["history_tokens"] == pytest.approx(200)
    by = out["by_instance_type"]
    assert list(by) == ["consistent", "contrastive", "changing"]
    assert by["consistent"]["recall"] == pytest.approx(0.75) and by["consistent"]["instances"] == 2
    assert by["contrastive"]["recall"] is None and by["contrastive"]["n_recall"] == 0
    assert by["contrastive"]["precision"] == 0.0 and by["contrastive"]["n_precision"] == 1
    assert by["changing"]["recall"] == 0.0 and by["changing"]["precision"] is None
    assert by["changing"]["history_tokens"] is None


def test_only_the_instance_types_present_are_listed_and_nothing_recorded_is_none():
    out = session_selection([record("changing", [1], [1])])
    assert list(out["by_instance_type"]) == ["changing"]
    assert out["recall"] == 1.0 and out["precision"] == 1.0
    assert session_selection([{"instance_type": "consistent"}]) is None
    assert session_selection([]) is None


def test_shown_record_counts_four_characters_a_token():
    s = Session("F", "P.", (Turn("user", "hi"),))
    assert shown_record(Shown("x" * 400, (s,), (3,)), summaries=False) == {"positions": [3], "history_tokens": 100}
    assert shown_record(Shown("x" * 10, (s,), (1, 2)), summaries=False)["history_tokens"] == 2   # round(2.5)
    assert shown_record(Shown("", None, None), summaries=False) == {"positions": None, "history_tokens": 1}
    assert shown_record(Shown("x" * 400, None, None), summaries=True) == {"positions": None, "history_tokens": None}


# ---------------------------------------------------------------------------------------
# What an instance file records of its strategy's choice, shown again on resume
# ---------------------------------------------------------------------------------------
from cupid.evaluation.session_recall import kept_shown, recorded_selection  # noqa: E402
from cupid.evaluation.strategies import strategy_named  # noqa: E402
from cupid.evaluation.steps.layouts import format_session_log  # noqa: E402
from cupid.utils.dataset import Instance  # noqa: E402


def test_shown_record_keeps_rendered_text_and_a_strategys_own_calls():
    s = Session("F", "P.", (Turn("user", "hi"),))
    rendered = shown_record(Shown("notes", None, None, rendered=True, model_usage={"calls": 2}), summaries=False)
    assert rendered == {"positions": None, "history_tokens": 1, "text": "notes", "model_usage": {"calls": 2}}
    plain = shown_record(Shown("log", (s,), (1,)), summaries=False)
    assert "text" not in plain and "model_usage" not in plain


@pytest.mark.parametrize("shown, expected", [
    ({"positions": [1, 3], "history_tokens": 5}, ([1, 3], None, None)),
    ({"positions": [], "history_tokens": 1}, ([], None, None)),
    ({"positions": None, "text": "notes", "model_usage": {"calls": 1}}, (None, "notes", {"calls": 1})),
    ({"positions": [2], "text": "notes", "model_usage": "odd"}, ([2], "notes", None)),
    ({"positions": [2], "text": 7}, ([2], None, None)),
    ({"positions": None, "history_tokens": 3}, None),           # rendered text not kept: ask again
    ({"positions": [4]}, None), ({"positions": [0]}, None), ({"positions": [True]}, None),
    ({"positions": "1"}, None), ({"positions": [1.0]}, None),
    ({"positions": [1], "error": "select() failed"}, None), ({"history_tokens": 3}, None), ("all", None),
])
def test_a_recorded_selection_is_shown_again_only_when_it_is_whole(shown, expected):
    assert recorded_selection({"shown": shown}, n_sessions=3) == expected
    assert recorded_selection({}, n_sessions=3) is None


def test_the_kept_context_is_what_was_shown():
    sessions = tuple(Session(f"F{k}", f"P{k}.", (Turn("user", f"u{k}"),)) for k in (1, 2, 3))
    instance = Instance("i", "p", "consistent", "r", "F1", "P1.", ("q?",), sessions)
    recent = strategy_named("recent:k=2")
    context = kept_shown(recent, instance, {"shown": {"positions": [2, 3], "history_tokens": 9}})
    assert context == Shown(format_session_log(sessions[1:]), sessions[1:], (2, 3))
    assert kept_shown(recent, instance, {"shown": {"positions": [9]}}) is None

    class Notes:
        def render(self, inst):
            return "fresh"

    notes = strategy_named(Notes())
    kept = kept_shown(notes, instance, {"shown": {"positions": None, "text": "kept", "model_usage": {"n": 1}}})
    assert kept == Shown("kept", None, None, rendered=True, model_usage={"n": 1})
    assert kept_shown(notes, instance, {"shown": {"positions": [1]}}) is None   # its text not kept
