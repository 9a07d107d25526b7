"""Answers the released harness reads, and what it does with the ones it cannot read.

Each row of CASES is a row of docs/release_parsing.md: an answer, the release's outcome
(evaluation/release.py, checked against the release's own parsers by
benchmarks/release_side_by_side.py on the well-formed answers) and ours.
"""
from __future__ import annotations

import json

import pytest

from cupid.evaluation import release
from cupid.evaluation.steps import decompose, infer, judge, match
from tests.evaluation.test_release_view import instance_outcomes, step_view
from cupid.utils.answers import ParseError
from repo_paths import GOLDEN_DIR, ROOT

ANALYSIS = "### Analysis\n\nThe user asked for this before.\n\n"

# (step, answer, release outcome, release value, our value or ParseError)
CASES = [
    # --- inferred preference -----------------------------------------------------------
    ("infer", ANALYSIS + "### Most Likely Preference\n\nShort answers.", "same", "Short answers.", "Short answers."),
    ("infer", ANALYSIS + "### Most Likely Preference\n\nShort answers.\nA second line.", "same",
     "Short answers.", "Short answers."),
    ("infer", ANALYSIS + "### Most Likely Preferences\n\nShort answers.", "differs", "s", "Short answers."),
    ("infer", ANALYSIS + "### Most Likely Preference:\n\nShort answers.", "differs", ":", "Short answers."),
    ("infer", ANALYSIS + "### Most Likely Preference: Short answers.", "differs", ": Short answers.",
     "Short answers."),
    ("infer", ANALYSIS + "### Most Likely Preference\n\n```\nShort answers.\n```", "differs", "```",
     "Short answers."),
    ("infer", ANALYSIS + "### Most Likely Preference\n\n```text\nShort answers.\n```", "differs", "```text",
     "Short answers."),
    ("infer", ANALYSIS + "## Most Likely Preference\n\nShort answers.", "drop", None, "Short answers."),
    ("infer", ANALYSIS + "**Most Likely Preference**\n\nShort answers.", "drop", None, "Short answers."),
    ("infer", ANALYSIS + "### Most Likely Preferneces\n\nShort answers.", "drop", None, "Short answers."),
    ("infer", "The user wants short answers.", "drop", None, ParseError),
    # --- decomposition -----------------------------------------------------------------
    ("decompose", '**Checklist**\n\n```json\n{"checklist": ["Is it short?"]}\n```', "same",
     ["Is it short?"], ["Is it short?"]),
    ("decompose", '{"checklist": ["Is it short?"]}', "same", ["Is it short?"], ["Is it short?"]),
    ("decompose", '**Checklist**\n\n{"checklist": ["Is it short?"]}', "drop", None, ["Is it short?"]),
    ("decompose", '```\n{"checklist": ["Is it short?"]}\n```', "drop", None, ["Is it short?"]),
    ("decompose", '```json\n{"checklist": ["Is it short?",]}\n```', "drop", None, ["Is it short?"]),
    ("decompose", '```json\n{"checklist": []}\n```', "drop", [], ParseError),
    ("decompose", '```json\n{"questions": ["Is it short?"]}\n```', "drop", None, ParseError),
    # --- matching (two entries) ----------------------------------------------------------
    ("match", '```json\n{"results": [{"index": 1, "label": "Fully Covered"}, '
              '{"index": 2, "label": "Not Covered"}]}\n```', "same", 1.0, 1.0),
    ("match", '{"results": [{"index": 1, "label": "Fully Covered"}, {"index": 2, "label": "Partially Covered"}]}',
     "same", 1.5, 1.5),
    ("match", '```json\n{"results": [{"index": 1, "label": "fully covered"}, '
              '{"index": 2, "label": "Fully Covered"}]}\n```', "differs", 1.0, 2.0),
    ("match", '```json\n{"results": [{"index": 1, "label": "Fully Covered"}]}\n```', "differs", 1.0, ParseError),
    ("match", '```json\n{"results": [{"index": 1, "label": "Fully Covered"}, '
              '{"index": 2, "label": "Mostly Covered"}]}\n```', "differs", 1.0, ParseError),
    ("match", 'Here you go: {"results": [{"index": 1, "label": "Fully Covered"}, '
              '{"index": 2, "label": "Fully Covered"}]}', "zero", None, 2.0),
    ("match", '```JSON\n{"results": [{"index": 1, "label": "Fully Covered"}, '
              '{"index": 2, "label": "Fully Covered"}]}\n```', "zero", None, 2.0),
    ("match", '```json\n[{"index": 1, "label": "Fully Covered"}, {"index": 2, "label": "Fully Covered"}]\n```',
     "zero", None, 2.0),
    ("match", "Both entries are fully covered.", "zero", None, ParseError),
    # --- judge ---------------------------------------------------------------------------
    ("judge", "### Evaluation Label\n\nGood\n\n### Evaluation Score\n\n7", "same", 7.0, 7),
    ("judge", "### **Evaluation Score**\n\n**8**", "same", 8.0, 8),
    ("judge", "### Evaluation Score\n\n8/10", "same", 8.0, 8),
    ("judge", "### Evaluation Score\n\n7.5", "same", 7.0, 7),
    ("judge", "#### Evaluation Score\n\n6", "same", 6.0, 6),
    ("judge", "### Evaluation Score\n\n9\n\nThe response is strong.", "same", 9.0, 9),
    # Two score headers: the release reads the first, and so do we (both readings).
    ("judge", "### Evaluation Score\n\n8\n\n### Evaluation Score\n\n3", "same", 8.0, 8),
    ("judge", "### Evaluation Score\n\nScore: 8\n\n### Evaluation Score\n\nScore: 3", "zero", 0.0, 8),
    ("judge", "### Evaluation Score:\n\n8", "zero", 0.0, 8),
    ("judge", "### Evaluation Score\n\nScore: 8", "zero", 0.0, 8),
    ("judge", "### Evaluation Score\n\n8 (Very Good)", "zero", 0.0, 8),
    ("judge", "### Evaluation Score\n\n8\nVery Good", "zero", 0.0, 8),
    ("judge", "## Evaluation Score\n\n8", "zero", 0.0, 8),
    ("judge", "**Evaluation Score:** 8", "zero", 0.0, 8),
    ("judge", "### Evaluation Score\n\nExcellent", "zero", 0.0, ParseError),
    ("judge", "### Evaluation Score\n\n0", "zero", 0.0, ParseError),
    ("judge", "### Evaluation Score\n\n11", "differs", 11.0, ParseError),
    ("judge", "The response is good.", "zero", 0.0, ParseError),
]

