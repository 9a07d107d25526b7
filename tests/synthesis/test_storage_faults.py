"""The synthesis under a file system that refuses a write: disk full, read-only, permission
denied, a path component that is a file. The command prints one ``error:`` line naming the
file and the operation and one ``safe:`` line, exits 3 (as the evaluation does), shows no
traceback; a read-only directory costs no call; a rerun with room resumes and asks no call
already answered but those in flight at the failure; ``synthesize()`` raises StorageError
and leaves no thread behind.

Disk full and read-only use real processes on a small tmpfs and a read-only bind mount;
where mounting is refused those tests skip saying so, and the injected variants below (the
OSError raised at the write, in a worker thread) still run."""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest

from fake_llm_server import FakeLLMServer, FakeResponse
from file_system_faults import assert_one_line_error, fill, read_only_view, refuse_atomic_writes, small_tmpfs_under, umount
from repo_paths import ROOT
from cupid.synthesis import run as cli
from cupid.synthesis.pipeline import run_synthesis
from synthesis_responder import ScriptedSynthesis, stage_of
from tests.synthesis.test_pipeline import cli_args, make_config, request_key, specs
from cupid.utils.io import STORAGE_EXIT, StorageError, read_json
from cupid.utils.models.retry import CANCEL

N_WORKERS = 2


def spawn(server: FakeLLMServer, out: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "cupid.synthesis.run",
            *cli_args(server, out, "--n_personas", "1", "--persona_seeds", "bundled",
                      "--n_workers", str(N_WORKERS), *extra)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUPID_RETRY_BASE_DELAY": "0.01",
           "CUPID_RETRY_MAX_DELAY": "0.05"}
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def reference_requests(tmp_path: Path, n_workers: int = N_WORKERS) -> Counter:
    """What an uninterrupted run of one persona asks."""
    with FakeLLMServer(responder=ScriptedSynthesis()) as server:
        run_synthesis(make_config(server, tmp_path / f"reference-{uuid.uuid4().hex[:6]}",
                                  n_personas=1, n_workers=n_workers))
        return Counter(request_key(r) for r in server.requests)


def assert_resumed(first: list[dict], second: list[dict], reference: Counter, bound: int) -> None:
    """Together the two runs asked what one uninterrupted run asks; the second asked again at
    most ``bound`` calls of the first (those whose answers came after the failure)."""
    first_keys = Counter(request_key(r) for r in first)
    repeated = [r for r in second if request_key(r) in first_keys]
    assert len(repeated) <= bound, [stage_of(r) for r in repeated]
    assert set(first_keys) | {request_key(r) for r in second} == set(reference)
    assert len(first) + len(second) - len(repeated) == sum(reference.values())


def assert_whole(out: Path) -> None:
    """Every file is whole (valid JSON) and no temporary file is left behind."""
    for path in out.rglob("*.json"):
        read_json(path)
    assert not list(out.rglob(".*.tmp"))


def assert_complete(out: Path) -> None:
    assert len(list((out / "instances").glob("*.json"))) == 3
    assert read_json(out / "summary.json")["counts"]["personas_complete"] == 1
    assert_whole(out)


@pytest.fixture
def small_tmpfs(tmp_path):
    with small_tmpfs_under(tmp_path, covered_by="test_a_refused_write_in_a_worker_stops_the_run") as target:
        yield target


# -- real file systems ------------------------------------------------------------------------
@pytest.mark.slow
def test_disk_full_mid_run_is_one_line_and_a_rerun_resumes(small_tmpfs, tmp_path):
    reference = reference_requests(tmp_path)
    fill_at = sum(reference.values()) // 2  # among the dialogues
    scripted = ScriptedSynthesis()
    filled: list[Path] = []

    def responder(req):
        if not filled and len(server.requests) >= fill_at:
            filled.append(fill(small_tmpfs))
        return scripted(req)

    with FakeLLMServer(responder=responder, latency=0.01) as server:
        out = small_tmpfs / "data"
        first = spawn(server, out)
        assert first.returncode == STORAGE_EXIT, first.stderr[-3000:]
        assert_one_line_error(first.stderr, out, "disk full (ENOSPC)")
        assert "safe:" in first.stderr and "rerun the same command" in first.stderr
        asked = server.requests
        assert fill_at <= len(asked) < sum(reference.values())  # stopped before the end
        assert_whole(out)

        filled[0].unlink()
        second = spawn(server, out)
        assert second.returncode == 0, second.stderr[-3000:]
        assert "Traceback" not in second.stderr
        # Only the answers that came after the disk filled and could not be kept (the calls
        # in flight when it stopped) are asked again.
        assert_resumed(asked, server.requests[len(asked):], reference, bound=N_WORKERS)
    assert_complete(out)


