"""Real file-system faults for the storage tests of both pipelines: a small tmpfs to fill
(disk full), a read-only bind mount, and the one-line error a refused write must give.

Mounting needs root (or a user namespace that allows it); a test that cannot mount skips
with the reason ``mount`` returns."""
from __future__ import annotations

import errno
import subprocess
from pathlib import Path


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