CHECKLIST = ["Is it short?", "Is it formal?"]


def ours(step: str, answer: str):
    if step == "infer":
        return infer.parse(answer)["preference"]
    if step == "decompose":
        return decompose.parse(answer)["checklist"]
    if step == "match":
        return sum(r["score"] for r in match.parse(answer, CHECKLIST)["results"])
    return judge.parse(answer)["score"]


def record(step: str, answer: str) -> dict:
    try:
        output = {"infer": lambda: {"preference": ours(step, answer)},
                  "decompose": lambda: {"checklist": ours(step, answer)},
                  "match": lambda: match.parse(answer, CHECKLIST),
                  "judge": lambda: {"score": ours(step, answer)}}[step]()
        status = "done"
    except ParseError:
        output, status = None, "failed"
    return {"status": status, "raw": [answer], "output": output}


@pytest.mark.parametrize("step, answer, outcome, release_value, our_value", CASES)
def test_each_documented_case(step, answer, outcome, release_value, our_value):
    if our_value is ParseError:
        with pytest.raises(ParseError):
            ours(step, answer)
    else:
        assert ours(step, answer) == our_value
    name = "match_precision" if step == "match" else step
    view = step_view(name, record(step, answer))
    assert view["outcome"] == outcome
    assert view["value"] == release_value


# What the release's own parsers made of each answer above, run inside the release by
# benchmarks/make_release_golden.py: ["ok", value] or ["raises", exception name].
RELEASE_RESULTS = {(r["step"], r["answer"]): r["release"] for r in json.loads(
    (GOLDEN_DIR / "release" / "parsers.json").read_text(encoding="utf-8"))["results"]}


def release_result(step: str, answer: str) -> list:
    if (step, answer) not in RELEASE_RESULTS:
        pytest.fail(f"no result of the release's parsers for {step} {answer!r}: rerun "
                    "benchmarks/make_release_golden.py with a copy of the release")
    return RELEASE_RESULTS[(step, answer)]


@pytest.mark.parametrize("step, answer", [(c[0], c[1]) for c in CASES])
def test_our_account_of_the_release_is_its_parsers(step, answer):
    """evaluation/release.py against what the release's own code returned."""
    status, value = release_result(step, answer)
    account = {"infer": release.release_preference, "decompose": release.release_checklist,
               "match": lambda a: release.release_matched(release.release_match_results(a, False)),
               "judge": release.release_judge_score}[step]
    if status == "raises":
        with pytest.raises(release.ReleaseFailure):
            account(answer)
    else:
        assert account(answer) == value


def test_the_release_reading_is_kept_when_usable():
    # Whenever the release's own parsers read a usable value, our parser returns that value.
    kept = 0
    for step, answer, outcome, _, _ in CASES:
        status, value = release_result(step, answer)
        if outcome == "same":
            assert status == "ok"
            assert ours(step, answer) == (int(value) if step == "judge" else value), (step, answer)
            kept += 1
    assert kept >= 12


def test_docs_table_lists_every_case():
    doc = (ROOT / "docs" / "release_parsing.md").read_text()
    for step, answer, outcome, _, _ in CASES:
        shown = json.dumps(answer)[1:-1].replace("|", "\\|")
        assert f"`` {shown} ``" in doc, (step, answer)


def test_prefmatcher_answers_are_read_as_they_come():
    bare = json.dumps([{"index": 1, "label": "Fully Covered"}, {"index": 2, "label": "Not Covered"}])
    step = {"status": "done", "raw": [bare], "output": match.parse(bare, CHECKLIST)}
    assert step_view("match_recall", step, prefmatcher=True) == {"outcome": "same", "value": 1.0}
    # The same answer from the GPT-4o matcher has no "results": the release scores it 0.
    assert step_view("match_recall", step)["outcome"] == "zero"
    # A dict from PrefMatcher stops the release's aggregation.
    wrapped = '{"results": [{"label": "Fully Covered"}, {"label": "Not Covered"}]}'
    step = {"status": "done", "raw": [wrapped], "output": match.parse(wrapped, CHECKLIST)}
    assert step_view("match_recall", step, prefmatcher=True)["outcome"] == "zero"


def test_call_errors_and_instance_outcomes():
    failed = {"status": "failed", "raw": [], "output": None}
    assert step_view("infer", failed)["outcome"] == "drop"
    assert step_view("judge", failed)["outcome"] == "zero"
    same = {"outcome": "same"}
    views = {"infer": same, "decompose": same, "match_precision": {"outcome": "zero"},
             "match_recall": same, "generate": same, "judge": {"outcome": "differs"}}
    assert instance_outcomes(views) == {"inference": "zero", "generation": "differs"}
    views["infer"] = {"outcome": "drop"}
    # The release runs inference first and returns: the instance never reaches generation.
    assert instance_outcomes(views) == {"inference": "drop", "generation": "drop"}
    assert instance_outcomes({}) == {}