@pytest.mark.slow
def test_read_only_output_dir_costs_no_call_and_a_rerun_resumes(tmp_path, fake_server):
    fake_server.responder = ScriptedSynthesis()
    source = tmp_path / "data"
    run_synthesis(make_config(fake_server, source, n_personas=1, n_workers=N_WORKERS))
    # A run that still has calls to make: a dialogue and the instances missing, no cache.
    persona_dir = next((source / "personas").iterdir())
    dialogue = persona_dir / "dialogues" / "03.json"
    kept = read_json(dialogue)
    dialogue.unlink()
    for path in (source / "instances").glob("*.json"):
        path.unlink()
    for path in (source / ".llm_cache").glob("*"):
        path.unlink()
    calls = len(fake_server.requests)

    view = tmp_path / "read-only"
    refused = read_only_view(source, view)
    if refused:
        pytest.skip(f"a read-only bind mount is needed ({refused}); "
                    f"test_a_refused_write_in_a_worker_stops_the_run covers EROFS by injection")
    try:
        proc = spawn(fake_server, view)
    finally:
        umount(view)
    assert proc.returncode == STORAGE_EXIT, proc.stderr[-3000:]
    assert_one_line_error(proc.stderr, view, "read-only file system (EROFS)")
    assert "nothing was run" in proc.stderr and "--output_dir" in proc.stderr
    assert len(fake_server.requests) == calls  # checked before any call

    # The same directory, writable: only the missing dialogue's calls are made.
    rerun = spawn(fake_server, source)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    asked = fake_server.requests[calls:]
    assert asked and {stage_of(r) for r in asked} <= {"user_simulator", "assistant"}
    assert read_json(dialogue) == kept
    assert_complete(source)


@pytest.mark.parametrize("where", ["is_a_file", "under_a_file"])
def test_an_output_dir_that_is_a_file_is_one_line_and_no_call(tmp_path, fake_server, where):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory\n")
    out = blocker if where == "is_a_file" else blocker / "data"
    proc = spawn(fake_server, out)
    assert proc.returncode == STORAGE_EXIT, proc.stderr[-3000:]
    assert_one_line_error(proc.stderr, out, "not a directory (ENOTDIR)")
    assert "nothing was run" in proc.stderr
    assert fake_server.requests == []
    assert blocker.read_text() == "not a directory\n"


def test_a_log_file_that_cannot_be_opened_is_one_line(tmp_path, fake_server, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    code = cli.main(cli_args(fake_server, tmp_path / "data", "--n_personas", "1",
                             "--persona_seeds", "bundled", "--log_file", str(blocker / "run.log")))
    assert code == STORAGE_EXIT
    assert_one_line_error(capsys.readouterr().err, blocker / "run.log", "open the log file")
    assert fake_server.requests == []


# -- injected at the write, in a worker thread (always runs) -----------------------------------
def inject(monkeypatch, errno_code: int, under: Path, refuse) -> dict:
    """Make the atomic writes under ``under`` fail with ``errno_code`` when
    ``refuse(number of such writes so far)`` is true."""
    return refuse_atomic_writes(monkeypatch, errno_code, under, refuse)


def worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("synthesis-") and t.is_alive()]


@pytest.mark.parametrize("code,words", [(errno.ENOSPC, "disk full (ENOSPC)"),
                                        (errno.EACCES, "permission denied (EACCES)"),
                                        (errno.EROFS, "read-only file system (EROFS)")])
