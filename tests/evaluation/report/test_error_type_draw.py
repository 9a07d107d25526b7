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
                           instances=instances or {}, instance_type=lambda i: i.split("-")[-1])


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
    assert found.run is run
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
    run = fake_run(tmp_path, instances={"i1-consistent": {"persona_id": "p1"}})
    path = tmp_path / "i1.json"
    fresh = error_types._record(path, run, "i1-consistent", "s", 0.1, "Short.")
    assert fresh.path == path
    assert fresh.data == {"instance_id": "i1-consistent", "persona_id": "p1", "instance_type": "consistent", "model": "m",
                          "setting": "default", "scorer": "s", "f1": 0.1, "inferred_preference": "Short.",
                          "evaluations": {}}
    version = load_prompt(steps.ERROR_TYPE.module.PROMPT).version
    kept_step = {"status": "done", "prompt_version": version, "output": {"type": "Vagueness"}}
    old_step = {"status": "done", "prompt_version": "older", "output": {"type": "Vagueness"}}
    path.write_text(json.dumps({**fresh.data, "evaluations": {"c": {"steps": {steps.ERROR_TYPE.name: kept_step}},
                                                              "d": {"steps": {steps.ERROR_TYPE.name: old_step}},
                                                              "odd": ["not", "an", "object"]}}))
    again = error_types._record(path, run, "i1-consistent", "s", 0.1, "Short.")
    assert again.data["evaluations"] == {"c": {"steps": {steps.ERROR_TYPE.name: kept_step}}, "d": {"steps": {}},
                                         "odd": ["not", "an", "object"]}
    other = error_types._record(path, run, "i1-consistent", "s", 0.15, "Long.")     # evaluated again: another inference
    assert other.data["evaluations"] == {} and other.data["f1"] == 0.15
    path.write_text("{")
    broken = error_types._record(path, run, "i1-consistent", "s", 0.1, "Short.")
    assert broken.data["evaluations"] == {}
    assert "unreadable" in capsys.readouterr().err and not path.exists()


# ---------------------------------------------------------------------------------------
# classify, in process: the fixture results, their instances' data, and a classifier of the
# user's own code (no server)
# ---------------------------------------------------------------------------------------
CLASSIFIER = '''
import json

from cupid.utils.models.model import Model


class Classifier(Model):
    """Vagueness for every inference, except an unusable answer for p2's changing instance;
    each request is logged to asked.jsonl in the working directory."""

    def __call__(self, system_prompt, user_prompt):
        with open("asked.jsonl", "a", encoding="utf-8") as log:
            log.write(json.dumps(user_prompt) + "\\n")
        if "Plan for p2 (changing)" in user_prompt:
            return "I cannot tell."
        return "### Analysis\\n\\nToo generic.\\n\\n### Error Type\\n\\nVagueness\\n"
'''


@pytest.fixture
def classify_inputs(tmp_path, monkeypatch):
    from cupid_responder import InstancePlan, make_row
    from fixtures_results import PERSONAS, TYPES, build_results_dir

    monkeypatch.chdir(tmp_path)
    results = build_results_dir(tmp_path / "results")
    rows = [make_row(p, t, InstancePlan(f"Plan for {p} ({t}).", f"Truth of {p}.", ["Is it so?"], "p", ["Q?"], [], []))
            for p in PERSONAS for t in TYPES]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "classifier.py").write_text(CLASSIFIER, encoding="utf-8")
    return results, tmp_path / "data.jsonl", "classifier.py:Classifier"


