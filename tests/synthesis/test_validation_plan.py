"""What the validation checks and concludes (synthesis/validation_plan.py), in process: the
checks of each instance type, the contrasting preference recovered from the series, every
entry's verdict over its sessions, and the instance's verdicts, where an entry that decides
"not solvable" (or "not challenging") decides it whatever another entry's failed extraction."""
from __future__ import annotations

import json

import pytest

from cupid.synthesis.validation.plan import (CONTRASTING, CURRENT, EARLIER, EXPRESSED, FAILED, NOT_EXPRESSED, REQUEST,
                                             Check, EntryResult, conclude, consistent_instances, known_checklists,
                                             plan_checks, positions_of, recovered_contrast, session_at)
from cupid.utils.dataset import Instance, Session, Turn


def entry(role: str, verdict: str) -> dict:
    return {"preference_role": role, "verdict": verdict}


# ---------------------------------------------------------------------------------------
# conclude
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("prior, on_request, solvable, challenging", [
    ([EXPRESSED, EXPRESSED], [NOT_EXPRESSED], True, True),
    ([EXPRESSED, NOT_EXPRESSED], [NOT_EXPRESSED], False, True),
    # a failed extraction cannot overturn an entry that already decides "not solvable"
    ([NOT_EXPRESSED, FAILED], [NOT_EXPRESSED], False, True),
    ([FAILED, NOT_EXPRESSED], [NOT_EXPRESSED], False, True),
    ([FAILED, EXPRESSED], [NOT_EXPRESSED], None, True),
    ([EXPRESSED], [EXPRESSED, FAILED], True, False),       # nor one that decides "not challenging"
    ([EXPRESSED], [FAILED, EXPRESSED], True, False),
    ([EXPRESSED], [FAILED, NOT_EXPRESSED], True, None),
    ([NOT_EXPRESSED], [EXPRESSED], False, False),
    ([], [], True, True),
])
def test_an_entry_that_decides_wins_over_a_failed_one(prior, on_request, solvable, challenging):
    roles = [CURRENT, CONTRASTING, EARLIER]
    entries = [entry(roles[k % 3], v) for k, v in enumerate(prior)] + [entry(REQUEST, v) for v in on_request]
    assert conclude(entries) == (solvable, challenging)


def test_request_entries_never_decide_solvable_nor_session_entries_challenging():
    assert conclude([entry(REQUEST, NOT_EXPRESSED), entry(CURRENT, EXPRESSED)]) == (True, True)
    assert conclude([entry(EARLIER, NOT_EXPRESSED), entry(REQUEST, NOT_EXPRESSED)]) == (False, True)
    assert conclude([entry(CONTRASTING, EXPRESSED), entry(REQUEST, EXPRESSED)]) == (True, False)


# ---------------------------------------------------------------------------------------
# EntryResult
# ---------------------------------------------------------------------------------------
def test_an_entry_is_expressed_by_a_kept_fragment_even_where_another_session_failed():
    r = EntryResult(CURRENT, "Pref.", 2, "Is it short?")
    r.add(1, None, [], [])
    r.add(3, {"rating": 4}, ["keep it short"], ["invented"])
    assert r.verdict == EXPRESSED
    d = r.to_dict()
    assert d["fragments"] == [{"session": 3, "text": "keep it short"}]
    assert d["dropped_fragments"] == [{"session": 3, "text": "invented"}]
    assert d["failed_sessions"] == [1] and d["ratings"] == {"3": 4} and d["rating"] == 4
    assert (d["preference_role"], d["preference"], d["index"], d["entry"]) == (CURRENT, "Pref.", 2, "Is it short?")
    assert "note" not in d


def test_an_entry_without_a_kept_fragment_is_failed_where_a_session_failed_else_not_expressed():
    r = EntryResult(CURRENT, "Pref.", 1, "Q?")
    r.add(1, {"rating": 2}, [], ["paraphrased, not in the messages"])
    assert r.verdict == NOT_EXPRESSED
    assert r.to_dict()["rating"] is None and r.to_dict()["ratings"] == {}
    assert "failed_sessions" not in r.to_dict()
    r.add(2, None, [], [])
    assert r.verdict == FAILED and r.to_dict()["failed_sessions"] == [2]


