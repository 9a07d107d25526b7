"""A small dependency-driven thread pool for the synthesis stages.

utils/executor.py maps one function over a known list, a stage at a time. Synthesis is a
graph instead: a persona's sessions can be generated while another persona's factors are
still being written, and its 12 dialogues can start as soon as their checklists exist,
without waiting for every other persona to reach that stage. Here a task submits its
successors when it finishes; ``n_workers`` threads take the ready task of the lowest
priority key first.

The pipeline's key puts the critical path first: the task with the longest chain of calls
still ahead of it (its own and those of the tasks it unlocks, counted to the end of its
persona) runs first. Upstream work thus comes first, as it unlocks the most parallel work.
A long task may run one call at a time: by returning ``Continue`` it gives its worker back
and the rest waits in the queue as a new task. A dialogue does this, and as the number of
calls it has left is only known as a bound (the user simulator decides when it ends), the
dialogues with the fewest calls made go first: the dialogues in flight advance together, so
the tail of a run holds many dialogues near their end rather than a few long ones just
started, and the workers stay busy to the end. A window bounds how many chains of one kind
(a task and its continuations) are in flight; the others wait for a free place in it, so
that in a long run personas keep being completed rather than all at its end.

With --batch (``run_batched``) the graph runs in passes: a pass defers each task whose
synthesizer call is not answered yet, and a batch round answers them all.

A task must handle the errors it expects; any other exception stops the run: no new task
starts, ``on_error`` is told at once (the pipeline then cancels the calls in flight when the
disk refused a write), and ``run`` re-raises it once the running tasks end (a ``Continue``
is dropped).
"""
from __future__ import annotations

import heapq
import itertools
import logging
import queue
import sys
import threading
import time
from collections import Counter
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from ..utils import events
from ..utils.progress import HEARTBEAT_S, clock_text

from ..utils.models.batch import MAX_ROUNDS, run_in_rounds

log = logging.getLogger("synthesis.pipeline")  # the driver's log: batch passes are its work

_STOP = (float("inf"),)  # after every task key (tuples compared element-wise)


class Continue(NamedTuple):
    """What a task returns to run the rest of its work as a new task with this key."""
    priority: tuple
    fn: Callable[..., Any]
    args: tuple = ()


class CriticalPathFirst:
    """Priority keys for the tasks of a chain of stages, each stage given with the most calls
    one of its tasks makes in sequence. ``key(stage, calls_made)`` orders by the calls still
    ahead of the task (its own not yet made, then those of every later stage), most first;
    on a tie the earlier stage goes first."""

    def __init__(self, chain: Sequence[tuple[str, int]]) -> None:
        stages, calls = zip(*chain)
        self._index = {stage: i for i, stage in enumerate(stages)}
        self._ahead = dict(zip(reversed(stages), itertools.accumulate(reversed(calls))))  # this stage's and later

    def key(self, stage: str, calls_made: int = 0) -> tuple[int, int]:
        return (calls_made - self._ahead[stage], self._index[stage])


class TaskRunner:
    def __init__(self, n_workers: int, windows: Mapping[str, int] | None = None,
                 on_error: Callable[[BaseException], None] | None = None) -> None:
        """``windows``: for a kind of task, the most chains of it in flight at once;
        ``on_error``: called (in the failing worker) with the exception that stops the run."""
        self.n_workers = max(1, n_workers)
        self.on_error = on_error
        self.windows = {kind: max(1, size) for kind, size in (windows or {}).items()}
        self._queue: queue.PriorityQueue = queue.PriorityQueue()
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._unfinished = 0
        self._error: BaseException | None = None
        self._in_flight: Counter = Counter()    # kind -> chains started and not ended
        self._held: dict[str, list] = {}        # kind -> heap of tasks waiting for the window

    def submit(self, priority: tuple, fn: Callable[..., Any], *args: Any, kind: str | None = None) -> None:
        """Queue ``fn(*args)``; a lower ``priority`` (a tuple of numbers) runs first, and
        tasks of one priority run in the order they were submitted. A task of a ``kind``
        with a window waits outside the queue while the window is full."""
        with self._cond:
            if self._error is not None:
                return
            self._unfinished += 1
            item = (priority, next(self._order), fn, args, kind)
            if kind in self.windows:
                if self._in_flight[kind] >= self.windows[kind]:
                    heapq.heappush(self._held.setdefault(kind, []), item)
                    return
                self._in_flight[kind] += 1
        self._queue.put(item)

    def _work(self) -> None:
        while True:
            _, _, fn, args, kind = self._queue.get()
            if fn is None:
                return
            rest = None
            try:
                if self._error is None:
                    rest = fn(*args)
            except BaseException as exc:  # a bug, a refused write: stop the run, report it from run()
                with self._cond:
                    first = self._error is None
                    if first:
                        self._error = exc
                if first and self.on_error is not None:
                    self.on_error(exc)
            finally:
                with self._cond:
                    if isinstance(rest, Continue) and self._error is None:
                        # The chain goes on in its place in the window; queued before this
                        # task counts as done, so that run() does not see an empty graph.
                        self._unfinished += 1
                        self._queue.put((rest.priority, next(self._order), rest.fn, rest.args, kind))
                    elif kind in self.windows:  # the chain ended: its place goes to a held task
                        self._in_flight[kind] -= 1
                        held = self._held.get(kind)
                        if held and self._error is None:
                            self._in_flight[kind] += 1
                            self._queue.put(heapq.heappop(held))
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
                self._queue.put((_STOP, next(self._order), None, (), None))
            if not interrupted:
                for thread in threads:
                    thread.join()  # the tasks already running end (and save) first
        if self._error is not None:
            raise self._error

    def _drain(self) -> None:
        """After an error: drop the queued and held tasks (called with the condition held)."""
        for held in self._held.values():
            self._unfinished -= len(held)
            held.clear()
        while True:
            try:
                _, _, fn, _, _ = self._queue.get_nowait()
            except queue.Empty:
                return
            if fn is not None:
                self._unfinished -= 1


