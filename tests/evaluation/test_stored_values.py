"""Values read back from instance files (each step's ``check``, metrics.py's result checks) are checked like answers: an impossible judge score,
label or count is named, its steps are run again (from the cache, so no new call), and it
never enters results.json or the report."""
from __future__ import annotations

import json

import pytest

from counts_check import assert_counts_agree
from cupid.evaluation import run as run_module
from cupid.evaluation.aggregate import aggregate_records
from cupid.evaluation.report.results import load_runs, outcome
from cupid.evaluation.aggregate import record_problems
from cupid.evaluation.metrics import generation_problem, inference_problem
from cupid.evaluation.steps import BY_NAME


def step_output_problem(name: str, output) -> str | None:
    return BY_NAME[name].check(output)
from tests.evaluation.test_run_safety import cli, data_file, results_of, server  # noqa: F401

pytestmark = pytest.mark.usefixtures("fast_retries")  # tests/evaluation/conftest.py

GOOD_COUNTS = {"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "n_predicted_matched": 1.5,
               "n_predicted": 3, "n_true_matched": 2.0, "n_true": 2}


@pytest.mark.parametrize("score,ok", [(7, True), (1, True), (10, True), (7.5, True), (100, False),
                                      (0, False), ("ten", False), ("7", False), (None, False),
                                      (True, False), (float("nan"), False)])
def test_judge_scores(score, ok):
    assert (step_output_problem("judge", {"analysis": "", "score": score}) is None) is ok
    assert (generation_problem({"score": score}) is None) is ok


@pytest.mark.parametrize("change,ok", [
    ({}, True),
    ({"precision": 1.5}, False), ({"recall": -0.1}, False), ({"f1": "high"}, False),
    ({"precision": None}, True),  # an empty inferred checklist has no precision
    ({"n_true": -1}, False), ({"n_predicted": 2.5}, False), ({"n_true": "2"}, False),
    ({"n_predicted_matched": 4.0}, False),  # more matched than predicted
    ({"n_true_matched": -1.0}, False),
])
def test_inference_counts(change, ok):
    assert (inference_problem({**GOOD_COUNTS, **change}) is None) is ok


@pytest.mark.parametrize("result,ok", [
    ({"index": 1, "entry": "e", "label": "Fully Covered", "score": 1.0}, True),
    ({"index": 1, "entry": "e", "label": "Partially Covered", "score": 0.5}, True),
    ({"index": 1, "entry": "e", "label": "Mostly Covered", "score": 0.75}, False),
    ({"index": 1, "entry": "e", "label": "Not Covered", "score": 1.0}, False),
    ({"index": 1, "entry": "e", "label": "Fully Covered", "score": True}, False),
])
def test_match_labels_come_from_the_rubric(result, ok):
    assert (step_output_problem("match_recall", {"results": [result]}) is None) is ok


def record(score, counts=GOOD_COUNTS, scorer="judge-model"):
    return {"instance_id": "i", "instance_type": "consistent", "steps": {},
            "evaluations": {scorer: {"steps": {}, "inference": counts,
                                     "generation": {"score": score}}}}


def test_an_impossible_score_is_a_failure_not_a_number():
    results = aggregate_records([record(7), record(100), record("ten")], "judge-model", "both")
    assert results["generation"] == {"average_score": 7.0, "n_instances": 1}
    # the inference counts of those files are sound and still count
    assert results["inference_n_instances"] == 3
    assert results["counts"]["failed"] == 2 and results["counts"]["evaluated"] == 1
    assert results["counts"]["by_task"]["generation"] == {"done": 1, "failed": 2}
    assert results["counts"]["by_task"]["inference"] == {"done": 3, "failed": 0}
    reasons = results["counts"]["failures_by_step"]["stored generation value"]
    assert any("100" in r for r in reasons) and any("'ten'" in r for r in reasons)


def test_impossible_counts_are_left_out_of_inference_only():
    results = aggregate_records([record(7), record(8, {**GOOD_COUNTS, "precision": 1.5})],
                                "judge-model", "both")
    assert results["inference_n_instances"] == 1
    assert results["generation"]["n_instances"] == 2


def run_dir(base):
    return base / "test-model"


def corrupt(path, mutate):
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))


