"""The response cache: finished answers on disk, so a rerun replays instead of paying again.

Layout: a directory (``RESULTS_DIR/.llm_cache/``) of append-only JSON-lines files, one per
process: ``<host>-<pid>-<UTC start>.jsonl``. Each process appends only to its own file and
reads every file in the directory (the others' read-only, new lines picked up whenever a
key misses). Nothing relies on file locking, so shards on several machines writing one
shared directory (NFS, where SQLite's locking is unreliable) lose no answer and pay for
none twice beyond the requests in flight at the same moment.

The cache only saves money; it never costs an answer: a directory that is read-only, full
or gone is one warning, after which this process keeps its new answers in memory (the
caller records them in its instance file as always). A line that is not a cache entry (a
process killed mid-write leaves at most a partial last line) is skipped.
"""
from __future__ import annotations

import dataclasses
import errno
import json
import os
import socket
import threading
import time
from pathlib import Path

from .. import events
from ..io import describe_os_error
from .endings import ENDINGS, signal_name
from .request import Completion, Usage


CACHE_DIR = ".llm_cache"  # under a results or output directory
SUFFIX = ".jsonl"
_KEY_PREFIX = b'{"key": "'


def own_file_name() -> str:
    """``<host>-<pid>-<UTC start>.jsonl``: unique per process, also across machines."""
    host = "".join(c if c.isalnum() or c in "-." else "_" for c in socket.gethostname()) or "host"
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return f"{host}-{os.getpid()}-{stamp}-{time.time_ns() % 1_000_000:06d}{SUFFIX}"


