"""Batch mode's pass over the instances (``python -m evaluation.run --batch``).

Each pass evaluates every unfinished instance with the models' calls deferred to the
batch runner (utils/models/batch.py): steps whose answers are cached or recorded go
on, and each chain stops at its first call not yet answered. The shared loop
(utils/models/batch_rounds.py) sends the collected calls as a round of batches, their
answers fill the cache, and the next pass takes the chains one step further. With the
default task ``both``: round 1 infer + generate, round 2 decompose + judge, round 3 the
two matches (a re-ask after an unparseable answer adds a round). When no call is left to
defer, the ordinary online pass writes the results from the cache, and asks online only
what failed in its batch.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Sequence

from utils.models.batch import BatchDeferred, BatchRunner
from utils.models.batch_rounds import run_in_rounds
from utils.models.errors import ModelConfigurationError, RunCancelled
from utils.models.model import Model
from utils.models.retry import cancel_all

log = logging.getLogger("cupid.evaluation")


def run_batch_rounds(make_evaluation: Callable[[], object], instances: Iterable,
                     runner: BatchRunner, models: Sequence[Model], n_workers: int = 4) -> int:
    """Run passes and rounds until no call is deferred; returns the number of batch rounds."""
    unfinished = list(instances)

    def one_pass() -> None:
        nonlocal unfinished
        evaluation = make_evaluation()
        deferred: list = []

        def one(instance) -> None:
            try:
                evaluation.evaluate(instance)
            except BatchDeferred:
                deferred.append(instance)
            except (ModelConfigurationError, RunCancelled):
                raise
            except Exception as exc:  # the online pass records it against the instance
                log.warning("%s: %s in a batch round; recorded by the online pass",
                            instance.instance_id, exc)

        pool = ThreadPoolExecutor(max_workers=max(1, n_workers))
        try:
            list(pool.map(one, unfinished))
        except BaseException as exc:
            # A stop (Ctrl-C, SIGTERM, SIGHUP) or an error: the caller is not made to wait
            # for calls in flight; a hung one would hold it for its timeout.
            if isinstance(exc, KeyboardInterrupt):
                cancel_all()
            pool.shutdown(wait=False, cancel_futures=True)
            evaluation.close(wait=False)
            raise
        pool.shutdown()
        evaluation.close()  # waits for side chains still deferring their calls
        if runner.pending:
            waiting = {id(i) for i in deferred}
            unfinished = [i for i in unfinished if id(i) in waiting] or unfinished

    return run_in_rounds(one_pass, runner, models)