def test_classify_draws_each_models_low_f1_inferences_and_records_each_type(classify_inputs):
    from cupid.evaluation.report.analysis import Analysis

    results, data, classifier = classify_inputs
    an = Analysis(results, n_bootstrap=1)
    scorer = an.primary_scorer("inference")
    expected = {}
    for model in an.models():
        run = an.run(model, "default")
        expected[run.model] = error_types.draw(an, run, scorer, f1_below=0.6, per_model=2, seed=5)
    lines = error_types.classify(results, evaluator=classifier, f1_below=0.6, per_model=2, seed=5, n_workers=1,
                                 data_paths=[data])
    asked = [json.loads(line) for line in (results.parent / "asked.jsonl").read_text(encoding="utf-8").splitlines()]
    drawn_total = sum(len(d[1]) for d in expected.values())
    assert 0 < drawn_total and len(asked) >= 1
    failed = sum("p2__changing" in d[1] for d in expected.values())
    assert (drawn_total, failed) == (4, 1)       # GPT-4o's p2 changing among them: its classification fails
    assert lines[-1] == (f"classified by {lines[-1].split()[2]} {drawn_total - failed} done, {failed} failed"
                         + (" (rerun the same command to ask the failed ones again)" if failed else ""))
    for run in an.runs:
        if run.setting != "default" or run.model not in expected:
            continue
        eligible, drawn, f1 = expected[run.model]
        directory = error_types.directory_of(run)
        sample_file = json.loads((directory / error_types.SAMPLE).read_text(encoding="utf-8"))
        assert (sample_file["eligible"], sample_file["drawn"], sample_file["f1_below"], sample_file["per_model"],
                sample_file["seed"], sample_file["scorer"], sample_file["model"]) == (
            eligible, drawn, 0.6, 2, 5, scorer, run.model)
        assert f"{len(drawn)} of {len(eligible)} inferences with F1 below 60% drawn" in "\n".join(lines)
        for instance_id in drawn:
            record = json.loads((directory / f"{instance_id}.json").read_text(encoding="utf-8"))
            step = record["evaluations"][sample_file["classifier"]]["steps"][steps.ERROR_TYPE.name]
            assert record["f1"] == f1[instance_id] and record["inferred_preference"] == "p"
            assert record["scorer"] == scorer
            evaluation = record["evaluations"][sample_file["classifier"]]
            assert evaluation["evaluator"] == evaluation["matcher"] == sample_file["classifier"]
            assert record["instance_id"] == instance_id and record["model"] == run.model
            if instance_id == "p2__changing":
                assert step["status"] == "failed" and "no 'Error Type' section" in step["error"]
            else:
                assert step["status"] == "done" and step["output"]["type"] == "Vagueness"
        assert sorted(p.name for p in directory.iterdir()) == sorted([error_types.SAMPLE, ".lock"]
                                                                     + [f"{i}.json" for i in drawn])
    p2_contrastive = next(text for text in asked if "Plan for p2 (contrastive)." in text)
    assert "Context: Factor 1\n\nPlan for p2 (contrastive)." in p2_contrastive
    assert "Truth of p2." in p2_contrastive and p2_contrastive.index("Truth of p2.") < p2_contrastive.rindex("\np\n")
    before = len(asked)
    again = error_types.classify(results, evaluator=classifier, f1_below=0.6, per_model=2, seed=5, n_workers=1,
                                 data_paths=[data])
    assert again[-1].startswith(f"classified by {lines[-1].split()[2]} {drawn_total - failed} done, {failed} failed")
    asked = [json.loads(line) for line in (results.parent / "asked.jsonl").read_text(encoding="utf-8").splitlines()]
    assert (len(asked) > before) == bool(failed)          # asked again: the failed ones only
    assert all("Plan for p2 (changing)" in text for text in asked[before:])


def test_classify_refuses_what_it_cannot_classify(classify_inputs, tmp_path):
    from cupid.utils.errors import BadInput

    results, data, classifier = classify_inputs
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="no default-setting inference results to classify"):
        error_types.classify(tmp_path / "empty", evaluator=classifier)
    other = tmp_path / "other.jsonl"
    other.write_text("", encoding="utf-8")
    with pytest.raises(BadInput, match=r"the data of \d+ drawn instance\(s\) \(e.g. p\d__\w+\) were not found; give "
                                       r"the data the run evaluated with --data_dir"):
        error_types.classify(results, evaluator=classifier, data_paths=[tmp_path / "absent.jsonl"])


def test_a_run_being_classified_by_another_process_is_skipped_and_said(classify_inputs):
    from cupid.evaluation.report.analysis import Analysis
    from cupid.utils.io import FileLock

    results, data, classifier = classify_inputs
    an = Analysis(results, n_bootstrap=1)
    run = an.run("gpt-4o-2024-08-06", "default")
    directory = error_types.directory_of(run)
    directory.mkdir(parents=True, exist_ok=True)
    held = FileLock(directory / ".lock")
    assert held.acquire(blocking=False)
    try:
        lines = error_types.classify(results, evaluator=classifier, f1_below=0.6, per_model=2, seed=5, n_workers=1,
                                     data_paths=[data])
    finally:
        held.release()
    assert f"{an.label(run.model)}: skipped, another process is classifying it ({directory})" in lines
    assert not (directory / error_types.SAMPLE).exists()
    assert any(line.endswith("inferences with F1 below 60% drawn") for line in lines)   # the other model's
