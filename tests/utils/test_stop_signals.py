"""SIGTERM and SIGHUP (what SLURM sends before it kills a job, and a closed terminal)
stop a run as Ctrl-C does: within seconds, with results.json, run.json (this invocation's
time counted) and the summary written for what is done, exit 143 / 129, no traceback. The
handlers live only while a run does. Real processes against the loopback server."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cupid_responder import CupidResponder, make_row, two_instance_plans
from cupid.evaluation import run as run_module
from fake_llm_server import FakeLLMServer, FakeResponse
from cupid.utils.errors import Interrupted
from cupid.utils.stop_signals import SignalGuard, StopSignal, stop_status
from repo_paths import ROOT
from stop_signal_dispositions import default_dispositions, default_dispositions_here

INFERENCE_STEPS = {"infer", "decompose", "match_precision", "match_recall"}


@pytest.fixture
def plans():
    return two_instance_plans()


@pytest.fixture
def data_file(tmp_path, plans):
    rows = [make_row("persona-a", "consistent", plans[0]), make_row("persona-b", "consistent", plans[1])]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def cli(server, data, results_dir, *extra):
    return ["--model", f"vllm:test-model@{server.openai_base_url}",
            "--evaluator", f"vllm:test-evaluator@{server.openai_base_url}",
            "--data", str(data), "--results_dir", str(results_dir),
            "--n_workers", "2", "--max_retries", "2", "--timeout", "300", *extra]


def spawn(args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "cupid.evaluation.run", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_dispositions)


def done_steps(path: Path) -> set[str]:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return set()
    done = {n for n, s in record["steps"].items() if s["status"] == "done"}
    for ev in record.get("evaluations", {}).values():
        done |= {n for n, s in ev["steps"].items() if s["status"] == "done"}
    return done


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_stop_a_run_like_ctrl_c(tmp_path, data_file, plans, signum, code):
    """Instance A finishes, B's requests hang; the signal stops the run within seconds with
    A's results, this invocation's time and the summary written; a rerun finishes B."""
    cupid = CupidResponder(plans)

    def responder(req):
        if plans[1].request in req["messages"][-1]["content"]:
            return FakeResponse(hang=True)
        return cupid(req)

    results = tmp_path / "res"
    run_dir = results / "test-model"
    with FakeLLMServer(responder=responder) as server:
        started = time.time()
        proc = spawn(cli(server, data_file, results, "--task", "both"))
        deadline = time.time() + 60
        while done_steps(run_dir / "persona-a__consistent.json") != INFERENCE_STEPS | {"generate", "judge"}:
            assert time.time() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.3)
        before_signal = time.time() - started
        sent = time.time()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == code, err
        assert time.time() - sent < 8
    assert "Traceback" not in err and "cannot schedule new futures" not in err, err
    assert f"stopped by {signal.Signals(signum).name}: 1 of 2 instances finished" in err
    assert "CUPID · model test-model" in out and "evaluated 1" in out  # the summary
    results_json = json.loads((run_dir / "results.json").read_text())
    assert results_json["counts"]["evaluated"] == 1
    assert results_json["this_invocation"]["interrupted"] is True
    (invocation,) = json.loads((run_dir / "run.json").read_text())["invocations"]
    # The invocation's time is counted: from its start to the signal at least, less the
    # interpreter's start-up.
    assert before_signal - 5 < invocation["wall_time_s"] < before_signal + 8
    assert invocation["ran"] == 1 and invocation["remaining"] == 1

    with FakeLLMServer(responder=CupidResponder(plans)) as server:
        rerun = subprocess.run([sys.executable, "-m", "cupid.evaluation.run",
                                *cli(server, data_file, results, "--task", "both")],
                               cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                               capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    this = json.loads((run_dir / "results.json").read_text())["this_invocation"]
    assert (this["found_done"], this["ran"], this["remaining"]) == (1, 1, 0)


@pytest.mark.slow
def test_sigterm_during_batch_rounds_writes_the_files(tmp_path, data_file, fake_llm_env, plans):
    """SIGTERM while a batch is in progress: 143 within seconds, run.json and results.json
    written, the batch id kept for the rerun."""
    fake_llm_env.responder = CupidResponder(plans)
    fake_llm_env.batch_delay = 60
    results = tmp_path / "res"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUPID_BATCH_POLL_INTERVAL": "0.1"}
    args = ["--model", "gpt-4o-mini", "--evaluator", "gpt-4o-mini", "--data", str(data_file),
            "--results_dir", str(results), "--n_workers", "2", "--batch"]
    proc = subprocess.Popen([sys.executable, "-m", "cupid.evaluation.run", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_dispositions)
    state = results / "gpt-4o-mini" / "batches.json"
    deadline = time.time() + 60
    while not state.exists():
        assert time.time() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.3)
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and time.time() - sent < 8, err
    assert "Traceback" not in err and "rerun the same command to resume them" in err
    (invocation,) = json.loads((results / "gpt-4o-mini" / "run.json").read_text())["invocations"]
    assert invocation["interrupted"] and invocation["wall_time_s"] > 0
    assert invocation["batch"]["batches_submitted"] == 1 and invocation["batch"]["items_answered"] == 0
    assert (results / "gpt-4o-mini" / "results.json").exists()
    assert len(json.loads(state.read_text())["batches"]) == 1


def test_handlers_are_put_back_after_a_run(tmp_path, data_file, plans):
    """Two runs in one process: during each, SIGTERM raises StopSignal; after each, the
    handlers found before are back."""
    def mine(signum, frame):  # noqa: ARG001
        pass

    seen = []
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGTERM, mine)
    signal.signal(signal.SIGHUP, mine)
    try:
        cupid = CupidResponder(plans)

        def responder(req):
            seen.append(signal.getsignal(signal.SIGTERM))
            return cupid(req)

        with FakeLLMServer(responder=responder) as server:
            for n in range(2):
                assert run_module.main(cli(server, data_file, tmp_path / f"res{n}")) == 0
                assert signal.getsignal(signal.SIGTERM) is mine
                assert signal.getsignal(signal.SIGHUP) is mine
                assert signal.getsignal(signal.SIGINT) is old[signal.SIGINT]
        # The server's threads read the handler while the run's were installed.
        assert seen and all(h is not mine for h in seen)
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def test_a_run_from_another_thread_installs_no_handler(tmp_path, data_file, plans):
    """signal.signal raises outside the main thread: such a run goes without handlers."""
    before = signal.getsignal(signal.SIGTERM)
    codes = []
    with FakeLLMServer(responder=CupidResponder(plans)) as server:
        thread = threading.Thread(target=lambda: codes.append(
            run_module.main(cli(server, data_file, tmp_path / "res"))))
        thread.start()
        thread.join(120)
    assert codes == [0] and signal.getsignal(signal.SIGTERM) is before


def test_signal_guard_raises_defers_and_restores():
    with default_dispositions_here():  # not an ignored SIGHUP, as under nohup
        before = {s: signal.getsignal(s) for s in SignalGuard.SIGNALS}
        # A signal noted while the run wrote its last files and that nothing raised is not lost:
        # leaving the guard raises it (a run that returned just then still exits 143).
        with pytest.raises(Interrupted) as late:
            with SignalGuard() as guard:
                assert guard.active
                with pytest.raises(StopSignal) as stopped:
                    os.kill(os.getpid(), signal.SIGHUP)
                    time.sleep(1)
                assert stop_status(stopped.value) == 129
                guard.deferring()
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.1)
                assert guard.received == signal.SIGTERM
        assert late.value.exit_code == 143 and "stopped by SIGTERM after the work was done" in late.value.message
        assert {s: signal.getsignal(s) for s in SignalGuard.SIGNALS} == before
    assert stop_status(KeyboardInterrupt()) == 130


def test_an_ignored_signal_stays_ignored():
    """nohup ignores SIGHUP so that a run outlives its terminal: the guard keeps that."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with SignalGuard() as guard:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
            guard.deferring()
            guard.second_ends_process()
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)