class Progress:
    """Per stage, the tasks submitted, done, and found done on disk (a resumed run's work). On a
    terminal, one bar per stage; off one (``show`` None and no terminal: SLURM, CI, nohup), a
    line at least every ``heartbeat_s`` with each stage's counts, and a last one at the end."""

    def __init__(self, stages: tuple[str, ...], show: bool | None, heartbeat_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        lines = show is None and not sys.stderr.isatty()
        show = sys.stderr.isatty() if show is None else show
        self._lock = threading.Lock()
        self._clock, self._started = clock, clock()
        self.counts = {stage: Counter(total=0, done=0, found=0) for stage in stages}
        self.bars: dict[str, Any] = {}
        if show:  # no tqdm at all otherwise: even a disabled bar starts tqdm's monitor thread
            from tqdm.auto import tqdm

            self.bars = {stage: tqdm(total=0, desc=f"{i}/{len(stages)} {stage}", position=i - 1,
                                     dynamic_ncols=True, leave=True)
                         for i, stage in enumerate(stages, start=1)}
        self._stop = threading.Event()
        self._heartbeat = None
        if lines:
            self._heartbeat = threading.Thread(target=self._beat, args=(heartbeat_s or HEARTBEAT_S,), name="cupid-progress",
                                               daemon=True)
            self._heartbeat.start()

    def add(self, stage: str) -> None:
        with self._lock:
            self.counts[stage]["total"] += 1
            if stage in self.bars:
                self.bars[stage].total += 1
                self.bars[stage].refresh()

    def done(self, stage: str) -> None:
        with self._lock:
            self.counts[stage]["done"] += 1
            if stage in self.bars:
                self.bars[stage].update(1)

    def found_done(self, stage: str, n: int) -> None:
        """``n`` of the stage's artifacts were on disk already (a resumed run): said beside its tasks."""
        with self._lock:
            counts = self.counts[stage]
            counts["found"] += n
            if stage in self.bars:
                self.bars[stage].set_postfix_str(f"{counts['found']} found done", refresh=True)

    def line(self) -> str:
        elapsed = self._clock() - self._started
        with self._lock:
            parts = [f"{stage} {c['done']}/{c['total']}" + (f" ({c['found']} found done)" if c["found"] else "")
                     for stage, c in self.counts.items() if c["total"] or c["found"]]
            ran = sum(c["done"] for c in self.counts.values())
        rate = f", {60 * ran / elapsed:.1f} tasks/min" if ran and elapsed >= 1 else ""
        return (f"progress synthesis: {', '.join(parts) or 'starting'}{rate}, elapsed {clock_text(elapsed)} "
                f"(each stage's tasks grow as the stages before it finish)")

    def _beat(self, interval: float) -> None:
        last = self._clock()
        while not self._stop.wait(min(interval / 4, 1.0)):
            if self._clock() - last >= interval:
                events.progress(self.line())
                last = self._clock()

    def close(self) -> None:
        if self._heartbeat is not None:
            self._stop.set()
            self._heartbeat.join()
            events.progress(self.line())
        for bar in self.bars.values():
            bar.close()


def run_batched(synthesis: Any, runner: Any) -> None:
    """Batch mode of a ``synthesis.pipeline.Synthesis``: passes and rounds
    (utils/models/batch.py ``run_in_rounds``) until no synthesizer call waits. A pass defers
    each task whose synthesizer call misses the cache ("waiting": no failure, no attempt
    recorded); a round answers them, and the next pass takes each persona one stage on.

    The stage counts of the summary are this invocation's: what each pass produced, and
    what already existed when the first pass looked (a later pass skips what an earlier
    one produced, which is not counted again)."""
    first_skipped: dict[str, int] | None = None
    passes = 0

    def one_pass() -> None:
        nonlocal first_skipped, passes
        passes += 1
        synthesis.run_pass()
        if first_skipped is None:
            first_skipped = {stage: stats["skipped"] for stage, stats in synthesis.stats.items()}
        else:
            for stage, stats in synthesis.stats.items():
                stats["skipped"] = first_skipped.get(stage, 0)
        if runner.pending and not runner.closed:
            waiting = ", ".join(f"{stage} {n}" for stage, n in synthesis.waiting.items())
            log.info("batch pass %d: %d call(s) wait for batch round %d (tasks waiting: %s)",
                     passes, runner.pending, runner.rounds + 1, waiting)

    # Each round takes a persona at least one stage (or one re-ask) on.
    max_rounds = max(MAX_ROUNDS, 3 * synthesis.cfg.max_attempts + 2)
    run_in_rounds(one_pass, runner, [synthesis.models["synthesizer"]], max_rounds=max_rounds,
                  finish_online=True)
