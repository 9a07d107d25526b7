"""Synthesis in batch mode (--batch) on a disk that fills after a batch round, on a real
small tmpfs (skipped, saying why, where mounting is refused), with the batch endpoints of
the loopback server: one ``error:`` line naming the file, one ``safe:`` line, exit 3; the
rerun with room resumes the batch it recorded (polls it, submits no request twice) and
makes the files an online run makes."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cupid import config
from file_system_faults import assert_one_line_error, fill
from repo_paths import ROOT
from cupid.synthesis import run as cli
from cupid.synthesis.pipeline import run_synthesis
from synthesis_responder import ScriptedSynthesis, stage_of
from tests.synthesis.test_batch_mode import cli_args, data_files, make_config, submitted_ids
from tests.synthesis.test_storage_faults import assert_whole, small_tmpfs  # noqa: F401 (a fixture)
from cupid.utils.io import STORAGE_EXIT, read_json
from cupid.utils.models.batch import BatchRunner

pytestmark = pytest.mark.slow


@pytest.fixture
def env(fake_llm_env):
    fake_llm_env.responder = ScriptedSynthesis()
    return fake_llm_env


def spawn(server, out: Path) -> subprocess.CompletedProcess:
    child_env = {**os.environ, "PYTHONPATH": str(ROOT), "CUPID_BATCH_POLL_INTERVAL": "0.05"}
    return subprocess.run([sys.executable, "-m", "cupid.synthesis.run", *cli_args(server, out, "--batch")],
                          cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=300)


def rounds(out: Path) -> list[tuple[int, bool]]:
    return [(b["round"], b["fetched"]) for b in read_json(out / "batches.json")["batches"]]


def assert_stopped_cleanly(proc: subprocess.CompletedProcess, out: Path) -> None:
    assert proc.returncode == STORAGE_EXIT, proc.stderr[-3000:]
    assert_one_line_error(proc.stderr, out, "disk full (ENOSPC)")
    (safe,) = [line for line in proc.stderr.splitlines() if line.startswith("safe:")]
    assert str(out / "batches.json") in safe and "rerun the same command" in safe
    assert_whole(out)


def test_disk_full_while_a_rounds_answers_are_recorded_resumes_that_batch(env, tmp_path,
                                                                          small_tmpfs):
    """The disk fills while the provider answers the factors' batch (round 2), which the
    run recorded when it submitted it; the rerun polls that batch instead of submitting it."""
    run_synthesis(make_config(env, tmp_path / "online"))
    scripted = ScriptedSynthesis()
    filled: list[Path] = []

    def responder(req):
        if not filled and req["path"] == "batch" and stage_of(req) == "factors":
            filled.append(fill(small_tmpfs))
        return scripted(req)

    env.responder = responder
    out = small_tmpfs / "data"
    first = spawn(env, out)
    assert filled, first.stderr[-3000:]
    assert_stopped_cleanly(first, out)
    assert rounds(out) == [(1, True), (2, False)]
    assert env.batch_items == 3 and not (out / "instances").exists()

    filled[0].unlink()
    second = spawn(env, out)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming 1 submitted batch" in second.stderr
    ids = submitted_ids(env)
    assert len(ids) == len(set(ids)) == env.batch_items == 5  # as one clean run: none twice
    # The resumed batch fetched; the rerun's own round (numbered from 1 in each invocation).
    assert [fetched for _, fetched in rounds(out)] == [True, True, True]
    assert data_files(out) == data_files(tmp_path / "online")
    assert read_json(out / "summary.json")["counts"]["instances"] == 6


def test_disk_full_when_a_stage_writes_a_rounds_answers_submits_nothing_again(
        env, tmp_path, small_tmpfs, monkeypatch, capsys):
    """The disk fills just after the factors' batch is recorded fetched, so that writing
    factors.json is refused; the rerun replays the kept answers and submits nothing again."""
    run_synthesis(make_config(env, tmp_path / "online"))
    monkeypatch.setattr(config, "BATCH_POLL_INTERVAL", 0.05)
    record = BatchRunner._record
    filled: list[Path] = []

    def record_then_fill(self, entry):
        record(self, entry)
        if not filled and entry["round"] == 2 and entry["fetched"]:
            filled.append(fill(small_tmpfs))

    monkeypatch.setattr(BatchRunner, "_record", record_then_fill)
    out = small_tmpfs / "data"
    args = cli_args(env, out, "--batch")
    assert cli.main(args) == STORAGE_EXIT
    err = capsys.readouterr().err
    assert filled, err[-3000:]
    assert_one_line_error(err, out / "personas", "disk full (ENOSPC)")
    assert any(line.startswith("safe:") and "batches.json" in line for line in err.splitlines())
    assert_whole(out)
    assert rounds(out) == [(1, True), (2, True)]
    assert not list((out / "personas").glob("*/factors.json"))
    assert env.batch_items == 3

    filled[0].unlink()
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    assert "resuming" not in err
    ids = submitted_ids(env)
    assert len(ids) == len(set(ids)) == env.batch_items == 5
    assert data_files(out) == data_files(tmp_path / "online")


def test_a_batch_whose_answers_the_cache_could_not_keep_is_fetched_again_not_resubmitted(
        env, tmp_path, monkeypatch, capsys):
    """The response cache stops writing as the factors' batch (round 2) is fetched (its
    directory refuses the append; batches.json can still be written), and the run is stopped
    before factors.json is written. The answers lived only in memory, so batches.json must
    not call that batch fetched: the rerun fetches it again (free) rather than submit its
    requests again (paid twice)."""
    from cupid.utils.models.cache import ResponseCache

    run_synthesis(make_config(env, tmp_path / "online"))
    monkeypatch.setattr(config, "BATCH_POLL_INTERVAL", 0.05)
    refusing = {"on": False}
    put, fetch = ResponseCache.put, BatchRunner._fetch

    def put_refused(self, key, completion):
        if refusing["on"]:
            self.writable = False  # as after a refused append: kept in memory only
        return put(self, key, completion)

    def fetch_then_stop(self, entry, model, adapter, status=""):
        refusing["on"] = self.rounds == 2
        fetch(self, entry, model, adapter, status)
        if self.rounds == 2:
            raise KeyboardInterrupt  # stopped before the next pass writes factors.json

    monkeypatch.setattr(ResponseCache, "put", put_refused)
    monkeypatch.setattr(BatchRunner, "_fetch", fetch_then_stop)
    out = tmp_path / "batch"
    args = cli_args(env, out, "--batch")
    assert cli.main(args) == 130
    err = capsys.readouterr().err
    assert "could not be written to the response cache" in err
    assert rounds(out) == [(1, True), (2, False)]
    assert env.batch_items == 3

    monkeypatch.setattr(ResponseCache, "put", put)
    monkeypatch.setattr(BatchRunner, "_fetch", fetch)
    assert cli.main(args) == 0
    assert "resuming 1 submitted batch" in capsys.readouterr().err
    ids = submitted_ids(env)
    assert len(ids) == len(set(ids)) == env.batch_items == 5
    assert data_files(out) == data_files(tmp_path / "online")