def scorer_of(data):
    return next(iter(data["evaluations"]))


@pytest.mark.parametrize("bad", [100, "ten"])
def test_a_rerun_names_the_file_and_heals_it_from_the_cache(server, data_file, tmp_path, capsys, bad):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--task", "both")) == 0
    clean = results_of(base)
    path = run_dir(base) / "persona-a__consistent.json"

    def mutate(data):
        evaluation = data["evaluations"][scorer_of(data)]
        evaluation["steps"]["judge"]["output"]["score"] = bad
        evaluation["generation"]["score"] = bad

    corrupt(path, mutate)
    calls = len(server.requests)
    capsys.readouterr()
    assert run_module.main(cli(server, data_file, base, "--task", "both")) == 0
    captured = capsys.readouterr()
    warning = next(line for line in captured.err.splitlines() if line.startswith("warning:"))
    assert warning.startswith(f"warning: {path}: ")
    assert f"score {bad!r} is not a number in 1-10" in warning
    assert "Traceback" not in captured.err
    assert len(server.requests) == calls  # the judge's answer replayed from the cache
    healed = json.loads(path.read_text())
    assert healed["evaluations"][scorer_of(healed)]["generation"]["score"] != bad
    results = results_of(base)
    assert results["generation"] == clean["generation"]
    assert results["this_invocation"]["ran"] == 1 and results["this_invocation"]["found_done"] == 1
    assert_counts_agree(base / "test-model", captured.out)


def test_a_rerun_without_the_cache_asks_the_step_again(server, data_file, tmp_path, capsys):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--task", "both", "--no_cache")) == 0
    path = run_dir(base) / "persona-b__consistent.json"

    def mutate(data):
        steps = data["evaluations"][scorer_of(data)]["steps"]
        steps["match_recall"]["output"]["results"][0]["label"] = "Mostly Covered"

    corrupt(path, mutate)
    calls = len(server.requests)
    assert run_module.main(cli(server, data_file, base, "--task", "both", "--no_cache")) == 0
    asked = server.requests[calls:]
    assert len(asked) == 1  # match_recall only
    healed = json.loads(path.read_text())
    assert record_problems(healed, scorer_of(healed)) == []
    assert "Mostly Covered" in capsys.readouterr().err


def test_the_report_leaves_an_impossible_score_out(server, data_file, tmp_path):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--task", "both")) == 0
    path = run_dir(base) / "persona-a__consistent.json"
    corrupt(path, lambda d: d["evaluations"][scorer_of(d)]["generation"].update(score=100))
    runs = load_runs(base)
    scorer = scorer_of(json.loads(path.read_text()))
    generation = outcome(runs[0], scorer, "generation")
    assert "persona-a__consistent" not in generation.values
    assert "100" in generation.failed["persona-a__consistent"][1]
    assert generation.n == 1


def test_counts_agree_after_an_unexpected_error_in_one_chain(server, data_file, tmp_path,
                                                             monkeypatch, capsys):
    # A chain ending in an error no step records (the way a raising cache once ended one):
    # the summary must not say "evaluated 2 · FAILED 0" while one instance lacks a result.
    from cupid.evaluation.steps import judge as judge_step

    real = judge_step.ask

    def ask(preference, checklist, request, response):
        if "Hollis" in request:
            raise RuntimeError("an unexpected error")
        return real(preference, checklist, request, response)

    monkeypatch.setattr(judge_step, "ask", ask)
    base = tmp_path / "res"
    args = cli(server, data_file, base, "--task", "both")
    assert run_module.main(args) == 1
    captured = capsys.readouterr()
    results = assert_counts_agree(run_dir(base), captured.out)
    assert results["counts"]["evaluated"] == 1 and results["counts"]["unfinished"] == 1
    assert results["counts"]["by_task"]["generation"]["done"] == 1
    assert results["counts"]["by_task"]["inference"]["done"] == 2
    assert results["this_invocation"]["ran_failed"] == 1
    assert "unfinished 1" in captured.out
    monkeypatch.setattr(judge_step, "ask", real)
    assert run_module.main(args) == 0
    results = assert_counts_agree(run_dir(base), capsys.readouterr().out)
    assert results["counts"]["evaluated"] == 2
