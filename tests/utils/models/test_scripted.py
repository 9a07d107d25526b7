"""``--model scripted`` (utils/models/scripted.py): every step's request answered at once in the
layout its parser reads, deterministic, varied where the layout leaves a choice; a whole
evaluation of the shipped sample in seconds with no failure."""
from __future__ import annotations

import json

import pytest

from cupid.evaluation import evaluate
from cupid.evaluation.steps import decompose, error_type, infer, judge, match, summarize
from cupid.synthesis.dialogues import parse_user_turn
from cupid.evaluation.steps.user_simulator import LAYOUT as USER_SIMULATOR_LAYOUT
from cupid.utils.models.embedded_grammar import grammar
from cupid.utils.models.registry import resolve_model
from cupid.utils.models.scripted import Chooser, LayoutError, from_grammar, from_schema
from repo_paths import ROOT

CHECKLIST = ["Is it short?", "Does it use bullets?", "Does it cite a source?"]


@pytest.mark.parametrize("seed", ["a", "b", "c", "d"])
def test_each_layout_is_read_by_its_steps_parser(seed):
    assert infer.check(infer.parse(from_grammar(grammar(infer.LAYOUT), Chooser(seed)))) is None
    judged = judge.parse(from_grammar(grammar(judge.LAYOUT), Chooser(seed)))
    assert judge.check(judged) is None and 1 <= judged["score"] <= 10
    assert error_type.check(error_type.parse(from_grammar(grammar(error_type.LAYOUT), Chooser(seed)))) is None
    decomposed = decompose.parse(json.dumps(from_schema(decompose.SCHEMA, Chooser(seed))))
    assert decompose.check(decomposed) is None
    matched = match.parse(json.dumps(from_schema(match.schema(len(CHECKLIST)), Chooser(seed))), CHECKLIST)
    assert match.check(matched) is None and len(matched["results"]) == 3
    assert summarize.check(summarize.parse(json.dumps(from_schema(summarize.SCHEMA, Chooser(seed))), 1)) is None
    message, ended, score = parse_user_turn(from_grammar(grammar(USER_SIMULATOR_LAYOUT), Chooser(seed)))
    assert message and score is not None and 1 <= score <= 10


def test_choices_are_drawn_from_the_request_and_repeat_for_the_same_request():
    scores = {judge.parse(from_grammar(grammar(judge.LAYOUT), Chooser(str(i))))["score"] for i in range(40)}
    assert len(scores) >= 5  # a score of 1..10, not one fixed value
    assert from_grammar(grammar(judge.LAYOUT), Chooser("same")) == from_grammar(grammar(judge.LAYOUT), Chooser("same"))


def test_a_layout_it_cannot_write_is_a_clear_error():
    with pytest.raises(LayoutError, match="pattern"):
        from_schema({"type": "string", "pattern": r"^\d{12}$"}, Chooser("x"))
    with pytest.raises(LayoutError, match="rule 'missing'"):
        from_grammar('root ::= "a" missing\n', Chooser("x"))


def test_the_sample_is_evaluated_in_seconds_with_no_failure(tmp_path):
    arguments = dict(evaluator="scripted", data=str(ROOT / "data" / "sample"), task="both",
                     results_dir=tmp_path / "res", n_workers=2)
    run = evaluate("scripted", **arguments)
    counts = run.results["counts"]
    assert counts["evaluated"] == 6 and counts["failed"] == 0 and run.failed == 0
    assert 0 < run.results["inference"]["f1"] <= 1 and 1 <= run.results["generation"]["average_score"] <= 10
    assert run.results["this_invocation"]["wall_time_s"] < 30
    # The same numbers from the same requests, with no cache to replay them.
    again = evaluate("scripted", **{**arguments, "results_dir": tmp_path / "again", "no_cache": True})
    assert again.results["inference"] == run.results["inference"]
    assert again.results["generation"] == run.results["generation"]


def test_it_is_a_model_like_any_other():
    model = resolve_model("scripted")
    model.check()
    assert model.endpoint() is None
    answer = model.generate("You are helpful.", [{"role": "user", "content": "Say something."}])
    assert "scripted" in answer.text and answer.ending == "stop"