def test_a_refused_write_in_a_worker_stops_the_run(tmp_path, monkeypatch, capsys, code, words):
    n_workers = 4
    reference = reference_requests(tmp_path, n_workers)
    out = tmp_path / "data"
    scripted = ScriptedSynthesis()
    held: list[str] = []
    refused = threading.Event()
    late: list[str] = []
    # One dialogue call waits in the server until another worker's write is refused; it is
    # then answered with a retryable error, as is every call that comes later: a run that
    # stopped neither retries them nor starts new ones.
    hold_at = sum(reference.values()) // 2

    def responder(req):
        if not refused.is_set() and not held and len(server.requests) >= hold_at \
                and stage_of(req) in ("user_simulator", "assistant"):
            held.append(request_key(req))
            refused.wait(timeout=20)
        elif refused.is_set():
            late.append(request_key(req))
        if refused.is_set():
            CANCEL.wait(timeout=1.0)
            return FakeResponse(status=503)
        return scripted(req)

    def refuse(writes: int) -> bool:  # the first dialogue written after the call was held
        if held:
            refused.set()
        return bool(held)

    state = inject(monkeypatch, code, out / "personas", refuse)
    with FakeLLMServer(responder=responder) as server:
        args = cli_args(server, out, "--n_personas", "1", "--persona_seeds", "bundled",
                        "--n_workers", str(n_workers))
        assert cli.main(args) == STORAGE_EXIT
        err = capsys.readouterr().err
        assert held, "no dialogue call was held"
        assert_one_line_error(err, out / "personas", words)
        assert "safe:" in err and "rerun the same command" in err
        assert not worker_threads()
        assert_whole(out)
        first = server.requests
        assert Counter(request_key(r) for r in first)[held[0]] == 1  # not retried
        assert len(late) <= n_workers  # at most the calls already on their way

        state["on"] = False
        server.responder = ScriptedSynthesis()
        assert cli.main(args) == 0
        assert_resumed(first, server.requests[len(first):], reference, bound=n_workers)
    assert_complete(out)


def test_synthesize_raises_storage_error_and_leaves_nothing_running(tmp_path, fake_server, monkeypatch):
    import logging

    from cupid.synthesis import synthesize

    fake_server.responder = ScriptedSynthesis()
    out = tmp_path / "data"
    inject(monkeypatch, errno.ENOSPC, out / "personas", lambda writes: writes > 3)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    root_handlers = list(logging.getLogger().handlers)
    with pytest.raises(StorageError) as refused:
        synthesize(output_dir=out, n_personas=1, persona_seeds="bundled", n_workers=4,
                   no_progress=True, **specs(fake_server))
    assert "disk full (ENOSPC)" in str(refused.value) and str(out / "personas") in str(refused.value)
    assert not worker_threads()
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    assert logging.getLogger().handlers == root_handlers
    assert_whole(out)


def test_a_cache_that_stops_writing_on_a_full_disk_stops_the_run_at_once(tmp_path, fake_server,
                                                                          monkeypatch, capsys):
    """The cache's write fails first (it keeps the answer in memory and goes on); the output
    directory refuses a write too: the run stops before its next call, whose answer could
    not be kept either."""
    from cupid.utils.models.cache import ResponseCache

    scripted = ScriptedSynthesis()
    full = threading.Event()
    late: list[dict] = []
    fill_at = 20  # among the dialogues of the one persona

    def responder(req):
        if full.is_set():
            late.append(req)
        elif len(fake_server.requests) >= fill_at and stage_of(req) in ("user_simulator", "assistant"):
            full.set()
        return scripted(req)

    real_put = ResponseCache.put

    def put(self, key, completion):
        if full.is_set():
            self.writable = False  # as after a refused append: kept in memory only
        return real_put(self, key, completion)

    fake_server.responder = responder
    monkeypatch.setattr(ResponseCache, "put", put)
    out = tmp_path / "data"
    inject(monkeypatch, errno.ENOSPC, out, lambda writes: full.is_set())
    args = cli_args(fake_server, out, "--n_personas", "1", "--persona_seeds", "bundled",
                    "--n_workers", "1")
    assert cli.main(args) == STORAGE_EXIT
    err = capsys.readouterr().err
    assert_one_line_error(err, out, "disk full (ENOSPC)")
    assert late == []  # no call after the one whose answer could not be kept
    assert_whole(out)


def test_a_cache_that_cannot_be_kept_is_one_warning_and_the_run_goes_on(tmp_path, fake_server, capsys):
    """The response cache's directory is taken by a file: the run warns once (not once per
    console handler) and goes on, keeping its answers in memory."""
    fake_server.responder = ScriptedSynthesis()
    out = tmp_path / "data"
    out.mkdir()
    (out / ".llm_cache").write_text("not a directory\n")
    args = cli_args(fake_server, out, "--n_personas", "1", "--persona_seeds", "bundled", "--n_workers", "1")
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    cache_lines = [line for line in err.splitlines() if ".llm_cache" in line]
    assert len(cache_lines) == 1, cache_lines
    assert cache_lines[0].startswith("warning: ")
    assert_complete(out)
