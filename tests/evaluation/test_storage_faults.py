"""The file system refusing a write: disk full, read-only, permission denied, a directory
that vanished. A run ends with one line naming the path and the operation and what is safe,
exits 3, shows no traceback; a rerun with room heals and loses nothing already saved.

Disk full and read-only use real processes on a small tmpfs and a read-only bind mount
(root may mount here); where mounting is refused those tests skip saying so, and the
injected variants below (the OSError raised at the write) still run."""
from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pytest

from counts_check import assert_counts_agree
from cupid_responder import CupidResponder
from cupid.evaluation import run as run_module
from fake_llm_server import FakeLLMServer
from file_system_faults import (assert_one_line_error, fill, read_only_view, refuse_atomic_writes,
                                small_tmpfs_under, umount)
from cupid.utils.io import STORAGE_EXIT
from tests.evaluation.test_run_safety import cli, data_file, results_of, server, spawn  # noqa: F401

pytestmark = pytest.mark.usefixtures("fast_retries")  # tests/evaluation/conftest.py



@pytest.fixture
def small_tmpfs(tmp_path):
    with small_tmpfs_under(tmp_path, covered_by="test_disk_full_injected") as target:
        yield target


def reference_results(tmp_path, plans, data) -> dict:
    with FakeLLMServer(responder=CupidResponder(plans)) as srv:
        base = tmp_path / "reference"
        assert run_module.main(cli(srv, data, base, "--task", "both")) == 0
    return results_of(base)


def same_numbers(a: dict, b: dict) -> None:
    for key in ("inference", "generation", "inference_macro"):
        assert a[key] == b[key], key
    assert a["counts"]["evaluated"] == b["counts"]["evaluated"]


@pytest.mark.slow
def test_disk_full_mid_run_is_one_line_and_a_rerun_heals(small_tmpfs, tmp_path, plans, data_file):
    reference = reference_results(tmp_path, plans, data_file)
    cupid = CupidResponder(plans)
    filled: list[Path] = []

    def responder(req):
        if len(filled) == 0 and len(server.requests) >= 4:  # the 5th call's answer cannot be kept
            filled.append(fill(small_tmpfs))
        return cupid(req)

    with FakeLLMServer(responder=responder) as server:
        base = small_tmpfs / "res"
        args = cli(server, data_file, base, "--task", "both", "--n_workers", "1")
        first = spawn(args)
        out, err = first.communicate(timeout=240)
        assert first.returncode == STORAGE_EXIT, err
        assert_one_line_error(err, small_tmpfs, "disk full (ENOSPC)")
        assert "safe:" in err and "rerun the same command" in err
        asked_before = len(server.requests)
        assert asked_before <= 6  # it stopped instead of paying for answers it cannot keep

        filled[0].unlink()
        second = spawn(args)
        out, err = second.communicate(timeout=240)
        assert second.returncode == 0, err
        # Everything saved before the failure is reused: at most the call whose answer could
        # not be kept is asked again (the cache's open page may still have held it).
        assert 12 <= len(server.requests) <= 13
    results = assert_counts_agree(base / "test-model", out)
    same_numbers(results, reference)


@pytest.mark.slow
def test_read_only_results_directory_is_one_line(tmp_path, plans, data_file, server):
    source = tmp_path / "res"
    assert run_module.main(cli(server, data_file, source, "--task", "both")) == 0
    view = tmp_path / "read-only"
    refused = read_only_view(source, view)
    if refused:
        pytest.skip(f"a read-only bind mount is needed ({refused}); "
                    f"test_permission_denied_injected covers the same path by injection")
    try:
        calls = len(server.requests)
        proc = spawn(cli(server, data_file, view, "--task", "both"))
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == STORAGE_EXIT, err
        assert_one_line_error(err, view / "test-model", "read-only file system (EROFS)")
        assert len(server.requests) == calls
        # A broken instance file cannot be moved aside on a read-only directory: named too.
        (source / "test-model" / "persona-a__consistent.json").write_text("{broken")
        proc = spawn(cli(server, data_file, view, "--task", "both"))
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == STORAGE_EXIT, err
        assert_one_line_error(err, view / "test-model" / "persona-a__consistent.json",
                              "move the unreadable file aside")
    finally:
        umount(view)
    # The same directory, writable again: the broken file is redone from the cache.
    assert run_module.main(cli(server, data_file, source, "--task", "both")) == 0
    assert len(server.requests) == calls
    assert_counts_agree(source / "test-model")


# -- injected at the write (always runs) ------------------------------------------------------
def inject(monkeypatch, errno_code: int, after: int, under: Path) -> dict:
    """Make every atomic write under ``under`` fail with ``errno_code`` after ``after`` of
    them succeeded."""
    return refuse_atomic_writes(monkeypatch, errno_code, under, lambda writes: writes > after)


@pytest.mark.parametrize("code,words", [(errno.ENOSPC, "disk full (ENOSPC)"),
                                        (errno.EACCES, "permission denied (EACCES)"),
                                        (errno.EROFS, "read-only file system (EROFS)")])
def test_a_refused_write_mid_run_is_one_line_and_a_rerun_heals(server, data_file, tmp_path,
                                                               monkeypatch, capsys, code, words):
    base = tmp_path / "res"
    # run.json and a few step saves succeed, then the disk refuses.
    state = inject(monkeypatch, code, after=4, under=base / "test-model")
    args = cli(server, data_file, base, "--task", "both", "--n_workers", "1")
    assert run_module.main(args) == STORAGE_EXIT
    err = capsys.readouterr().err
    assert_one_line_error(err, base / "test-model", words)
    assert "safe:" in err
    asked = len(server.requests)
    assert asked < 12
    state["on"] = False
    assert run_module.main(args) == 0
    out = capsys.readouterr().out
    assert len(server.requests) == 12  # every answer already paid for came from the cache
    assert_counts_agree(base / "test-model", out)


