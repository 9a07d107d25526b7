"""Run a function over many items on a thread pool, with one progress bar.

Threads, not processes: the work is waiting on HTTP, and clients are shared safely across
threads (forked processes sharing a client was a fault of the original release). At most
``2 * n_workers`` items are in flight, so memory stays flat in the number of items.
"""
from __future__ import annotations

import sys
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def iter_with_progress(fn: Callable[[T], R], items: Iterable[T], *, n_workers: int = 1,
                       desc: str = "", total: int | None = None,
                       postfix: Callable[[], dict] | None = None,
                       show: bool | None = None) -> Iterator[tuple[T, R]]:
    """Yield (item, result) pairs as they finish. ``fn`` must handle its own errors;
    an exception escaping it is re-raised here after the pool stops taking new items."""
    from tqdm.auto import tqdm

    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    show = sys.stderr.isatty() if show is None else show
    bar = tqdm(total=total, desc=desc, disable=not show, dynamic_ncols=True)
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
                if postfix is not None:
                    bar.set_postfix(postfix(), refresh=False)
                yield item, result
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


def map_with_progress(fn: Callable[[T], R], items: Iterable[T], **kwargs) -> list[R]:
    """Like ``map``, on a thread pool, results in input order."""
    items = list(items)
    index = {id(item): i for i, item in enumerate(items)}
    results: list = [None] * len(items)
    for item, result in iter_with_progress(fn, items, **kwargs):
        results[index[id(item)]] = result
    return results
