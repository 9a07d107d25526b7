"""Signals that stop a run, for both pipelines: SIGTERM and SIGHUP (what SLURM sends before
it kills a job, and a closed terminal) handled as Ctrl-C, for the duration of a run only.

A handler raises ``StopSignal`` (a KeyboardInterrupt) in the main thread, so every path
that stops cleanly on Ctrl-C does so on these too; the exit status is 128 + the signal's
number: 130 (Ctrl-C), 143 (SIGTERM), 129 (SIGHUP).
"""
from __future__ import annotations

import os
import signal
import threading


def second_interrupt(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    """A second signal while a run stops: end the process at once."""
    os.write(2, b"\nsignalled again: stopping at once\n")
    os._exit(128 + signum)


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread as Ctrl-C raises KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stop_status(exc: BaseException) -> int:
    """The exit status after ``exc`` stopped a run: 128 + the signal's number."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


def stop_cause(what: BaseException | int) -> str:
    """"interrupted" (Ctrl-C) or "stopped by SIGTERM"/"stopped by SIGHUP", for messages."""
    signum = what if isinstance(what, int) else getattr(what, "signum", signal.SIGINT)
    return "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"


STOP_CODES = tuple(128 + s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))


def _raise_stop(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    raise StopSignal(signum)


class SignalGuard:
    """SIGTERM and SIGHUP handled like Ctrl-C while a run is under way (``with guard:``),
    and the handlers found before put back afterwards (an API caller's, a test runner's).

    Python lets only the main thread set handlers: a run started from another thread gets
    none (the caller's handlers stay) and ``active`` is False. A signal ignored when the run
    starts (SIGHUP under nohup) stays ignored. ``deferring()`` turns a signal into a note
    (``received``) while files that finish a run are written, and ``second_ends_process()``
    makes any further signal end the process at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.active = False
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "SignalGuard":
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.getsignal(s) for s in self.SIGNALS}
            self.active = True
            self.raising()
        return self

    def __exit__(self, exc_type, *exc_info) -> None:
        if self.active:
            for signum, handler in self._previous.items():
                # None: a handler not set from Python, which cannot be put back; the default.
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
            self.active = False
            # A signal noted after the run last looked (while it returned): not lost, raised now.
            if exc_type is None and self.received is not None:
                from .errors import Interrupted

                raise Interrupted(f"{stop_cause(self.received)} after the work was done: the results are "
                                  f"written", 128 + self.received)

    def _install(self, handler, signals=(signal.SIGTERM, signal.SIGHUP)) -> None:
        if self.active:
            for signum in signals:
                # An ignored signal stays ignored: under nohup SIGHUP is, so that the run
                # outlives its terminal.
                if self._previous.get(signum) is not signal.SIG_IGN:
                    signal.signal(signum, handler)

    def raising(self) -> None:
        """A signal stops the run: SIGINT as before the run, SIGTERM/SIGHUP as Ctrl-C does."""
        self.received = None
        previous = self._previous.get(signal.SIGINT)
        self._install(signal.default_int_handler if previous is None else previous, (signal.SIGINT,))
        self._install(_raise_stop)

    def deferring(self) -> None:
        """A signal is noted, not raised: what is being written is finished first."""
        self._install(self._note, self.SIGNALS)

    def second_ends_process(self) -> None:
        self._install(second_interrupt, self.SIGNALS)

    def _note(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        if self.received is not None:
            second_interrupt(signum, frame)
        self.received = signum
