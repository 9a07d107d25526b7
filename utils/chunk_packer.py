"""Word-codes and compresses report.html's chunk texts off the thread that makes them.

Gzip releases the GIL, so threads would do for it alone; the word code
(utils/word_codes.py) is Python work that holds it: ~1.2 s of a paper-scale report
(10 models x 756 instances) that would add to the build's wall time. A large report
therefore hands its texts to a worker process: a plain ``python -I`` child that reads
texts on its stdin and writes chunks on its stdout, so nothing of the caller's program
(its ``__main__``, a ``utils/`` of the user's in the working directory) is imported
again, as multiprocessing's spawn would. A small report, or one whose worker cannot
start or dies, is packed on threads; a chunk is never lost.

Messages, both ways: one type byte, a 4-byte big-endian length, the payload. To the
worker: ``W`` the codebook's words as JSON (``null``: none), ``T`` a text in UTF-8. From
the worker, one ``C`` per ``T`` in order: the chunk's text (``gzip_text``) in latin-1.
"""
from __future__ import annotations

import json
import queue
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from cupid.utils.html_page import gzip_text
from cupid.utils.word_codes import WordCodebook

_HEADER = struct.Struct(">cI")
_ROOT = Path(__file__).resolve().parent.parent
# Worker processes of a large report: the thread making the texts is done well before the
# workers are, so two keep a 2-core machine busy to the end.
WORKERS = 2
BUDGET = 24 << 20


class PackedChunk:
    """A chunk being packed: ``result()`` is its text (``gzip_text``). Its input is kept
    until the chunk is made, so a worker that dies costs a redo here, not the report."""

    def __init__(self, future: Future[str], data: bytes, codebook: WordCodebook | None):
        self._future = future
        self._input: tuple[bytes, WordCodebook | None] | None = (data, codebook)
        future.add_done_callback(self._done)

    def _done(self, future: Future[str]) -> None:
        if future.exception() is None:
            self._input = None

    def result(self) -> str:
        try:
            return self._future.result()
        except WorkerGone:
            assert self._input is not None
            data, codebook = self._input
            return gzip_text(data.decode("utf-8"), codebook)


class WorkerGone(RuntimeError):
    """The worker process ended before it answered."""


class ChunkPacker:
    """``submit(text, codebook)``: the chunk, packed by worker processes (``in_process``)
    or on threads. ``close()`` (or leaving it as a context) waits for every chunk.

    At most ``budget`` bytes of text wait for the workers: past it, ``submit`` waits, so a
    fast producer does not hold every text of the report at once."""

    def __init__(self, in_process: bool, workers: int = WORKERS, budget: int = BUDGET):
        self._threads = ThreadPoolExecutor(max_workers=2)
        self._workers: list[_Worker] = []
        self._turn = 0
        self._budget = budget
        self._waiting_bytes = 0
        self._room = threading.Condition()
        if in_process:
            try:
                for _ in range(workers):
                    self._workers.append(_Worker())
            except OSError:  # no process can be started here: threads (and those started)
                pass

    @property
    def in_process(self) -> bool:
        return any(worker.alive for worker in self._workers)

    def submit(self, text: str, codebook: WordCodebook | None) -> PackedChunk:
        alive = [worker for worker in self._workers if worker.alive]
        if not alive:
            return PackedChunk(self._threads.submit(gzip_text, text, codebook), b"", codebook)
        data = text.encode("utf-8")
        with self._room:
            self._room.wait_for(lambda: self._waiting_bytes == 0 or self._waiting_bytes + len(data) <= self._budget)
            self._waiting_bytes += len(data)
        self._turn += 1
        future = alive[self._turn % len(alive)].submit(data, codebook)
        size = len(data)
        future.add_done_callback(lambda _: self._release(size))
        return PackedChunk(future, data, codebook)

    def _release(self, size: int) -> None:
        with self._room:
            self._waiting_bytes -= size
            self._room.notify_all()

    def close(self) -> None:
        for worker in self._workers:
            worker.close()
        self._threads.shutdown(wait=True)

    def __enter__(self) -> "ChunkPacker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Worker:
    """The child process, a thread feeding its stdin (so the caller never waits on a full
    pipe) and a thread reading its answers into futures, first in first out."""

    def __init__(self):
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-c",
             f"import sys; sys.path.insert(0, {str(_ROOT)!r}); from cupid.utils.chunk_packer import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._outbox: queue.Queue[tuple[bytes, bytes] | None] = queue.Queue()
        self._waiting: queue.Queue[Future[str]] = queue.Queue()
        self._codebook: WordCodebook | None = None
        self._sent_codebook = False
        self.alive = True
        self._lock = threading.Lock()  # between a submit and the reader's end
        self._writer = threading.Thread(target=self._write, name="chunk-packer-writer", daemon=True)
        self._reader = threading.Thread(target=self._read, name="chunk-packer-reader", daemon=True)
        self._writer.start()
        self._reader.start()

    def submit(self, data: bytes, codebook: WordCodebook | None) -> Future[str]:
        """The chunk of ``data`` (a text in UTF-8)."""
        if not self._sent_codebook or codebook is not self._codebook:
            words = None if codebook is None else codebook.words
            self._outbox.put((b"W", json.dumps(words).encode("utf-8")))
            self._codebook, self._sent_codebook = codebook, True
        future: Future[str] = Future()
        with self._lock:
            if not self.alive:
                future.set_exception(WorkerGone("the chunk packer's worker process ended"))
                return future
            self._waiting.put(future)
        self._outbox.put((b"T", data))
        return future

    def _write(self) -> None:
        stdin = self._process.stdin
        try:
            while (message := self._outbox.get()) is not None:
                kind, payload = message
                stdin.write(_HEADER.pack(kind, len(payload)))
                stdin.write(payload)
                stdin.flush()
            stdin.close()
        except OSError:  # the worker is gone; the reader fails what is waiting
            self.alive = False

    def _read(self) -> None:
        stdout = self._process.stdout
        why = "the chunk packer's worker process ended"
        try:
            while (message := _read_message(stdout)) is not None:
                self._waiting.get_nowait().set_result(message[1].decode("latin-1"))
        except (OSError, queue.Empty, struct.error) as exc:  # what is waiting is redone
            why = f"the chunk packer's worker process gave a broken answer ({exc!r})"
        with self._lock:
            self.alive = False
            while True:
                try:
                    future = self._waiting.get_nowait()
                except queue.Empty:
                    break
                future.set_exception(WorkerGone(why))

    def close(self) -> None:
        self._outbox.put(None)
        self._writer.join()
        self._reader.join()
        self._process.wait()


def _read_message(stream: BinaryIO) -> tuple[bytes, bytes] | None:
    header = stream.read(_HEADER.size)
    if not header:
        return None
    kind, length = _HEADER.unpack(header)
    payload = stream.read(length)
    if len(payload) != length:
        raise OSError("a message cut short")
    return kind, payload


def serve(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """The worker's loop (see the module's docstring)."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    codebook: WordCodebook | None = None
    while (message := _read_message(stdin)) is not None:
        kind, payload = message
        if kind == b"W":
            words = json.loads(payload)
            codebook = None if words is None else WordCodebook(words)
        elif kind == b"T":
            chunk = gzip_text(payload.decode("utf-8"), codebook).encode("latin-1")
            stdout.write(_HEADER.pack(b"C", len(chunk)))
            stdout.write(chunk)
            stdout.flush()
        else:
            raise ValueError(f"unknown message type {kind!r}")
