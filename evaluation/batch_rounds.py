"""Batch mode's rounds (``python -m evaluation.run --batch``).

Each round evaluates every unfinished instance with the models' calls deferred to the
batch runner (utils/models/batch.py): steps whose answers are cached or recorded go
on, and each chain stops at its first call not yet answered. The collected calls go out
as batches; their answers fill the cache; the next round takes the chains one step
further. With the default task ``both``: round 1 infer + generate, round 2 decompose +
judge, round 3 the two matches (a re-ask after an unparseable answer adds a round).
When no call is left to defer, the ordinary online pass writes the results from the
cache, and asks online only what failed in its batch.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Sequence

from utils.models.batch import BatchDeferred, BatchRunner
from utils.models.errors import ModelConfigurationError, RunCancelled
from utils.models.model import Model

log = logging.getLogger("cupid.evaluation")

MAX_ROUNDS = 20


def run_batch_rounds(make_evaluation: Callable[[], object], instances: Iterable,
                     runner: BatchRunner, models: Sequence[Model], n_workers: int = 4) -> int:
    """Run rounds until no call is deferred; returns the number of batch rounds."""
    for model in models:
        model.batch_runner = runner
    runner.resume(models)
    unfinished = list(instances)
    for _ in range(MAX_ROUNDS):
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

        try:
            with ThreadPoolExecutor(max_workers=max(1, n_workers)) as pool:
                list(pool.map(one, unfinished))
        finally:
            evaluation.close()  # waits for side chains still deferring their calls
        if runner.pending == 0:
            break
        waiting = {id(i) for i in deferred}
        unfinished = [i for i in unfinished if id(i) in waiting] or unfinished
        runner.run_round()
    runner.closed = True
    return runner.rounds
