"""The stop signals as a test that sends one expects them, however the suite was started.

``nohup`` starts the suite with SIGHUP ignored, and a shell without job control starts a
background job (``pytest ... &``) with SIGINT ignored. An ignored signal stays ignored across
``exec``, Python keeps an ignored SIGINT so, and the harness keeps an ignored signal ignored
on purpose (utils/stop_signals.py ``SignalGuard``: a run under nohup outlives its terminal).
A test that sends SIGINT, SIGTERM or SIGHUP therefore sets them up itself: a child with
``preexec_fn=default_dispositions``, the test's own process with ``default_dispositions_here()``.
"""
from __future__ import annotations

import contextlib
import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def default_dispositions() -> None:
    """Every stop signal at its default action (for a child's ``preexec_fn``; Python then
    installs its own Ctrl-C handler)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


@contextlib.contextmanager
def default_dispositions_here():
    """This process's stop signals at their defaults (SIGINT: Python's KeyboardInterrupt)
    for the block, and the handlers found before put back afterwards."""
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