class ResponseCache:
    """Completed answers keyed by ``Request.cache_key`` (the request, model, provider and
    endpoint). Thread-safe; one instance per process and directory."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._own = self.directory / own_file_name()
        self._fd: int | None = None
        self._own_size = 0
        self.writable = True
        # key -> (file, offset, length) of its line, or the Completion itself when this
        # process could not write it.
        self._index: dict[str, tuple[Path, int, int] | Completion] = {}
        self._read_to: dict[Path, int] = {}  # how far each other file has been read

    # -- warnings --------------------------------------------------------------------------
    def _warn_once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            events.warning(message)

    # -- reading ---------------------------------------------------------------------------
    def _scan(self) -> None:
        """Index the lines other processes appended since the last scan."""
        try:
            names = sorted(p for p in os.listdir(self.directory) if p.endswith(SUFFIX))
        except (FileNotFoundError, NotADirectoryError):
            return  # nothing cached yet (or nothing that can be: put() says so)
        except OSError as exc:
            self._warn_once("scan", f"{self.directory}: cannot list the response cache "
                                    f"({describe_os_error(exc)}); answers are not replayed from it")
            return
        for name in names:
            path = self.directory / name
            if path == self._own:
                continue
            start = self._read_to.get(path, 0)
            try:
                if os.path.getsize(path) <= start:
                    continue
                with open(path, "rb") as handle:
                    handle.seek(start)
                    data = handle.read()
            except OSError as exc:
                self._warn_once(f"read:{path}", f"{path}: cannot read the response cache file "
                                                f"({describe_os_error(exc)}); skipped")
                continue
            end = data.rfind(b"\n") + 1  # a partial last line is a write still in progress
            offset = 0
            while offset < end:
                stop = data.index(b"\n", offset) + 1
                key = self._key_of(data[offset:stop])
                if key is None:
                    self._warn_once(f"line:{path}", f"{path}: a line at byte {start + offset} is "
                                                    f"not a cache entry; skipped")
                else:
                    self._index.setdefault(key, (path, start + offset, stop - offset))
                offset = stop
            self._read_to[path] = start + end

    @staticmethod
    def _key_of(line: bytes) -> str | None:
        # put() writes the key first (a hex digest, nothing to escape): read it without parsing
        # the whole answer (a paper-scale cache is ~150 MB); the line is parsed, and checked, on a hit.
        if not (line.startswith(_KEY_PREFIX) and line.endswith(b"}\n")):
            return None
        end = line.find(b'"', len(_KEY_PREFIX))
        key = line[len(_KEY_PREFIX):end]
        return key.decode("utf-8", "replace") if end > 0 and b"\\" not in key else None

    def _load(self, key: str, where: tuple[Path, int, int]) -> Completion | None:
        path, offset, length = where
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                entry = json.loads(handle.read(length))
        except (OSError, ValueError) as exc:
            self._warn_once(f"read:{path}", f"{path}: cannot read the response cache file ({exc}); "
                                            f"the answer is asked again")
            return None
        tokens = (entry.get("prompt_tokens"), entry.get("completion_tokens") or 0) \
            if isinstance(entry, dict) else (None, None)
        if (not isinstance(entry, dict) or entry.get("key") != key
                or not isinstance(entry.get("text"), str)
                or not all(t is None or (isinstance(t, int) and t >= 0) for t in tokens)):
            self._warn_once(f"line:{path}", f"{path}: the line at byte {offset} is not a cache "
                                            f"entry; the answer is asked again")
            return None
        usage = None
        if tokens[0] is not None:
            # Absent in lines of older runs, and where there are none.
            extra = [entry.get(name) or 0 for name in ("reasoning_tokens", "cached_prompt_tokens",
                                                       "cache_write_tokens")]
            usage = Usage(tokens[0], tokens[1], bool(entry.get("batch")),
                          *(n if isinstance(n, int) and n >= 0 else 0 for n in extra))
        # "truncated": an older run's line of an answer cut at the token limit.
        ending = entry.get("ending") or ("length" if entry.get("truncated") is True else "stop")
        return Completion(text=entry["text"], usage=usage, ending=ending if ending in ENDINGS else "stop",
                          finish=entry.get("finish"), refusal=entry.get("refusal"))

    def get(self, key: str) -> Completion | None:
        with self._lock:
            where = self._index.get(key)
            if where is None:
                self._scan()
                where = self._index.get(key)
            if where is None:
                return None
            if isinstance(where, Completion):
                return dataclasses.replace(where)
            return self._load(key, where)

    # -- writing ---------------------------------------------------------------------------
    def _open_own(self) -> int:
        if self.directory.exists() and not self.directory.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(self.directory))
        self.directory.mkdir(parents=True, exist_ok=True)
        return os.open(self._own, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def put(self, key: str, completion: Completion) -> None:
        """Keep an answer; never raises for the disk (the answer is the caller's to record)."""
        usage = completion.usage
        entry = {"key": key, "text": completion.text,
                 "prompt_tokens": usage.prompt_tokens if usage else None,
                 "completion_tokens": usage.completion_tokens if usage else None,
                 "batch": bool(usage and usage.batch)}
        for name in ("reasoning_tokens", "cached_prompt_tokens", "cache_write_tokens"):
            if usage and getattr(usage, name):  # written only when there are some
                entry[name] = getattr(usage, name)
        if completion.ending != "stop":  # replayed as it ended (endings.py), in its words
            entry.update(ending=completion.ending, finish=signal_name(completion.finish),
                         refusal=completion.refusal)
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            if self.writable:
                try:
                    if self._fd is None:
                        self._fd = self._open_own()
                    offset = self._own_size
                    view = memoryview(line)
                    while view:
                        written = os.write(self._fd, view)
                        view = view[written:]
                    self._own_size += len(line)
                    self._index[key] = (self._own, offset, len(line))
                    return
                except OSError as exc:
                    # A partial line may remain at the end; readers skip it, and this
                    # process writes no more to the file.
                    self.writable = False
                    self._warn_once("write", f"{self._own}: cannot write the response cache "
                                             f"({describe_os_error(exc)}); new answers are kept in "
                                             f"memory for this run only (what each answer produced "
                                             f"is still written to the run's own files)")
            self._index[key] = Completion(text=completion.text, usage=usage, ending=completion.ending,
                                          finish=signal_name(completion.finish), refusal=completion.refusal)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.close(self._fd)
                except OSError as exc:
                    self._warn_once("write", f"{self._own}: closing the response cache failed "
                                             f"({describe_os_error(exc)})")
                self._fd = None
