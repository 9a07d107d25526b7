"""Stopping a run: on Ctrl-C, SIGTERM or SIGHUP (utils/stop_signals.py) every call is told
to stop and worker threads get a grace period; a second signal, or threads still blocked in
a hung request, end the process at once."""
from __future__ import annotations

import logging
import os
import sys
import threading
import time

from cupid.evaluation.pipeline import Evaluation
from cupid.utils.models.retry import cancel_all


def worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate()
            if t is not threading.current_thread() and not t.daemon and t.is_alive()]


def stop_workers(evaluation: Evaluation, grace: float) -> bool:
    """Tell every call to stop and give worker threads ``grace`` seconds to return; True
    when they all did. Threads cannot be killed: one blocked in a hung request is left."""
    cancel_all()
    evaluation.close(wait=False)
    deadline = time.monotonic() + grace
    for thread in worker_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    return not worker_threads()


def exit_now(code: int, owns_process: bool = True) -> int:
    """Return ``code``, or, for the command (``owns_process``), end the process at once when
    worker threads are still blocked (the interpreter would otherwise wait for them at exit).
    A library caller gets ``code`` back either way; a blocked thread ends with its request's
    timeout."""
    if owns_process and worker_threads():
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)
    return code
