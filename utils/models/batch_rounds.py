"""Batch mode's driver loop, shared by both pipelines: a pass, then a round, until no call
is pending.

A pass runs the pipeline's work with some models' ``batch_runner`` set: a call that misses
the response cache is deferred (``BatchDeferred``) instead of sent, and the work waiting
for it stops there. A round (``BatchRunner.run_round``) submits what the pass deferred,
waits for the batches and puts their answers into the cache, so that the next pass replays
them and takes each piece of work one call further. The pipelines say what a pass is
(evaluation/batch_rounds.py: every unfinished instance; synthesis/batch_mode.py: the task
graph over the files on disk).
"""
from __future__ import annotations

import logging
from typing import Callable, Sequence

from utils.models.batch import BatchRunner
from utils.models.model import Model

log = logging.getLogger("cupid.batch")

MAX_ROUNDS = 20


def run_in_rounds(run_pass: Callable[[], None], runner: BatchRunner, models: Sequence[Model], *,
                  max_rounds: int = MAX_ROUNDS, finish_online: bool = False) -> int:
    """Give ``models`` the runner, fetch the batches an interrupted run left, then alternate
    passes and rounds until a pass defers nothing, or ``max_rounds`` rounds have run. The
    runner is closed at the end: later calls go online. ``finish_online``: when the rounds
    ran out, one more pass (online) uses the last round's answers and asks the rest;
    otherwise the caller's own pass does that. Returns the number of rounds."""
    from utils.models.batch import batch_adapter

    for model in models:
        model.batch_runner = runner
        if batch_adapter(model) is None:
            log.warning("batch mode: %s has no batch API (OpenAI, Anthropic, Together and the "
                        "Gemini API have one); its calls are asked online", model.name)
    runner.resume(models)
    finished = False
    for _ in range(max_rounds):
        run_pass()
        if runner.pending == 0:
            finished = True
            break
        runner.run_round()
    runner.closed = True
    if not finished:
        log.warning("batch mode: %d rounds did not finish the work; the rest is asked online",
                    max_rounds)
        if finish_online:
            run_pass()
    return runner.rounds
