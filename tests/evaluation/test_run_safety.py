"""The results directory under change, concurrency, hangs and hostile servers: stale data,
two processes on one directory, Ctrl-C during hung requests, unreachable endpoints, colliding
file names, broken files, keys echoed by a server, the log file, orphan temporary files.
Concurrency and signals use real processes (``python -m evaluation.run``)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cupid import config
from cupid_responder import CupidResponder, make_row
from cupid.evaluation import run as run_module
from fake_llm_server import FakeLLMServer, FakeResponse
from repo_paths import ROOT
from stop_signal_dispositions import default_dispositions

STEPS = ("infer", "decompose", "match_precision", "match_recall", "generate", "judge")


pytestmark = pytest.mark.usefixtures("fast_retries")  # tests/evaluation/conftest.py


def write_rows(path: Path, plans, personas) -> Path:
    rows = [make_row(p, "consistent", plans[i % 2], n_sessions=8) for i, p in enumerate(personas)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@pytest.fixture
def data_file(tmp_path, plans):
    return write_rows(tmp_path / "data.jsonl", plans, ["persona-a", "persona-b"])


@pytest.fixture
def server(plans):
    responder = CupidResponder(plans)
    with FakeLLMServer(responder=responder) as srv:
        srv.cupid = responder
        yield srv


def cli(server, data, results_dir, *extra):
    return ["--model", f"vllm:test-model@{server.openai_base_url}",
            "--evaluator", f"vllm:test-evaluator@{server.openai_base_url}",
            "--data", str(data), "--results_dir", str(results_dir),
            "--n_workers", "2", "--max_retries", "2", "--timeout", "20", *extra]


def results_of(base: Path) -> dict:
    return json.loads((base / "test-model" / "results.json").read_text())


def spawn(args, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUPID_RETRY_BASE_DELAY": "0.01",
           "CUPID_RETRY_MAX_DELAY": "0.05", **kwargs.pop("env", {})}
    return subprocess.Popen([sys.executable, "-m", "cupid.evaluation.run", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def done_steps(record: dict) -> set[str]:
    done = {n for n, s in record["steps"].items() if s["status"] == "done"}
    for ev in record["evaluations"].values():
        done |= {n for n, s in ev["steps"].items() if s["status"] == "done"}
    return done


# -- 1. stale results --------------------------------------------------------------------
def test_changed_data_under_the_same_ids_is_refused_naming_the_instance(server, data_file, tmp_path,
                                                                       plans, capsys):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base)) == 0
    manifest = json.loads((base / "test-model" / "run.json").read_text())
    assert manifest["data"]["path"] == str(data_file.resolve()) and manifest["data"]["fingerprint"]
    record = json.loads((base / "test-model" / "persona-a__consistent.json").read_text())
    assert len(record["fingerprint"]) == 32
    other = tmp_path / "other.jsonl"
    rows = [json.loads(line) for line in data_file.read_text().splitlines()]
    rows[0]["current_request"] += " Please be brief."
    other.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    calls = len(server.requests)
    capsys.readouterr()
    assert run_module.main(cli(server, other, base)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "persona-a__consistent" in err
    assert "persona-b" not in err.split("instance(s) with the same id:")[1].split("(")[0]
    assert len(server.requests) == calls
    assert results_of(base)["inference"]["n_predicted"] == 3  # the first data's results, untouched


def test_other_data_with_other_ids_is_refused_by_the_manifest(server, data_file, tmp_path, plans, capsys):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base)) == 0
    other = write_rows(tmp_path / "y.jsonl", plans, ["persona-x", "persona-y"])
    capsys.readouterr()
    assert run_module.main(cli(server, other, base)) == 2
    err = capsys.readouterr().err
    assert "data:" in err and str(other.resolve()) in err and str(data_file.resolve()) in err


# -- 2. concurrent runs ---------------------------------------------------------------------
@pytest.mark.slow
def test_two_tasks_at_once_on_one_directory_keep_every_result(tmp_path, plans):
    personas = [f"persona-{i:02d}" for i in range(8)]
    data = write_rows(tmp_path / "many.jsonl", plans, personas)
    with FakeLLMServer(responder=CupidResponder(plans), latency=0.05) as server:
        base = tmp_path / "res"
        procs = [spawn(cli(server, data, base, "--task", task, "--no_cache"))
                 for task in ("inference", "generation")]
        outs = [p.communicate(timeout=240) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        run_dir = base / "test-model"
        for persona in personas:
            record = json.loads((run_dir / f"{persona}__consistent.json").read_text())
            assert done_steps(record) == set(STEPS), persona
        # Each step asked once: 4 inference + 2 generation calls per instance.
        assert len(server.requests) == 6 * len(personas)
        results = results_of(base)
        assert results["inference_n_instances"] == 8 and results["generation"]["n_instances"] == 8


@pytest.mark.slow
def test_two_identical_runs_at_once_pay_for_each_call_once(tmp_path, plans):
    personas = [f"persona-{i:02d}" for i in range(8)]
    data = write_rows(tmp_path / "many.jsonl", plans, personas)
    with FakeLLMServer(responder=CupidResponder(plans), latency=0.05) as server:
        base = tmp_path / "res"
        args = cli(server, data, base, "--task", "both", "--no_cache")
        procs = [spawn(args) for _ in range(2)]
        outs = [p.communicate(timeout=240) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        assert len(server.requests) == 6 * len(personas)
        assert results_of(base)["counts"]["evaluated"] == 8
        # The second process reports what it found done or ran, and nothing remaining.
        assert all("remaining 0" in out for out, _ in outs), outs


def test_an_instance_locked_by_another_process_is_not_worked_on(server, data_file, tmp_path, monkeypatch):
    base = tmp_path / "res"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time; p = sys.argv[1]; os.makedirs(os.path.dirname(p), exist_ok=True);"
        "fd = os.open(p, os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX);"
        "print('locked', flush=True); time.sleep(60)"),
        str(base / "test-model" / ".locks" / "persona-a__consistent.json.lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        monkeypatch.setattr(config, "LOCK_WAIT_S", 0.5)
        assert run_module.main(cli(server, data_file, base)) == 0
        assert not (base / "test-model" / "persona-a__consistent.json").exists()
        this = results_of(base)["this_invocation"]
        assert this["in_progress_elsewhere"] == 1 and this["remaining"] == 1 and this["ran"] == 1
    finally:
        holder.kill()  # kill -9 frees the lock: a rerun finishes the instance
        holder.wait()
    assert run_module.main(cli(server, data_file, base)) == 0
    assert results_of(base)["this_invocation"]["remaining"] == 0


# -- 3. Ctrl-C while requests hang ----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("second_sigint", [False, True])
def test_sigint_stops_a_run_whose_requests_hang(tmp_path, data_file, plans, second_sigint):
    def hang(req):
        return FakeResponse(hang=True)

    with FakeLLMServer(responder=hang) as server:
        # SIGINT at its default, as a shell's background job would not have it.
        proc = spawn(cli(server, data_file, tmp_path / "res", "--timeout", "300"),
                     preexec_fn=default_dispositions)
        deadline = time.time() + 30
        while len(server.requests) < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert len(server.requests) >= 2
        sent = time.time()
        proc.send_signal(signal.SIGINT)
        if second_sigint:
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=20)
        assert proc.returncode == 130
        assert time.time() - sent < (2 if second_sigint else 8)
    # What finished is kept: the manifest and results.json (nothing finished yet) exist.
    assert (tmp_path / "res" / "test-model" / "run.json").exists()


# -- 4. pre-flight -----------------------------------------------------------------------------
def test_unreachable_base_url_stops_before_work(tmp_path, data_file, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-preflight-0000")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    from model_state import reset_clients
    reset_clients()
    started = time.time()
    code = run_module.main(["--model", "gpt-4.1-nano-2025-04-14", "--data", str(data_file),
                            "--results_dir", str(tmp_path / "res")])
    assert code == 2 and time.time() - started < 15
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "127.0.0.1:9" in err[0] and "cannot reach" in err[0]
    assert not (tmp_path / "res").exists()  # no results folder, no cache file
    reset_clients()


def test_unreachable_evaluator_is_caught_too(server, tmp_path, data_file, capsys):
    args = cli(server, data_file, tmp_path / "res")
    args[args.index("--evaluator") + 1] = "vllm:test-evaluator@http://127.0.0.1:9/v1"
    assert run_module.main(args) == 2
    assert "127.0.0.1:9" in capsys.readouterr().err
    assert server.requests == [] and not (tmp_path / "res").exists()


def test_refused_key_mid_run_stops_at_once_and_never_stores_the_key(server, tmp_path, data_file,
                                                                     monkeypatch, capsys):
    key = "sk-live-SECRET-0123456789abcdef"
    monkeypatch.setenv("CUPID_LOCAL_SERVER_API_KEY", key)
    monkeypatch.setattr(config, "LOCAL_SERVER_API_KEY", key)
    original = server.cupid.__call__
    server.responder = lambda req: (FakeResponse(status=401, text=f"Incorrect API key provided: {key}")
                                    if server.cupid.kind(req) == "decompose" else original(req))
    log_file = tmp_path / "run.log"
    code = run_module.main(cli(server, data_file, tmp_path / "res", "--log_file", str(log_file)))
    assert code == 2
    captured = capsys.readouterr()
    assert "refused the API key" in captured.err and key not in captured.err + captured.out
    assert sum(server.cupid.kind(r) == "decompose" for r in server.requests) <= 2
    for path in [log_file, *(tmp_path / "res").rglob("*")]:
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    assert "[redacted]" in log_file.read_text()


def test_raw_answers_are_redacted(server, tmp_path, data_file, monkeypatch):
    key = "tok-9f8e7d6c5b4a39281706"
    monkeypatch.setenv("SOME_SERVICE_TOKEN", key)
    original = server.cupid.__call__

    def leaky(req):
        answer = original(req)
        return answer + f"\n(my key is {key})" if server.cupid.kind(req) == "infer" else answer

    server.responder = leaky
    run_module.main(cli(server, data_file, tmp_path / "res", "--no_cache"))
    record = (tmp_path / "res" / "test-model" / "persona-a__consistent.json").read_text()
    assert key not in record and "[redacted]" in record
    assert not any(key.encode() in p.read_bytes() for p in (tmp_path / "res").rglob("*") if p.is_file())


# -- 5. injective file names -------------------------------------------------------------------
def test_ids_that_used_to_share_a_file_get_their_own(server, tmp_path, plans):
    rows = [make_row("x", "consistent", plans[0]), make_row("y", "consistent", plans[1])]
    rows[0]["instance_id"], rows[1]["instance_id"] = "results", "instance-results"
    data = tmp_path / "ids.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows))
    assert run_module.main(cli(server, data, tmp_path / "res")) == 0
    run_dir = tmp_path / "res" / "test-model"
    assert json.loads((run_dir / "+results.json").read_text())["instance_id"] == "results"
    assert json.loads((run_dir / "instance-results.json").read_text())["instance_id"] == "instance-results"
    assert results_of(tmp_path / "res")["counts"]["evaluated"] == 2


# -- 6. broken files ------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", [lambda text: text[:100],  # truncated
                                    lambda text: json.dumps({**json.loads(text), "evaluations": []})])
def test_truncated_instance_file_is_moved_aside_and_evaluated_again(server, data_file, tmp_path, capsys, damage):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--no_cache")) == 0
    path = base / "test-model" / "persona-a__consistent.json"
    path.write_text(damage(path.read_text()))
    calls = len(server.requests)
    capsys.readouterr()
    assert run_module.main(cli(server, data_file, base, "--no_cache")) == 0
    err = capsys.readouterr().err
    assert str(path) in err and "moved to" in err
    assert len(list(path.parent.glob("persona-a__consistent.json.corrupt-*"))) == 1
    assert len(server.requests) == calls + 4  # persona-a's four inference calls, nothing else
    assert results_of(base)["counts"]["evaluated"] == 2


def test_a_damaged_cache_file_is_skipped_line_by_line(server, data_file, tmp_path, capsys):
    base = tmp_path / "res"
    (base / ".llm_cache").mkdir(parents=True)
    damaged = base / ".llm_cache" / "otherhost-1-x.jsonl"
    damaged.write_bytes(b"this is not a cache entry\n" * 100)
    old_cache = base / ".llm_cache.sqlite"  # the former layout: left alone, not read
    old_cache.write_bytes(b"SQLite format 3\x00")
    assert run_module.main(cli(server, data_file, base)) == 0
    err = capsys.readouterr().err
    assert err.count(f"warning: {damaged}:") == 1 and "skipped" in err
    assert damaged.read_bytes() == b"this is not a cache entry\n" * 100
    assert old_cache.read_bytes() == b"SQLite format 3\x00"
    assert results_of(base)["counts"]["evaluated"] == 2


def test_corrupt_manifest_is_one_line_exit_2(server, data_file, tmp_path, capsys):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base)) == 0
    (base / "test-model" / "run.json").write_text('{"model": ')
    capsys.readouterr()
    assert run_module.main(cli(server, data_file, base)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run.json" in err[0] and "not valid JSON" in err[0]


@pytest.mark.parametrize("name, content, expected", [
    ("latin1.jsonl", b'{"persona_id": "caf\xe9"}\n', "not UTF-8"),
    ("latin1.json", b'[{"persona_id": "caf\xe9"}]', "not UTF-8"),
    ("broken.parquet", b"PAR1 this is not parquet PAR1", "not a readable parquet file"),
    ("bad.json", b'[{"persona_id": ', "not valid JSON"),
])
def test_broken_data_files_are_one_line_exit_2_and_nothing_written(server, tmp_path, capsys, name,
                                                                   content, expected):
    path = tmp_path / name
    path.write_bytes(content)
    assert run_module.main(cli(server, path, tmp_path / "res")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and expected in err[0]
    assert not (tmp_path / "res").exists() and server.requests == []


def test_unreachable_hub_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    code = run_module.main(["--model", "smollm2-135m", "--evaluator", "smollm2-135m",
                            "--dataset", "nobody/no-such-dataset", "--results_dir", str(tmp_path / "res")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nobody/no-such-dataset" in err[0]
    assert not (tmp_path / "res").exists()


# -- 7. log file and orphan temporary files --------------------------------------------------------
def test_log_file_records_retries_and_timings(server, data_file, tmp_path):
    server.script(FakeResponse(status=500), FakeResponse(status=503))
    log_file = tmp_path / "logs" / "run.log"
    assert run_module.main(cli(server, data_file, tmp_path / "res", "--log_file", str(log_file))) == 0
    text = log_file.read_text()
    assert "INFO cupid.models" in text and "retrying in" in text
    assert "persona-a__consistent: done in" in text


def test_orphan_temporary_files_are_removed_at_start(server, data_file, tmp_path):
    from cupid.utils import io
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base)) == 0
    run_dir = base / "test-model"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    orphan = run_dir / f".persona-a__consistent.json.{io._HOST}~{dead}.x1y2.tmp"
    orphan.write_text("{")
    assert run_module.main(cli(server, data_file, base)) == 0
    assert not orphan.exists()


# -- issue 15: results.json is the directory's aggregate; reruns account and accumulate --------------
def test_rerun_of_one_task_keeps_the_other_tasks_numbers(server, data_file, tmp_path, capsys):
    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--task", "both")) == 0
    first = results_of(base)
    assert run_module.main(cli(server, data_file, base, "--task", "inference")) == 0
    again = results_of(base)
    assert again["generation"] == first["generation"] == {"average_score": 6.5, "n_instances": 2}
    assert again["inference"] == first["inference"]
    assert again["this_invocation"]["found_done"] == 2 and again["this_invocation"]["ran"] == 0
    assert again["settings"]["invocations"] == 2
    assert again["settings"]["wall_time_s"] >= first["settings"]["wall_time_s"]
    assert "found done 2 · ran 0 (0 failed) · remaining 0" in capsys.readouterr().out


def test_separate_invocations_aggregate_like_one_run(server, tmp_path, plans):
    """Two processes each given part of the data (as shards would be) aggregate to the
    numbers of one run over all of it."""
    both = write_rows(tmp_path / "all.jsonl", plans, ["persona-a", "persona-b"])
    assert run_module.main(cli(server, both, tmp_path / "one", "--task", "both")) == 0
    assert run_module.main(cli(server, both, tmp_path / "two", "--task", "both", "--limit", "1")) == 0
    assert run_module.main(cli(server, both, tmp_path / "two", "--task", "both")) == 0
    one, two = results_of(tmp_path / "one"), results_of(tmp_path / "two")
    for key in ("inference", "inference_macro", "generation", "by_instance_type"):
        assert one[key] == two[key], key


def test_synthesis_rerun_removes_orphan_temporary_files(tmp_path):
    from cupid.synthesis import run as synthesis_run
    from synthesis_responder import ScriptedSynthesis
    from cupid.utils import io

    out = tmp_path / "synth"
    with FakeLLMServer(responder=ScriptedSynthesis()) as server:
        url = server.openai_base_url
        args = ["--output_dir", str(out), "--n_personas", "1", "--persona_seeds", "bundled",
                "--no_progress", "--model", f"vllm:synth@{url}", "--user_model", f"vllm:user@{url}",
                "--assistant_model", f"vllm:assistant@{url}", "--decomposer_model", f"vllm:dec@{url}"]
        assert synthesis_run.main(args) == 0
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout.strip()
        orphan = next(out.rglob("*.json")).parent / f".x.json.{io._HOST}~{dead}.abc.tmp"
        orphan.write_text("{")
        assert synthesis_run.main(args) == 0
        assert not orphan.exists()