def test_no_future_is_scheduled_after_the_run_stopped(tmp_path):
    """An instance still being worked on when a stopping run shut its pools ends with
    RunCancelled (as its next call would), not 'cannot schedule new futures after shutdown'."""
    from cupid.evaluation.pipeline import InstanceSteps, Pipeline
    from cupid.evaluation.strategies import PAPER_STRATEGIES
    from cupid.evaluation.store import RunStore
    from cupid.utils.models.call_errors import RunCancelled
    from cupid.utils.models.registry import resolve_model

    model = resolve_model("vllm:m@http://127.0.0.1:9/v1")
    pipeline = Pipeline(model=model, evaluator=model, store=RunStore(tmp_path / "r", {}), task="both",
                        setting=PAPER_STRATEGIES["default"])
    pipeline.close(wait=False)
    with pytest.raises(RunCancelled):
        InstanceSteps(pipeline, record=None).together(lambda: 1, lambda: 2)


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_synthesis_stops_on_sigterm_and_sighup(tmp_path, signum, code):
    """python -m synthesis.run: the signal stops it within seconds, summary.json says what
    was done and why it stopped, no traceback; a rerun finishes the data."""
    from synthesis_responder import ScriptedSynthesis
    from tests.synthesis.test_pipeline import cli_args

    out = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with FakeLLMServer(responder=ScriptedSynthesis(), latency=0.05) as server:
        args = [sys.executable, "-m", "cupid.synthesis.run",
                *cli_args(server, out, "--n_personas", "2", "--persona_seeds", "bundled", "--n_workers", "2")]
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=default_dispositions)
        deadline = time.time() + 120
        while len(list(out.glob("personas/*/dialogues/*.json"))) < 2:
            assert time.time() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        sent = time.time()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == code, err
        assert time.time() - sent < 8
        assert "Traceback" not in err and f"stopped by {signal.Signals(signum).name}" in err, err
        summary = json.loads((out / "summary.json").read_text())
        assert summary["stopped"] == f"stopped by {signal.Signals(signum).name}"
        assert summary["counts"]["dialogues"] >= 2 and summary["wall_time_s"] > 0

        rerun = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    final = json.loads((out / "summary.json").read_text())
    assert "stopped" not in final and final["counts"]["instances"] == 6


