"""Files that survive a kill: write to a temporary file, fsync, rename over the target;
move a broken file aside; hold a lock file (`FileLock`) that the kernel frees when its holder dies."""
from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import orjson

from .errors import CupidError

log = logging.getLogger("cupid.io")
# A temporary file is ".<target>.<host>~<pid>.<random>.tmp": the writer's host and pid let a
# later run tell an orphan (its writer is dead) from a write in progress.
_HOST = socket.gethostname().replace(".", "_").replace("~", "_") or "host"
# Another machine's temporary file (a shared directory) is an orphan only once it is old.
ORPHAN_AGE_S = 3600.0
# The exit status of a command stopped by the file system (disk full, read-only, permission
# denied, not a directory): the same for every command of the project.
STORAGE_EXIT = 3


# A file's mode: 0666 less the process umask, what open() would give (mkstemp's 0600 would
# make results unreadable to the rest of a team sharing the directory). The umask can only be
# read by setting it: read once.
_UMASK = os.umask(0o022)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK


def describe_os_error(exc: OSError) -> str:
    """``disk full (ENOSPC)``: what the file system said, in words and by name."""
    name = errno.errorcode.get(exc.errno or 0, "")
    words = {errno.ENOSPC: "disk full", errno.EROFS: "read-only file system",
             errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
             errno.ENOENT: "no such file or directory", errno.EDQUOT: "disk quota exceeded",
             errno.ENOTDIR: "not a directory"}
    text = words.get(exc.errno, exc.strerror or str(exc))
    return f"{text} ({name})" if name else text


class StorageError(CupidError, OSError):
    """A file-system operation on a results file that failed: names the path and the
    operation, so a run can stop with one line instead of a traceback."""

    exit_code = STORAGE_EXIT

    def __init__(self, path: str | Path, operation: str, cause: OSError):
        super().__init__(cause.errno, cause.strerror)
        self.path = Path(path)
        self.operation = operation
        self.cause = cause

    def __str__(self) -> str:
        return f"{self.path}: cannot {self.operation}: {describe_os_error(self.cause)}"


def check_writable(directory: str | Path) -> None:
    """Make ``directory`` (and its parents) and write, fsync and remove a small file in it,
    so that a run refuses a read-only, full or misnamed directory before it pays for any
    call. Raises StorageError naming the directory."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise StorageError(directory, "use it as a directory",
                           NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=temporary_prefix(directory / "write-check"), suffix=".tmp", dir=directory)
    except OSError as exc:
        raise StorageError(directory, "write in the directory", exc) from exc
    try:
        # A byte of content: an empty file needs no data block, so a full disk would pass.
        os.write(fd, b"\n")
        os.fsync(fd)
    except OSError as exc:
        raise StorageError(directory, "write in the directory", exc) from exc
    finally:
        os.close(fd)
        try:
            os.unlink(probe)
        except OSError:
            log.warning("could not remove %s; the next run removes it", probe)


class LogFileHandler(logging.FileHandler):
    """A log file on a full or read-only disk is one warning, not a traceback per record."""

    failed = False

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: ARG002
        if not self.failed:
            self.failed = True
            exc = sys.exc_info()[1]
            why = describe_os_error(exc) if isinstance(exc, OSError) else repr(exc)
            print(f"warning: {self.baseFilename}: cannot write the log ({why}); the run goes on "
                  f"without it", file=sys.stderr)

    def close(self) -> None:
        """Closed at the end of a run: a disk that refuses the last flush was warned of already."""
        try:
            super().close()
        except OSError:
            self.handleError(None)


def open_log_file(log_file: str | Path) -> LogFileHandler:
    """A handler appending to ``log_file`` (its directory made); StorageError when refused."""
    try:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        return LogFileHandler(log_file, encoding="utf-8")
    except OSError as exc:
        raise StorageError(log_file, "open the log file", exc) from exc


def temporary_prefix(path: Path) -> str:
    """The start of a temporary file's name for a write of ``path`` (see ``_HOST``), which
    ``clean_orphan_tmp`` recognises once its writer is gone."""
    return f".{path.name}.{_HOST}~{os.getpid()}."


def atomic_write_text(path: str | Path, text: str | Iterable[str], encoding: str = "utf-8") -> None:
    """Write ``text`` (or its parts, in order: a page streamed as it is made) to ``path`` at
    once or not at all."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=temporary_prefix(path), suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise StorageError(path, "write", exc) from exc
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "w", encoding=encoding) as handle:
            handle.writelines([text] if isinstance(text, str) else text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            if os.path.exists(tmp):
                os.unlink(tmp)
        except OSError:
            log.warning("could not remove the temporary file %s; the next run removes it", tmp)
        if isinstance(exc, OSError) and not isinstance(exc, StorageError):
            raise StorageError(path, "write", exc) from exc
        raise
    # Persist the rename itself; on filesystems that cannot open directories this is moot.
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_json(path: str | Path, data: Any) -> None:
    """``data`` as indented JSON. An instance file is written again after every step, so its
    encoder is orjson (json.dumps with an indent runs in pure Python: a third of a run's CPU);
    what orjson refuses (an integer beyond 64 bits) goes through json. A float NaN or infinity,
    which json would write as non-standard JSON, is written as null."""
    try:
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode("utf-8")
    except orjson.JSONEncodeError:
        text = json.dumps(data, indent=2, ensure_ascii=False)
    atomic_write_text(path, text + "\n")


def read_json(path: str | Path) -> Any:
    """Read a JSON file; a corrupt file is an error that names it, never 'empty'."""
    path = Path(path)
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # json, which also reads NaN, and its message
            return json.loads(raw.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: not valid JSON ({exc})") from exc


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_orphan_tmp(directory: str | Path, recursive: bool = True) -> list[Path]:
    """Delete the temporary files that killed writers left under ``directory``: those of
    this host whose process is gone, and any older than ORPHAN_AGE_S. Returns them."""
    removed = []
    for tmp in Path(directory).glob("**/.*.tmp" if recursive else ".*.tmp"):  # none in a missing directory
        if not tmp.is_file():
            continue
        orphan = False
        host, sep, rest = tmp.name[:-len(".tmp")].rpartition("~")
        if sep and host.endswith(f".{_HOST}"):
            pid = rest.split(".", 1)[0]
            orphan = pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid))
        if not orphan:
            try:
                orphan = time.time() - tmp.stat().st_mtime > ORPHAN_AGE_S
            except FileNotFoundError:
                continue
        if orphan:
            try:
                tmp.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:  # a read-only directory: housekeeping waits for a later run
                log.warning("could not remove the orphan temporary file %s: %s", tmp,
                            describe_os_error(exc))
                continue
            removed.append(tmp)
            log.info("removed an orphan temporary file %s", tmp)
    return removed


def move_aside(path: Path) -> Path:
    """Rename a broken file out of the way (kept for inspection, never deleted)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}-{os.getpid()}")
    path.replace(target)
    return target


class FileLock:
    """An exclusive ``flock`` on a lock file; the kernel releases it when the holder dies."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self, blocking: bool = True) -> bool:
        """Wait for the lock, or with ``blocking`` False take it only when free (False if not)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise StorageError(self.path, "create the lock file", exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> "FileLock":
        self.acquire()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.release()
