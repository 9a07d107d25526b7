"""Which inferences cupid-report --error_types draws (evaluation/report/error_types.py's
``draw``), in process: those with F1 strictly below the threshold (an F1 of exactly 0.20 is not
"below 20%"), at most ``per_model`` of them, the same for the same seed."""
from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from cupid.evaluation.metrics import InferenceCounts
from cupid.evaluation.report import error_types


def analysis(counts: dict[str, tuple]):
    values = {i: InferenceCounts(*c) for i, c in counts.items()}
    return SimpleNamespace(outcome=lambda run, scorer, task: SimpleNamespace(values=values))


def test_an_f1_of_exactly_the_threshold_is_not_below_it():
    # P = 1/2, R = 1/8: F1 = 2 * (1/16) / (5/8) = 0.2 exactly, in floating point too
    assert InferenceCounts(1, 2, 1, 8).f1 == 0.2
    an = analysis({"at": (1, 2, 1, 8), "under": (1, 9, 1, 1), "zero": (0, 2, 0, 3), "over": (1, 2, 1, 2),
                   "empty": (0, 0, 0, 0)})
    eligible, drawn, f1 = error_types.draw(an, None, "s", f1_below=0.2, per_model=10, seed=0)
    assert eligible == ["empty", "under", "zero"]
    assert drawn == eligible
    assert f1 == {"empty": 0.0, "under": pytest.approx(0.2), "zero": 0.0}
    assert f1["under"] < 0.2
    assert error_types.F1_BELOW == 0.20


def test_at_most_per_model_are_drawn_the_same_for_the_same_seed():
    an = analysis({f"i{k:02d}": (0, 2, 0, 2) for k in range(30)})
    eligible, drawn, _ = error_types.draw(an, None, "s", f1_below=0.2, per_model=5, seed=7)
    assert len(eligible) == 30 and len(drawn) == 5 and drawn == sorted(drawn)
    assert set(drawn) <= set(eligible)
    assert drawn == sorted(random.Random(7).sample(eligible, 5))
    again = error_types.draw(an, None, "s", f1_below=0.2, per_model=5, seed=7)[1]
    other = error_types.draw(an, None, "s", f1_below=0.2, per_model=5, seed=8)[1]
    assert again == drawn and other != drawn
    assert error_types.draw(an, None, "s", f1_below=0.0, per_model=5, seed=7)[:2] == ([], [])


# ---------------------------------------------------------------------------------------
# A run's classifications read back, and a drawn instance's file begun or kept
# ---------------------------------------------------------------------------------------
import json  # noqa: E402

from cupid.evaluation import steps  # noqa: E402
from cupid.utils.prompts import load_prompt  # noqa: E402


def fake_run(*directories, instances=None):
    return SimpleNamespace(directories=list(directories), warnings=[], model="m", setting="default",
                           instances=instances or {}, instance_type=lambda i: "consistent")


def sample(**over):
    return {"model": "m", "scorer": "s", "classifier": "c", "f1_below": 0.2, "per_model": 2, "seed": 0,
            "written": "now", "eligible": ["a", "b"], "drawn": ["a", "b"], "extra": "dropped", **over}


def test_a_runs_classifications_are_read_from_its_first_directory_that_has_them(tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    run = fake_run(first, second)
    assert error_types.directory_of(run) == first / error_types.DIRECTORY
    assert error_types.load(run) is None
    (second / error_types.DIRECTORY).mkdir(parents=True)
    (second / error_types.DIRECTORY / error_types.SAMPLE).write_text(json.dumps(sample()))
    record = {"evaluations": {"c": {"steps": {steps.ERROR_TYPE.name: {"status": "done", "output": {"type": "x"}}}}}}
    (second / error_types.DIRECTORY / "a.json").write_text(json.dumps(record))
    assert error_types.directory_of(run) == second / error_types.DIRECTORY
    found = error_types.load(run)
    assert found.sample == {k: v for k, v in sample().items() if k != "extra"}
    assert list(found.cases) == ["a"]
    assert found.step("a") == {"status": "done", "output": {"type": "x"}}
    assert found.step("b") is None
    found.cases["b"] = {"evaluations": {"c": {"steps": {steps.ERROR_TYPE.name: {"status": "running"}}}}}
    assert found.step("b") is None
    found.cases["b"] = {"evaluations": {"c": {"steps": {steps.ERROR_TYPE.name: {"status": "failed"}}}}}
    assert found.step("b") == {"status": "failed"}
    assert run.warnings == []


def test_an_unreadable_sample_is_a_warning_on_the_run(tmp_path):
    run = fake_run(tmp_path)
    (tmp_path / error_types.DIRECTORY).mkdir()
    (tmp_path / error_types.DIRECTORY / error_types.SAMPLE).write_text(json.dumps({"model": "m"}))
    assert error_types.load(run) is None
    assert len(run.warnings) == 1 and run.warnings[0].startswith(f"{tmp_path / error_types.DIRECTORY}: error types "
                                                                 f"not read (")


def test_the_inferred_preference_of_an_instance_file():
    data = {"steps": {steps.INFER.name: {"output": {"preference": "Short answers."}}}}
    assert error_types.inferred_preference(data) == "Short answers."
    assert error_types.inferred_preference({}) is None
    assert error_types.inferred_preference({"steps": {steps.INFER.name: {"output": None}}}) is None


def test_a_drawn_instances_file_is_kept_only_for_the_same_inference_and_prompt(tmp_path, capsys):
    run = fake_run(tmp_path, instances={"i1": {"persona_id": "p1"}})
    path = tmp_path / "i1.json"
    fresh = error_types._record(path, run, "i1", "s", 0.1, "Short.")
    assert fresh.data == {"instance_id": "i1", "persona_id": "p1", "instance_type": "consistent", "model": "m",
                          "setting": "default", "scorer": "s", "f1": 0.1, "inferred_preference": "Short.",
                          "evaluations": {}}
    version = load_prompt(steps.ERROR_TYPE.module.PROMPT).version
    kept_step = {"status": "done", "prompt_version": version, "output": {"type": "Vagueness"}}
    old_step = {"status": "done", "prompt_version": "older", "output": {"type": "Vagueness"}}
    path.write_text(json.dumps({**fresh.data, "evaluations": {"c": {"steps": {steps.ERROR_TYPE.name: kept_step}},
                                                              "d": {"steps": {steps.ERROR_TYPE.name: old_step}}}}))
    again = error_types._record(path, run, "i1", "s", 0.1, "Short.")
    assert again.data["evaluations"] == {"c": {"steps": {steps.ERROR_TYPE.name: kept_step}}, "d": {"steps": {}}}
    other = error_types._record(path, run, "i1", "s", 0.15, "Long.")     # evaluated again: another inference
    assert other.data["evaluations"] == {} and other.data["f1"] == 0.15
    path.write_text("{")
    broken = error_types._record(path, run, "i1", "s", 0.1, "Short.")
    assert broken.data["evaluations"] == {}
    assert "unreadable" in capsys.readouterr().err and not path.exists()
