"""evaluation/release.py's per-step and per-instance views (what the release would
have made of a run's answers), on the cases its outcome counts depend on."""
from __future__ import annotations

import pytest

from cupid.evaluation import release, steps
from cupid.evaluation.aggregate import release_outcomes_of_record
from cupid.evaluation.steps import match

def step_view(name: str, record: dict | None, prefmatcher: bool = False) -> dict | None:
    """The step's release view, the record's match from PrefMatcher when ``prefmatcher``."""
    if record is not None and prefmatcher:
        record = {**record, "sent": {"prompt": match.PROMPT_PREFMATCHER}}
    return steps.BY_NAME[name].release_view(record)


def instance_outcomes(views: dict) -> dict:
    """What the release made of an instance whose steps have these release views."""
    data = {"setting": "default", "steps": {}, "evaluations": {"s": {"steps": {}}}}
    for name, view in views.items():
        target = data["evaluations"]["s"]["steps"] if steps.BY_NAME[name].per_scorer else data["steps"]
        target[name] = {"release": view}
    return release_outcomes_of_record(data, "s")


JUDGED = "### Evaluation Label\n\nGood\n\n### Evaluation Score\n\n7"


def done(raw: str, output: dict) -> dict:
    return {"status": "done", "raw": [raw], "output": output}


def test_steps_without_a_release_reading():
    assert step_view("summarize", done("x", {})) is None
    assert step_view("judge", None) is None


@pytest.mark.parametrize("name, outcome", [("infer", "drop"), ("decompose", "drop"), ("generate", "drop"),
                                           ("match_precision", "zero"), ("match_recall", "zero"),
                                           ("judge", "zero")])
def test_a_failed_call(name, outcome):
    assert step_view(name, {"status": "failed", "raw": [], "output": None}) == {
        "outcome": outcome, "value": None, "note": "the call failed"}


def test_a_failed_step_with_an_answer_is_read_by_the_release_but_not_ours():
    # Our parser refused the answer (status failed, no output): the release's reading
    # differs from ours even where it reads a value.
    step = {"status": "failed", "raw": [JUDGED], "output": {"score": 7}}
    assert step_view("judge", step) == {"outcome": "differs", "value": 7.0}


def test_same_and_differs():
    assert step_view("judge", done(JUDGED, {"score": 7})) == {"outcome": "same", "value": 7.0}
    assert step_view("judge", done(JUDGED, {"score": 8})) == {"outcome": "differs", "value": 7.0}
    answer = "### Analysis\n\nx\n\n### Most Likely Preference\n\nShort."
    assert step_view("infer", done(answer, {"preference": "Short."}))["outcome"] == "same"
    assert step_view("infer", done(answer, {"preference": "Long."}))["outcome"] == "differs"
    assert step_view("generate", done("Hi", {"response": "Hi"})) == {"outcome": "same", "value": None}


def test_an_empty_checklist_is_dropped_with_its_reason():
    view = step_view("decompose", done('{"checklist": []}', {"checklist": []}))
    assert view == {"outcome": "drop", "value": [],
                    "note": "an empty or non-list checklist stops the release's aggregation"}


def test_a_score_the_release_cannot_read_names_why():
    view = step_view("judge", done("### Evaluation Score\n\nScore: 8", {"score": 8}))
    assert view == {"outcome": "zero", "value": 0.0,
                    "note": "the release reads no score (score text 'Score: 8')"}
    view = step_view("judge", done("Score: 8", {"score": 8}))
    assert view["note"] == "the release reads no score (no '### Evaluation Score' header)"
    long = "### Evaluation Score\n\n" + "x" * 60
    assert step_view("judge", done(long, {}))["note"] == \
        f"the release reads no score (score text {'x' * 40!r})"


def test_an_unreadable_answer_keeps_the_releases_error():
    view = step_view("decompose", done("not json", {"checklist": ["a"]}))
    assert view == {"outcome": "drop", "value": None, "note": "checklist unreadable: JSONDecodeError"}
    view = step_view("match_recall", done("no json", {"results": []}))
    assert view == {"outcome": "zero", "value": None, "note": "match unreadable: JSONDecodeError"}


@pytest.mark.parametrize("step, outcome", [("infer", "drop"), ("decompose", "drop"),
                                           ("match_precision", "zero"), ("match_recall", "zero")])
def test_every_inference_step_counts_for_the_instance(step, outcome):
    views = {s: {"outcome": "same"} for s in ("infer", "decompose", "match_precision", "match_recall",
                                               "generate", "judge")}
    views[step] = {"outcome": outcome}
    assert instance_outcomes(views)["inference"] == outcome


@pytest.mark.parametrize("step", ["generate", "judge"])
def test_every_generation_step_counts_for_the_instance(step):
    views = {s: {"outcome": "same"} for s in ("generate", "judge")}
    views[step] = {"outcome": "drop" if step == "generate" else "zero"}
    assert instance_outcomes(views)["generation"] == views[step]["outcome"]


def test_decompose_same_and_differs():
    answer = '{"checklist": ["Is it short?"]}'
    assert step_view("decompose", done(answer, {"checklist": ["Is it short?"]})) == {
        "outcome": "same", "value": ["Is it short?"]}
    assert step_view("decompose", done(answer, {"checklist": ["Is it brief?"]})) == {
        "outcome": "differs", "value": ["Is it short?"]}


def test_release_judge_score_cuts_at_a_blank_line_only():
    # The release's process_generation_result splits the score text at "\n\n", then
    # float()s what is left: "8 points" is no number, so the release scores 0.
    assert release.release_judge_score("### Evaluation Score\n\n8 points\n\nGood") == 0.0
    assert release.release_judge_score("### Evaluation Score\n\n8\n\nGood") == 8.0


def test_release_failures_name_what_is_missing():
    with pytest.raises(release.ReleaseFailure) as info:
        release.release_preference("no header")
    assert str(info.value) == "no '### Most Likely Preference'"
    with pytest.raises(release.ReleaseFailure) as info:
        release.release_score_text("no header")
    assert str(info.value) == "no score header"
    with pytest.raises(release.ReleaseFailure) as info:
        release.release_matched([{"index": 1}])  # a result without a label
    assert str(info.value) == "the release's aggregation would raise (KeyError)"