def test_an_entry_rating_is_its_most_explicit_expression():
    r = EntryResult(EARLIER, "Pref.", 1, "Q?", no_session=True)
    r.add(1, {"rating": 6}, ["a"], [])
    r.add(2, {"rating": 3}, ["b"], [])
    r.add(4, {"rating": None}, ["c"], [])
    r.add(5, {"rating": 1}, [], [])          # nothing kept there: its rating does not count
    d = r.to_dict()
    assert d["rating"] == 3 and d["ratings"] == {"1": 6, "2": 3, "4": None}
    assert d["note"] == "no prior session holds this preference"
    assert EntryResult(CURRENT, "P", 1, "Q").to_dict()["verdict"] == NOT_EXPRESSED


# ---------------------------------------------------------------------------------------
# plan_checks
# ---------------------------------------------------------------------------------------
def s(factor: str, preference: str, text: str = "hello") -> Session:
    return Session(factor, preference, (Turn("user", text), Turn("assistant", "ok")))


def inst(kind: str, sessions, factor="Work", current="Short answers.", metadata=None, pid="p1") -> Instance:
    extra = {} if metadata is None else {"metadata": metadata}
    return Instance(f"{pid}-{kind}", pid, kind, "Write the memo.", factor, current, ("Is it short?",),
                    tuple(sessions), extra=extra)


def test_a_consistent_instance_checks_its_current_preference_and_its_request():
    i = inst("consistent", [s("Work", "Short answers."), s("Home", "Long stories."), s("Work", " Short answers. ")])
    checks, unchecked = plan_checks(i)
    assert checks == [Check(CURRENT, "Short answers.", (1, 3)), Check(REQUEST, "Short answers.", (0,))]
    assert unchecked == []
    assert positions_of(i, "Long stories.") == (2,) and positions_of(i, "Other.") == ()


def test_a_recorded_contrasting_and_earlier_preference_are_checked():
    sessions = [s("Work", "Short answers."), s("Home", "Long stories.")]
    checks, unchecked = plan_checks(inst("contrastive", sessions, metadata={"contrastive_preference": "Long stories."}))
    assert checks[1] == Check(CONTRASTING, "Long stories.", (2,)) and unchecked == []
    sessions = [s("Work", "Bullet points."), s("Work", "Short answers.")]
    checks, unchecked = plan_checks(inst("changing", sessions, metadata={"original_preference": "Bullet points."}))
    assert checks == [Check(CURRENT, "Short answers.", (2,)), Check(EARLIER, "Bullet points.", (1,)),
                      Check(REQUEST, "Short answers.", (0,))]
    assert unchecked == []


def test_a_changing_instance_without_metadata_reads_its_earlier_preference_from_its_sessions():
    sessions = [s("Work", "Bullet points."), s("Home", "Long stories."), s("Work", "Short answers.")]
    checks, unchecked = plan_checks(inst("changing", sessions, metadata={"original_preference": "  "}))
    assert checks[1] == Check(EARLIER, "Bullet points.", (1,)) and unchecked == []
    two = sessions + [s("Work", "Tables.")]
    checks, unchecked = plan_checks(inst("changing", two))
    assert [c.role for c in checks] == [CURRENT, REQUEST]
    assert unchecked == ["earlier preference: not recorded in the data and not one preference of the current "
                         "factor's other sessions"]


def test_the_contrasting_preference_is_recovered_from_the_series():
    shared = [s("Work", "Short answers.", "a"), s("Home", "Long stories.", "b")]
    consistent = inst("consistent", shared + [s("Gym", "Metric units.", "c"), s("Gym", "Metric units.", "d")])
    contrastive = inst("contrastive", shared + [s("Travel", "Window seats.", "e"), s("Travel", "Window seats.", "f")])
    assert recovered_contrast(contrastive, consistent)[0] == "Window seats."
    checks, unchecked = plan_checks(contrastive, consistent)
    assert checks[1] == Check(CONTRASTING, "Window seats.", (3, 4))
    assert unchecked == ["contrasting preference: not recorded in the data (no metadata.contrastive_preference); "
                         "read from the series as B.5 builds it (the sessions absent from the consistent instance)"]
    # without the series' consistent instance: left unchecked, and said so
    checks, unchecked = plan_checks(contrastive, None)
    assert [c.role for c in checks] == [CURRENT, REQUEST]
    assert unchecked[0].endswith("so it is left unchecked")
    assert "no consistent instance" in unchecked[0]