def test_disk_full_injected_before_any_work(server, data_file, tmp_path, monkeypatch, capsys):
    base = tmp_path / "res"
    inject(monkeypatch, errno.ENOSPC, after=0, under=base / "test-model")
    assert run_module.main(cli(server, data_file, base, "--task", "both")) == STORAGE_EXIT
    err = capsys.readouterr().err
    assert_one_line_error(err, base / "test-model" / "run.json", "disk full (ENOSPC)")
    assert "nothing was run" in err
    assert len(server.requests) == 0


def test_a_vanished_run_directory_is_rebuilt_by_a_rerun(tmp_path, plans, data_file, capsys):
    cupid = CupidResponder(plans)
    base = tmp_path / "res"
    removed = []

    def responder(req):
        if not removed and len(server.requests) >= 6:
            removed.append(True)
            shutil.rmtree(base / "test-model", ignore_errors=True)
        return cupid(req)

    with FakeLLMServer(responder=responder) as server:
        args = cli(server, data_file, base, "--task", "both", "--n_workers", "1")
        code = run_module.main(args)
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert code in (0, STORAGE_EXIT), err
        if code == STORAGE_EXIT:  # a write found its directory gone: named, one line
            assert_one_line_error(err, base / "test-model", "no such file or directory (ENOENT)")
        assert run_module.main(args) == 0
        out = capsys.readouterr().out
        # Every step asked once over both runs (the cache replays what was removed), but
        # for at most the one in flight when the directory went.
        bodies = [json.dumps(r["body"], sort_keys=True) for r in server.requests]
        assert len(set(bodies)) == 12 and len(bodies) <= 13
    results = assert_counts_agree(base / "test-model", out)
    assert results["counts"]["evaluated"] == 2


def test_the_log_file_on_a_full_disk_is_one_warning(server, data_file, tmp_path, monkeypatch, capsys):
    from cupid.utils.io import LogFileHandler

    base = tmp_path / "res"
    log_file = tmp_path / "run.log"

    def full(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LogFileHandler, "flush", full)
    assert run_module.main(cli(server, data_file, base, "--task", "both",
                               "--log_file", str(log_file))) == 0
    err = capsys.readouterr().err
    assert err.count("cannot write the log") == 1 and "disk full (ENOSPC)" in err
    assert "Logging error" not in err and "Traceback" not in err


def test_the_report_on_a_full_disk_is_one_line(server, data_file, tmp_path, monkeypatch, capsys):
    from cupid.evaluation.report import command as report_cli

    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--task", "both")) == 0
    capsys.readouterr()
    out_dir = tmp_path / "report"
    inject(monkeypatch, errno.ENOSPC, after=0, under=out_dir)
    assert report_cli.main([str(base), "--output", str(out_dir), "--no_figures", "--no_html",
                            "--n_bootstrap", "10"]) == 1
    err = capsys.readouterr().err
    assert_one_line_error(err, out_dir / "report.csv", "disk full (ENOSPC)")
    assert not list(out_dir.glob(".report.csv*.tmp"))
    assert json.loads((base / "test-model" / "results.json").read_text())  # untouched


def test_the_export_on_a_full_disk_is_one_line(server, data_file, tmp_path, monkeypatch, capsys):
    from cupid.evaluation.report import command as report_cli

    base = tmp_path / "res"
    assert run_module.main(cli(server, data_file, base, "--task", "both")) == 0
    capsys.readouterr()
    out_dir = tmp_path / "export"
    inject(monkeypatch, errno.ENOSPC, after=0, under=out_dir)
    assert report_cli.main([str(base), "--export", str(out_dir / "samples.jsonl")]) == 1
    err = capsys.readouterr().err
    assert_one_line_error(err, out_dir / "samples.jsonl", "disk full (ENOSPC)")


def test_a_sweep_stops_at_the_first_refused_write(server, data_file, tmp_path, monkeypatch, capsys):
    base = tmp_path / "res"
    inject(monkeypatch, errno.ENOSPC, after=3, under=base)
    args = cli(server, data_file, base, "--task", "both", "--n_workers", "1")
    at = args.index("--model") + 1
    args[at + 1:at + 1] = [f"vllm:test-model-2@{server.openai_base_url}"]
    assert run_module.main(args) == STORAGE_EXIT
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "sweep run 2/2" not in err  # the second model is not started on a full disk
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1


@pytest.mark.slow
def test_a_read_only_cache_is_one_warning_and_the_run_completes(tmp_path, server, data_file):
    base = tmp_path / "res"
    cache_dir = base / ".llm_cache"
    cache_dir.mkdir(parents=True)
    refused = read_only_view(cache_dir, cache_dir)
    if refused:
        pytest.skip(f"a read-only bind mount is needed ({refused}); "
                    f"test_a_write_that_fails_midway_loses_nothing covers it by injection")
    try:
        proc = spawn(cli(server, data_file, base, "--task", "both"))
        out, err = proc.communicate(timeout=240)
    finally:
        umount(cache_dir)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "read-only file system (EROFS)" in warnings[0]
    assert len(server.requests) == 12
    results = assert_counts_agree(base / "test-model", out)
    assert results["counts"]["evaluated"] == 2
