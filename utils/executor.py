"""Run a function over many items on a thread pool, with one progress bar; and stopping
those threads when a run is stopped.

Threads, not processes: the work is waiting on HTTP, and clients are shared safely across
threads (a client shared by forked processes breaks its connections). At most
``2 * n_workers`` items are in flight, so memory stays flat in the number of items.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def iter_with_progress(fn: Callable[[T], R], items: Iterable[T], *, n_workers: int = 1, desc: str = "",
                       postfix: Callable[[], dict] | None = None,
                       show: bool | None = None) -> Iterator[tuple[T, R]]:
    """Yield (item, result) pairs as they finish. ``fn`` must handle its own errors;
    an exception escaping it is re-raised here after the pool stops taking new items."""
    show = sys.stderr.isatty() if show is None else show
    if show:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(items) if hasattr(items, "__len__") else None, desc=desc, dynamic_ncols=True)
    else:  # no tqdm at all: even a disabled bar starts tqdm's monitor thread, which outlives the run
        bar = _NoBar()
    source = iter(items)
    window = max(1, 2 * n_workers)
    pool = ThreadPoolExecutor(max_workers=max(1, n_workers))
    try:
        pending: dict[Future, T] = {}

        def refill() -> None:
            while len(pending) < window:
                try:
                    item = next(source)
                except StopIteration:
                    return
                pending[pool.submit(fn, item)] = item

        refill()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                item = pending.pop(future)
                result = future.result()
                bar.update(1)
                yield item, result
                if postfix is not None:  # once the caller has taken this result into its figures
                    bar.set_postfix(postfix(), refresh=True)
            refill()
    except BaseException:
        # Ctrl-C, or an error escaping fn: queued items are dropped and the caller is not
        # made to wait for items in flight (a hung request would hold it for its timeout).
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        bar.close()


class _NoBar:
    """The progress bar's interface, doing nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass


def worker_threads() -> list[threading.Thread]:
    """Threads other than this one that would keep the interpreter from exiting."""
    return [t for t in threading.enumerate()
            if t is not threading.current_thread() and not t.daemon and t.is_alive()]


def stop_workers(pool_owner, grace: float) -> bool:
    """Tell every model call to stop, close ``pool_owner``'s pools without waiting, and give
    worker threads ``grace`` seconds to return; True when they all did. Threads cannot be
    killed: one blocked in a hung request is left (it ends with its request's timeout)."""
    from .models.retry import cancel_all

    cancel_all()
    pool_owner.close(wait=False)
    deadline = time.monotonic() + grace
    for thread in worker_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    return not worker_threads()


def exit_now(code: int) -> int:
    """For a command: return ``code``, or end the process at once when worker threads are
    still blocked in hung requests (the interpreter would otherwise wait for them at exit)."""
    if worker_threads():
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)
    return code
