"""Progress as lines (count, rate, ETA) at a bounded interval: what a run shows off a terminal
(SLURM, CI, nohup), where no bar is drawn. The evaluation's instances, the validation's, and
the synthesis's stages (``StageLines``) say the same things the same way."""
from __future__ import annotations

import threading
import time
from typing import TextIO

from . import events

# Off a terminal a line comes at least this often, so a log shows a slow run alive within half a
# minute of its start (the embedded model takes minutes per instance).
HEARTBEAT_S = 20.0


class ProgressLog:
    """A line every ``every`` instances (and at the end): done of total, failed, rate, ETA;
    with ``heartbeat_s``, also a line whenever that long passed without one, so a slow run
    (the embedded model takes minutes per instance) shows it is alive from the start.

    The rate counts only instances run in this invocation (those found done go by at once),
    and there is no ETA until as many instances as run at once (``workers``) have finished:
    before that, completions say nothing of the throughput of a full pipeline."""

    def __init__(self, total: int, every: int, label: str, out: TextIO | None = None,
                 clock=time.monotonic, workers: int = 1, heartbeat_s: float | None = None,
                 unit: str = "instances") -> None:
        self.total, self.every, self.label, self.unit = total, max(1, every), label, unit
        self.workers = max(1, workers)
        self.out = out  # None: the lines are events (utils/events.py), which the command prints
        self._clock = clock
        self._started = clock()
        self._last_line = self._started
        self._lock = threading.Lock()
        self.done = 0
        self.failed = 0
        self.found_done = 0
        self._stop = threading.Event()
        self._heartbeat = None
        if heartbeat_s:
            self._heartbeat = threading.Thread(target=self._beat, args=(heartbeat_s,),
                                               name="cupid-progress", daemon=True)
            self._heartbeat.start()

    def add(self, failed: bool, found_done: bool = False) -> None:
        with self._lock:
            self.done += 1
            self.failed += int(failed)
            self.found_done += int(found_done)
            if self.done % self.every == 0 or self.done == self.total:
                self._print()

    def _print(self) -> None:
        self._last_line = self._clock()
        if self.out is None:
            events.progress(self.line())
        else:  # a stream of the caller's
            self.out.write(self.line() + "\n")
            self.out.flush()

    def _beat(self, interval: float) -> None:
        while not self._stop.wait(interval / 4):
            with self._lock:
                if self._clock() - self._last_line >= interval and self.done < self.total:
                    self._print()

    def close(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()

    def line(self) -> str:
        elapsed = max(1e-9, self._clock() - self._started)
        ran = self.done - self.found_done
        left = self.total - self.done
        found = f", {self.found_done} found done" if self.found_done else ""
        head = (f"progress {self.label}: {self.done}/{self.total} {self.unit} "
                f"({100 * self.done / max(1, self.total):.0f}%), {self.failed} failed{found}")
        if ran == 0:
            return f"{head}, elapsed {clock_text(elapsed)}" + (", nothing left to run" if not left else "")
        rate = ran / elapsed
        first_wave = min(self.workers, ran + left)
        eta = (clock_text(left / rate) if ran >= first_wave
               else f"after the first {first_wave} finish")
        return f"{head}, {rate * 60:.1f}/min, elapsed {clock_text(elapsed)}, ETA {eta}"


def clock_text(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