@pytest.mark.slow
def test_a_run_under_nohup_outlives_sighup(tmp_path, data_file, plans):
    """SIGHUP ignored when the run starts (nohup): the run goes on to the end."""
    cupid = CupidResponder(plans)
    with FakeLLMServer(responder=cupid, latency=0.2) as server:
        proc = subprocess.Popen([sys.executable, "-m", "cupid.evaluation.run",
                                 *cli(server, data_file, tmp_path / "res")],
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
        deadline = time.time() + 60
        while not server.requests:
            assert time.time() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads((tmp_path / "res" / "test-model" / "results.json").read_text())["counts"]["evaluated"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_an_embedded_synthesis_exits_cleanly(tmp_path, signum, code):
    """The embedded model decodes in a worker thread that no signal reaches: the process waits
    for its call before freeing the engine (freed under it, llama.cpp crashed the process with
    a segmentation fault, exit 139), and the call cut short is no failure of the persona."""
    pytest.importorskip("llama_cpp", reason="the embedded model needs llama-cpp-python")
    out = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "cupid.synthesis.run", "--embedded", "--n_personas", "1",
                             "--output_dir", str(out), "--no_progress"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_dispositions)
    deadline = time.time() + 180
    while not (out / "personas.json").exists():  # the templates are written before the first call
        assert time.time() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    time.sleep(4)  # the engine loaded, a description being decoded
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == code, err[-3000:]
    assert "Segmentation" not in err and "Traceback" not in err and "failed at" not in err, err[-3000:]
    assert not list(out.glob("personas/*/failure.json"))
    assert json.loads((out / "summary.json").read_text())["counts"]["personas_failed"] == 0
