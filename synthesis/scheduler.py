"""A small dependency-driven thread pool for the synthesis stages.

utils/executor.py maps one function over a known list, a stage at a time. Synthesis is a
graph instead: a persona's sessions can be generated while another persona's factors are
still being written, and its 12 dialogues can start as soon as their checklists exist,
without waiting for every other persona to reach that stage. Here a task submits its
successors when it finishes; ``n_workers`` threads take the ready task of the earliest
stage first (upstream work unlocks the most parallel work, so the tail of a run is made of
parallel dialogues rather than one late persona's chain).

A task must handle the errors it expects; any other exception stops the run: no new task
starts, and ``run`` re-raises it once the running tasks end.
"""
from __future__ import annotations

import itertools
import queue
import sys
import threading
from typing import Any, Callable

_STOP = float("inf")


class TaskRunner:
    def __init__(self, n_workers: int) -> None:
        self.n_workers = max(1, n_workers)
        self._queue: queue.PriorityQueue = queue.PriorityQueue()
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._unfinished = 0
        self._error: BaseException | None = None

    def submit(self, priority: int, fn: Callable[..., Any], *args: Any) -> None:
        with self._cond:
            if self._error is not None:
                return
            self._unfinished += 1
        self._queue.put((priority, next(self._order), fn, args))

    def _work(self) -> None:
        while True:
            priority, _, fn, args = self._queue.get()
            if priority == _STOP:
                return
            try:
                if self._error is None:
                    fn(*args)
            except BaseException as exc:  # a bug: stop the run and report it from run()
                with self._cond:
                    if self._error is None:
                        self._error = exc
            finally:
                with self._cond:
                    self._unfinished -= 1
                    self._cond.notify_all()

    def run(self) -> None:
        """Run until no task is left (tasks may be submitted before and during the run)."""
        threads = [threading.Thread(target=self._work, name=f"synthesis-{i}", daemon=True)
                   for i in range(self.n_workers)]
        for thread in threads:
            thread.start()
        interrupted = False
        try:
            with self._cond:
                while self._unfinished > 0 and self._error is None:
                    self._cond.wait(timeout=0.5)
        except BaseException as exc:  # Ctrl-C: stop taking tasks; finished work is on disk
            interrupted = True
            with self._cond:
                if self._error is None:
                    self._error = exc
            raise
        finally:
            with self._cond:
                self._drain()
            for _ in threads:
                self._queue.put((_STOP, next(self._order), None, ()))
            if not interrupted:
                for thread in threads:
                    thread.join()  # the tasks already running end (and save) first
        if self._error is not None:
            raise self._error

    def _drain(self) -> None:
        """After an error: drop the queued tasks (called with the condition held)."""
        while True:
            try:
                priority, _, _, _ = self._queue.get_nowait()
            except queue.Empty:
                return
            if priority != _STOP:
                self._unfinished -= 1


class Progress:
    """One progress bar per stage; totals grow as tasks are submitted."""

    def __init__(self, stages: tuple[str, ...], show: bool | None) -> None:
        from tqdm.auto import tqdm

        show = sys.stderr.isatty() if show is None else show
        self._lock = threading.Lock()
        self.bars = {stage: tqdm(total=0, desc=f"{i}/{len(stages)} {stage}", position=i - 1, disable=not show,
                                 dynamic_ncols=True, leave=True)
                     for i, stage in enumerate(stages, start=1)}

    def add(self, stage: str) -> None:
        with self._lock:
            bar = self.bars[stage]
            bar.total += 1
            bar.refresh()

    def done(self, stage: str) -> None:
        with self._lock:
            self.bars[stage].update(1)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
