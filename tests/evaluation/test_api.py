"""The Python API: ``evaluate()`` in-process (names and Model objects, data as a path, rows
or a datasets.Dataset; bad arguments as ValueErrors naming them; twice in one process with
nothing left behind) and ``synthesize()``."""
from __future__ import annotations

import json
import logging
import signal
import threading

import pytest

from cupid_responder import CupidResponder, two_instance_plans, two_instance_rows
from cupid.evaluation import EvaluationResult, evaluate
from cupid.utils.errors import BadInput, SetupError
from fake_llm_server import FakeLLMServer
from cupid.utils.models.model import Model
from repo_paths import ROOT
from stop_signal_dispositions import default_dispositions_here

EXPECTED_MICRO = {"precision": 0.5, "recall": 0.6, "f1": 2 * 0.5 * 0.6 / 1.1}


@pytest.fixture
def rows(plans):
    return two_instance_rows(plans)


@pytest.fixture
def server(plans):
    with FakeLLMServer(responder=CupidResponder(plans)) as srv:
        yield srv


class NotebookModel(Model):
    """A model defined in a notebook cell: not registered, answers from the scripted plan."""

    def __init__(self, name: str = "notebook-model") -> None:
        super().__init__(name)
        self.answers = CupidResponder(two_instance_plans())
        self.prompts: list[str] = []  # shared with the copy a run uses

    def __call__(self, system_prompt, user_prompt):
        self.prompts.append(user_prompt)
        return self.answers({"messages": [{"role": "user", "content": user_prompt}]})


def assert_expected(results):
    for key, value in EXPECTED_MICRO.items():
        assert results["inference"][key] == pytest.approx(value), key
    assert results["counts"]["evaluated"] == 2 and results["counts"]["failed"] == 0


def process_state():
    cupid = logging.getLogger("cupid")
    return (list(cupid.handlers), cupid.level,
            {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)},
            set(threading.enumerate()))


def assert_nothing_left_behind(before) -> None:
    """The same handlers, level and signal handlers as before the call, and no thread it
    started still running (threads of an earlier test may end meanwhile)."""
    after = process_state()
    assert after[:3] == before[:3]
    assert {t.name for t in after[3] - before[3]} == set()


