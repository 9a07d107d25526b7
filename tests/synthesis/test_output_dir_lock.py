"""One synthesis run per output directory, with real processes against the loopback server.

Without the lock two runs on one directory both paid for the calls neither had written yet
(a persona's description, checklists, dialogues) and overwrote each other's files: with a
sampling model, personas.json kept one run's description while factors.json had been made
from the other's. Now the second run stops at once: one ``error:`` line naming the directory
and the holder's pid and host, exit 2, no call; ``synthesize()`` raises OutputDirInUse;
``--dry_run`` needs no lock; a run killed with SIGKILL never blocks the next (the kernel
frees an ``flock``)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from fake_llm_server import FakeLLMServer
from repo_paths import ROOT
from synthesis_responder import ScriptedSynthesis
from tests.synthesis.test_pipeline import cli_args, request_key, specs
from cupid.synthesis.outputs import RUN_LOCK, read_holder
from cupid.utils.io import read_json

pytestmark = pytest.mark.slow


def command(server: FakeLLMServer, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cupid.synthesis.run",
            *cli_args(server, out, "--n_personas", "1", "--persona_seeds", "bundled",
                      "--n_workers", "1", *extra)]


def child_env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


class Gate:
    """A responder that holds the first call in the server until ``open()``: the run that
    made it is mid-run, holding its output directory, for as long as the test needs."""

    def __init__(self) -> None:
        self.scripted = ScriptedSynthesis()
        self.held = threading.Event()
        self.opened = threading.Event()

    def __call__(self, req: dict):
        if not self.held.is_set():
            self.held.set()
            self.opened.wait(timeout=120)
        return self.scripted(req)

    def open(self) -> None:
        self.opened.set()


def start_held_run(server: FakeLLMServer, out: Path) -> subprocess.Popen:
    first = subprocess.Popen(command(server, out), cwd=ROOT, env=child_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert server.responder.held.wait(timeout=60), "the first run made no call"
    return first


def reference_keys(tmp_path: Path) -> Counter:
    with FakeLLMServer(responder=ScriptedSynthesis()) as server:
        proc = subprocess.run(command(server, tmp_path / "reference"), cwd=ROOT, env=child_env(),
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return Counter(request_key(r) for r in server.requests)


def test_a_second_run_on_the_same_directory_stops_before_any_call(tmp_path):
    from cupid.synthesis import synthesize
    from cupid.synthesis.pipeline import OutputDirInUse

    reference = reference_keys(tmp_path)
    out = tmp_path / "data"
    with FakeLLMServer(responder=Gate()) as server:
        first = start_held_run(server, out)
        try:
            started = time.monotonic()
            second = subprocess.run(command(server, out), cwd=ROOT, env=child_env(),
                                    capture_output=True, text=True, timeout=120)
            assert second.returncode == 2, second.stderr[-3000:]
            assert time.monotonic() - started < 30  # at once, not after waiting for the first
            (line,) = second.stderr.strip().splitlines()
            assert line.startswith("error: ") and str(out) in line
            assert f"pid {first.pid} on {socket.gethostname()}" in line
            assert "wait for it to end" in line and "another --output_dir" in line
            assert second.stdout == ""
            assert len(server.requests) == 1  # only the first run's held call

            with pytest.raises(OutputDirInUse) as refused:
                synthesize(output_dir=out, n_personas=1, persona_seeds="bundled", n_workers=1,
                           no_progress=True, **specs(server))
            assert refused.value.holder["pid"] == first.pid and str(out) in str(refused.value)
            assert len(server.requests) == 1

            forecast = subprocess.run(command(server, out, "--dry_run"), cwd=ROOT,
                                      env=child_env(), capture_output=True, text=True, timeout=120)
            assert forecast.returncode == 0, forecast.stderr[-3000:]
            assert len(server.requests) == 1
        finally:
            server.responder.open()
            stdout, stderr = first.communicate(timeout=300)
        assert first.returncode == 0, stderr[-3000:]
        # Every call was paid once, by the first run: what one run alone asks.
        assert Counter(request_key(r) for r in server.requests) == reference
    assert read_json(out / "summary.json")["counts"]["personas_complete"] == 1
    assert len(list((out / "instances").glob("*.json"))) == 3


def test_a_run_killed_with_sigkill_never_blocks_the_next(tmp_path):
    out = tmp_path / "data"
    with FakeLLMServer(responder=Gate()) as server:
        first = start_held_run(server, out)
        assert read_holder(out / RUN_LOCK)["pid"] == first.pid
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        server.responder.open()
        # The lock file stays, naming the dead run; the kernel freed its flock.
        assert (out / RUN_LOCK).exists() and read_holder(out / RUN_LOCK)["pid"] == first.pid
        second = subprocess.Popen(command(server, out), cwd=ROOT, env=child_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, stderr = second.communicate(timeout=300)
        assert second.returncode == 0, stderr[-3000:]
        assert "in use by" not in stderr
    assert read_holder(out / RUN_LOCK)["pid"] == second.pid
    assert read_json(out / "summary.json")["counts"]["personas_complete"] == 1


def test_a_second_batch_run_submits_no_batch_of_its_own(fake_llm_env, tmp_path):
    """--batch: without the lock the second run submitted every batch again and the two
    runs' batches.json overwrote each other (half the batch ids lost); now it stops while
    the first run's batch is in progress, and the first run's batches are all there is."""
    from tests.synthesis.test_batch_mode import cli_args as batch_args

    fake_llm_env.responder = ScriptedSynthesis()
    fake_llm_env.batch_delay = 60.0  # the first round's batch stays in progress
    out = tmp_path / "data"
    env = {**child_env(), "CUPID_BATCH_POLL_INTERVAL": "0.05"}
    args = [sys.executable, "-m", "cupid.synthesis.run", *batch_args(fake_llm_env, out, "--batch")]
    first = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not fake_llm_env.batches and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.02)
        assert len(fake_llm_env.batches) == 1, "the first run submitted no batch"
        second = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=60)
        assert second.returncode == 2, second.stderr[-3000:]
        assert f"pid {first.pid}" in second.stderr and "submitted" not in second.stderr
        assert len(fake_llm_env.batches) == 1 and fake_llm_env.batch_items == 1
    finally:
        fake_llm_env.batch_delay = 0.0
        _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr[-3000:]
    ids = [c for batch in fake_llm_env.batches.values() for c in batch["custom_ids"]]
    assert len(ids) == len(set(ids)) == 5  # one clean run's requests, each once
    saved = read_json(out / "batches.json")["batches"]
    assert sorted(b["batch_id"] for b in saved) == sorted(fake_llm_env.batches)