@pytest.mark.parametrize("added", [
    [s("Travel", "Window seats.", "e"), s("Travel", "Aisle seats.", "f")],   # two preferences
    [s("Work", "Long answers.", "e")],                                        # of the current factor
    [],                                                                       # none added
])
def test_a_series_that_does_not_tell_one_contrasting_preference_leaves_it_unchecked(added):
    shared = [s("Work", "Short answers.", "a")]
    consistent = inst("consistent", shared)
    contrastive = inst("contrastive", shared + added)
    preference, why = recovered_contrast(contrastive, consistent)
    assert preference is None
    assert why == (f"the sessions absent from the consistent instance hold {len({x.contextual_preference for x in added})} "
                   f"preferences, not one of another factor")


def test_session_at_zero_is_the_request_and_consistent_instances_are_keyed_by_persona():
    i = inst("consistent", [s("Work", "Short answers.", "first")])
    assert session_at(i, 1).dialogue[0].content == "first"
    request = session_at(i, 0)
    assert [(t.role, t.content) for t in request.dialogue] == [("user", "Write the memo.")]
    others = [inst("changing", [], pid="p1"), inst("consistent", [], pid="p2"), i]
    assert consistent_instances(others) == {"p1": i, "p2": others[1]}


def test_known_checklists_prefer_the_synthesis_files(tmp_path):
    a = inst("consistent", [], current="Short answers.")
    b = Instance("p1-changing", "p1", "changing", "r", "Work", "Bullets.", ("Bullets?",), ())
    (tmp_path / "personas" / "p1").mkdir(parents=True)
    (tmp_path / "personas" / "p1" / "checklists.json").write_text(json.dumps(
        {"Short answers. ": ["Is it under 100 words?"], "Tables.": ["A table?"], "Empty.": []}))
    book = known_checklists(tmp_path, [a, b])
    assert book[("p1", "Short answers.")] == (["Is it under 100 words?"], "synthesis")
    assert book[("p1", "Bullets.")] == (["Bullets?"], "instance")
    assert book[("p1", "Tables.")] == (["A table?"], "synthesis")
    assert ("p1", "Empty.") not in book
    assert known_checklists(tmp_path / "none", [a]) == {("p1", "Short answers."): (["Is it short?"], "instance")}


def test_a_recorded_earlier_preference_wins_over_the_sessions_reading():
    sessions = [s("Work", "Bullets."), s("Work", "Tables."), s("Work", "Short answers.")]
    checks, unchecked = plan_checks(inst("changing", sessions, metadata={"original_preference": "Tables."}))
    assert checks[1] == Check(EARLIER, "Tables.", (2,)) and unchecked == []


def test_the_reason_a_contrasting_preference_is_left_unchecked_is_said_whole():
    contrastive = inst("contrastive", [s("Work", "Short answers.")])
    assert recovered_contrast(contrastive, None) == (
        None, "the series has no consistent instance in the data to tell its sessions apart")
    assert plan_checks(contrastive)[1] == [
        "contrasting preference: not recorded in the data (no metadata.contrastive_preference); the series has no "
        "consistent instance in the data to tell its sessions apart, so it is left unchecked"]


def test_session_at_counts_from_one():
    i = inst("consistent", [s("Work", "A.", "first"), s("Work", "B.", "second"), s("Work", "C.", "third")])
    assert [session_at(i, k).dialogue[0].content for k in (1, 2, 3)] == ["first", "second", "third"]


def test_fragments_of_every_session_are_kept_together():
    r = EntryResult(CURRENT, "Pref.", 1, "Q?")
    r.add(1, {"rating": 5}, ["a"], ["x"])
    r.add(2, {"rating": 2}, ["b", "c"], ["y"])
    d = r.to_dict()
    assert d["fragments"] == [{"session": 1, "text": "a"}, {"session": 2, "text": "b"}, {"session": 2, "text": "c"}]
    assert d["dropped_fragments"] == [{"session": 1, "text": "x"}, {"session": 2, "text": "y"}]
    assert d["rating"] == 2 and d["ratings"] == {"1": 5, "2": 2}