def test_a_name_a_path_and_the_metrics_from_the_returned_object(server, rows, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    run = evaluate(f"vllm:test-model@{server.openai_base_url}",
                   evaluator=f"vllm:test-evaluator@{server.openai_base_url}",
                   data=str(data), task="both", results_dir=tmp_path / "res", n_workers=2,
                   max_retries=1, timeout=5)
    assert isinstance(run, EvaluationResult)
    assert_expected(run.results)
    assert run.results["generation"]["average_score"] == 6.5
    assert run.run_dir == tmp_path / "res" / "test-model"
    # .results is results.json's content.
    assert json.loads((run.run_dir / "results.json").read_text()) == run.results
    assert run.failed == 0


def test_a_notebook_model_object_and_rows_in_memory_twice_in_one_process(rows, tmp_path):
    before = process_state()
    model, judge = NotebookModel(), NotebookModel("notebook-judge")
    first = evaluate(model, evaluator=judge, data=rows, results_dir=tmp_path / "res", n_workers=2)
    assert_expected(first.results)
    assert first.run_dir == tmp_path / "res" / "notebook-model"
    assert first.results["settings"]["evaluator"] == "notebook-judge"
    assert first.results["usage"]["this_invocation"]["model"]["calls"] == 2
    calls = len(model.prompts) + len(judge.prompts)
    assert calls > 0
    assert_nothing_left_behind(before)

    # The same call again resumes: nothing left to do, no call, the same metrics.
    second = evaluate(model, evaluator=judge, data=rows, results_dir=tmp_path / "res", n_workers=2)
    assert len(model.prompts) + len(judge.prompts) == calls
    assert second.results["inference"] == first.results["inference"]
    assert second.results["this_invocation"]["found_done"] == 2
    assert second.results["usage"]["this_invocation"]["model"]["calls"] == 0
    assert_nothing_left_behind(before)
    # The rows were written once, where the run records its data came from.
    (written,) = (tmp_path / "res" / ".inputs").iterdir()
    assert first.results["settings"]["data_source"] == str(written)
    assert model.cache is None  # the caller's object is given back as it came


def test_the_engine_prints_nothing_its_events_reach_the_callers_callback(rows, tmp_path, capsys):
    """Notes, progress lines and warnings are events: with ``on_event`` the caller gets them and
    stderr stays empty. The caller's Model objects are not rewritten (the run works on copies)."""
    model, judge = NotebookModel(), NotebookModel("notebook-judge")
    state = (dict(vars(model)), dict(vars(judge)))
    received = []
    evaluate(model, evaluator=judge, data=rows, results_dir=tmp_path / "res", n_workers=1,
             progress_every=1, model_args={"temperature": 0.2}, on_event=received.append)
    assert capsys.readouterr().err == ""
    progress = [e.message for e in received if e.kind == "progress"]
    assert len(progress) == 2 and ": 2/2 instances (100%), 0 failed" in progress[1]
    assert any(e.kind == "note" and "0 of 2 instances already done, 2 to run" in e.message for e in received)
    assert (dict(vars(model)), dict(vars(judge))) == state and model.overrides == {}
    assert model.usage.snapshot(model.name)["calls"] == 0 and len(model.prompts) > 0

    # Without a callback, the same events are lines on stderr.
    evaluate(model, evaluator=judge, data=rows, results_dir=tmp_path / "res", n_workers=1,
             model_args={"temperature": 0.2})
    assert "2 of 2 instances already done, 0 to run" in capsys.readouterr().err


def test_a_datasets_dataset(rows, tmp_path):
    datasets = pytest.importorskip("datasets")
    # The hub's parquet gives every session the same keys; a Dataset built from our rows too.
    table = datasets.Dataset.from_list(rows)
    run = evaluate(NotebookModel(), evaluator=NotebookModel("judge"), data=table,
                   results_dir=tmp_path / "res", n_workers=1)
    assert_expected(run.results)


def test_log_file_handler_is_closed_and_removed(rows, tmp_path):
    log_file = tmp_path / "run.log"
    evaluate(NotebookModel(), evaluator=NotebookModel("judge"), data=rows,
             results_dir=tmp_path / "res", log_file=str(log_file))
    assert log_file.exists()
    assert not [h for h in logging.getLogger("cupid").handlers
                if isinstance(h, logging.FileHandler)]


@pytest.mark.parametrize("kwargs, named", [
    ({"n_workers": 0}, "n_workers"),
    ({"task": "everything"}, "task"),
    ({"setting": "oracles"}, "setting"),
    ({"limit": -1}, "limit"),
    ({"timeout": "soon"}, "timeout"),
    ({"model_args": {"top_p": 0.5}}, "model_args"),
    ({"batch": "yes"}, "batch"),
    ({"rate_limit": ["tpm=lots"]}, "rate_limit"),
    ({"data": 42}, "data"),
    ({"data": [1, 2]}, "data"),
    ({"data": []}, "data"),
    ({"evaluator": 3}, "evaluator"),
])
def test_bad_arguments_are_value_errors_naming_the_argument(kwargs, named, tmp_path):
    kwargs = {"data": [{}], **kwargs}
    with pytest.raises(ValueError) as caught:
        evaluate(NotebookModel(), results_dir=tmp_path / "res", **kwargs)
    assert str(caught.value).startswith(named), str(caught.value)
    assert not (tmp_path / "res").exists() or not any((tmp_path / "res").rglob("run.json"))


@pytest.mark.parametrize("name", ["no_such_flag", "sweep", "dry_run"])
def test_an_argument_the_api_does_not_take_is_a_type_error_naming_it(name, tmp_path):
    """A sweep and a dry run are the command's; evaluate() is one run."""
    from cupid.synthesis import synthesize

    with pytest.raises(TypeError, match=name):
        evaluate(NotebookModel(), results_dir=tmp_path / "res", **{name: True})
    with pytest.raises(TypeError, match=name):
        synthesize(output_dir=tmp_path / "out", **{name: True})


def test_bad_data_is_bad_input_with_the_commands_line(tmp_path, rows):
    broken = dict(rows[0])
    del broken["current_request"]
    with pytest.raises(BadInput, match="current_request"):
        evaluate(NotebookModel(), evaluator=NotebookModel("j"), data=[broken],
                 results_dir=tmp_path / "res")
    with pytest.raises(BadInput, match="no such file"):
        evaluate(NotebookModel(), evaluator=NotebookModel("j"), data=str(tmp_path / "missing.jsonl"),
                 results_dir=tmp_path / "res")


def test_a_missing_key_stops_before_any_work(tmp_path, rows):
    with pytest.raises(SetupError, match="OPENAI_API_KEY"):
        evaluate("gpt-4o-mini", data=rows, results_dir=tmp_path / "res")
    assert not (tmp_path / "res" / "gpt-4o-mini").exists()


def test_a_failed_step_is_counted_not_raised(tmp_path, rows):
    class Flaky(NotebookModel):
        def __call__(self, system_prompt, user_prompt):
            if "persona-b" in user_prompt or "contrastive" in user_prompt:
                from cupid.utils.models.call_errors import PermanentModelError
                raise PermanentModelError("refused")
            return super().__call__(system_prompt, user_prompt)

    run = evaluate(Flaky("flaky"), evaluator=NotebookModel("judge"), data=rows,
                   results_dir=tmp_path / "res", max_retries=0)
    assert run.failed == 1
    assert run.results["counts"]["failed"] == 1


def test_importing_evaluate_does_not_import_the_run():
    import subprocess
    import sys

    root = ROOT
    code = ("import sys, cupid.evaluation as e; f = e.evaluate; "
            "print('cupid.evaluation.run' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", "import sys, cupid.evaluation; "
                           "print('cupid.evaluation.api' in sys.modules)"],
                          cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc.stderr
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------------------------------
# synthesize()
# ---------------------------------------------------------------------------------------
def test_synthesize_returns_the_instances_then_evaluate_takes_them(fake_server, tmp_path):
    from cupid.synthesis import SynthesisResult, synthesize
    from synthesis_responder import ScriptedSynthesis

    fake_server.responder = ScriptedSynthesis()
    url = fake_server.openai_base_url
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    out = synthesize(output_dir=tmp_path / "data", model=f"vllm:synth-model@{url}",
                     user_model=f"vllm:user-model@{url}", assistant_model=f"vllm:assistant-model@{url}",
                     decomposer_model=f"vllm:decomposer-model@{url}", n_personas=1,
                     persona_seeds="bundled", n_workers=4, no_progress=True)
    assert isinstance(out, SynthesisResult)
    assert (list(root.handlers), root.level) == before
    assert out.output_dir == tmp_path / "data" and out.failures == []
    assert len(out.instances) == out.summary["counts"]["instances"] == 3
    assert {i["instance_type"] for i in out.instances} == {"consistent", "contrastive", "changing"}
    # The instances are the evaluation's data as they are.
    from cupid.evaluation.data import InstanceSource

    assert InstanceSource(data_path=tmp_path / "data").validate() == 3
    n_requests = len(fake_server.requests)
    again = synthesize(output_dir=tmp_path / "data", model=f"vllm:synth-model@{url}",
                       user_model=f"vllm:user-model@{url}", assistant_model=f"vllm:assistant-model@{url}",
                       decomposer_model=f"vllm:decomposer-model@{url}", n_personas=1,
                       persona_seeds="bundled", n_workers=4, no_progress=True)
    assert len(fake_server.requests) == n_requests and again.instances == out.instances


@pytest.mark.parametrize("kwargs, named", [
    ({"n_personas": 0}, "n_personas"), ({"n_workers": "many"}, "n_workers"),
    ({"embedded": True, "all_models": "x"}, "embedded"), ({"rate_limit": "tpm=lots"}, "rate_limit"),
])
def test_synthesize_bad_arguments_name_the_argument(kwargs, named, tmp_path):
    from cupid.synthesis import synthesize

    with pytest.raises(ValueError) as caught:
        synthesize(output_dir=tmp_path / "out", **kwargs)
    assert str(caught.value).startswith(named)
    assert not (tmp_path / "out").exists()


def test_overrides_and_limit_on_a_notebook_model(rows, tmp_path):
    run = evaluate(NotebookModel("echo"), evaluator=NotebookModel("judge"), data=rows, limit=1,
                   model_args={"temperature": 0.2}, results_dir=tmp_path / "res")
    assert run.results["settings"]["model"] == "echo[temperature=0.2]"
    assert run.results["settings"]["generation_overrides"] == {"model": {"temperature": 0.2}}
    assert run.run_dir.parent == tmp_path / "res" and run.run_dir.name.startswith("echo_temperature_0.2_-")
    assert run.results["counts"]["evaluated"] == 1


def test_samples_are_the_export_rows_and_recompute_the_metrics(rows, tmp_path):
    run = evaluate(NotebookModel(), evaluator=NotebookModel("judge"), data=rows, task="both",
                   results_dir=tmp_path / "res", n_workers=2)
    samples = run.samples
    assert sorted(r["instance_id"] for r in samples) == ["persona-a__consistent", "persona-b__contrastive"]
    assert {r["scorer"] for r in samples} == {"judge"}
    assert all(r["model"] == "notebook-model" and r["inference_status"] == "done" for r in samples)
    # The rows recompute results.json's micro precision and recall.
    precision = sum(r["n_predicted_matched"] for r in samples) / sum(r["n_predicted"] for r in samples)
    recall = sum(r["n_true_matched"] for r in samples) / sum(r["n_true"] for r in samples)
    assert precision == pytest.approx(run.results["inference"]["precision"]) == pytest.approx(0.5)
    assert recall == pytest.approx(run.results["inference"]["recall"]) == pytest.approx(0.6)
    assert [r["request"] for r in sorted(samples, key=lambda r: r["instance_id"])] == \
        [rows[0]["current_request"], rows[1]["current_request"]]  # read from the run's data
    frame = run.to_pandas()
    assert list(frame.columns) == list(samples[0]) and len(frame) == 2
    assert frame["judge_score"].mean() == pytest.approx(run.results["generation"]["average_score"])


def test_a_library_caller_gets_control_back_while_a_worker_is_blocked(rows, tmp_path):
    """The command ends the process when a hung request keeps a worker after a stop; a caller
    of evaluate() (a notebook's kernel) gets ``Interrupted`` back instead, with the worker
    still blocked, and the process lives on."""
    import os
    from cupid.utils.errors import Interrupted

    entered, release = threading.Event(), threading.Event()

    class Hung(NotebookModel):
        def __call__(self, system_prompt, user_prompt):
            entered.set()
            release.wait(30)
            return super().__call__(system_prompt, user_prompt)

    timer = threading.Timer(0, lambda: entered.wait(30) and os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        # not an ignored SIGINT, as in a background job without job control
        with default_dispositions_here(), pytest.raises(Interrupted) as caught:
            evaluate(Hung("hung"), evaluator=NotebookModel("judge"), data=rows, results_dir=tmp_path / "res",
                     n_workers=1)
        assert caught.value.exit_code == 130
        assert any(t.name.startswith("ThreadPoolExecutor") or t.name.startswith("cupid")
                   for t in threading.enumerate() if t.is_alive() and t is not threading.current_thread())
    finally:
        release.set()
        timer.join()
