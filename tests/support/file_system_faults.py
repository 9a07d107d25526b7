"""Real file-system faults for the storage tests of both pipelines: a small tmpfs to fill
(disk full), a read-only bind mount, and the one-line error a refused write must give.

Mounting needs root (or a user namespace that allows it); a test that cannot mount skips
with the reason ``mount`` returns."""
from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest


def mount(args: list[str], target: Path) -> str | None:
    """Run ``mount``; the reason it was refused, or None."""
    try:
        done = subprocess.run(["mount", *args, str(target)], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"mount unavailable: {exc}"
    return None if done.returncode == 0 else f"mount refused: {done.stderr.strip() or done.returncode}"


def umount(target: Path) -> None:
    subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=30)


@contextlib.contextmanager
def small_tmpfs_under(tmp_path: Path, covered_by: str) -> Iterator[Path]:
    """A 4 MB tmpfs mounted under ``tmp_path`` for a real disk-full, unmounted after; where
    mounting is refused the test skips, naming the test (``covered_by``) that covers the
    same path by injection."""
    target = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    target.mkdir()
    refused = mount(["-t", "tmpfs", "-o", "size=4m", "tmpfs"], target)
    if refused:
        pytest.skip(f"a small tmpfs is needed for a real disk-full ({refused}); {covered_by} covers "
                    f"it by injection")
    try:
        yield target
    finally:
        umount(target)


def read_only_view(source: Path, view: Path) -> str | None:
    """Mount ``source`` read-only at ``view`` (made); the reason it was refused, or None.
    The caller unmounts ``view``."""
    view.mkdir(exist_ok=True)
    refused = mount(["--bind", str(source)], view)
    if refused:
        return refused
    refused = mount(["-o", "remount,bind,ro"], view)
    if refused:
        umount(view)
        return f"remounting read-only: {refused}"
    return None


def fill(directory: Path) -> Path:
    """Fill the file system of ``directory`` to the last byte."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as handle:
        chunk = b"\0" * 65536
        try:
            while True:
                handle.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        try:
            while True:
                handle.write(b"\0")
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def assert_one_line_error(err: str, path_under: Path, what: str) -> None:
    """No traceback; exactly one ``error:`` line, naming a path under ``path_under`` and
    ``what`` the file system said."""
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert str(path_under) in errors[0] and what in errors[0], errors[0]


def refuse_atomic_writes(monkeypatch, errno_code: int, under: Path, refuse: Callable[[int], bool]) -> dict:
    """Make the atomic writes (utils.io's temporary files) under ``under`` fail with
    ``errno_code`` when ``refuse(number of such writes so far)`` is true. The returned state
    counts them (``writes``); ``state["on"] = False`` lets every write through again."""
    import cupid.utils.io

    real = cupid.utils.io.tempfile.mkstemp
    state = {"writes": 0, "on": True}

    def mkstemp(*args, **kwargs):
        directory = Path(kwargs.get("dir", "."))
        if state["on"] and under in (directory, *directory.parents):
            state["writes"] += 1
            if refuse(state["writes"]):
                raise OSError(errno_code, os.strerror(errno_code))
        return real(*args, **kwargs)

    monkeypatch.setattr(cupid.utils.io.tempfile, "mkstemp", mkstemp)
    return state
