"""Batch mode for synthesis (``python -m synthesis.run --batch``): the synthesizer's calls
(persona descriptions, context factors, sessions) through its provider's batch API, at the
batch price.

Only the synthesizer gets the batch runner (utils/models/batch.py). The decomposer and the
two simulators answer online as always: a dialogue is a chain of turns, each waiting for the
one before, so batching its turns would stretch every dialogue over dozens of rounds.

A pass runs the task graph (synthesis/pipeline.py) over what is on disk. A task whose
synthesizer call misses the cache is deferred: it ends "waiting", with no failure and no
attempt recorded. A round then submits the deferred calls, waits for them and caches the
answers; the next pass replays them and takes each persona one stage on: descriptions,
then factors, then sessions, after which the persona's checklists, dialogues and instances
are made online in that same pass. An invalid answer's re-ask adds a round. The loop is
utils/models/batch_rounds.py's, shared with the evaluation.

Every batch id goes to the output directory's ``batches.json`` as soon as the provider
accepts it; a run killed at any moment and started again fetches those batches
(``BatchRunner.resume``) and submits nothing twice. A request that failed in its batch is
asked online in the next pass; if that fails too, its persona fails like any other.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from utils.models.batch import BatchRunner, batch_adapter
from utils.models.batch_rounds import MAX_ROUNDS, run_in_rounds
from utils.models.model import Model

if TYPE_CHECKING:
    from synthesis.pipeline import Synthesis

log = logging.getLogger("synthesis.batch")

BATCHES_FILE = "batches.json"


def make_runner(synthesizer: Model, out: Path) -> BatchRunner | None:
    """The runner of ``--batch``, or None (with the reason logged) when the synthesizer's
    calls cannot go through a batch API and are asked online."""
    if batch_adapter(synthesizer) is None:
        log.warning("--batch: %s has no batch API (only OpenAI, Anthropic, Together and the "
                    "Gemini API have one); its calls are asked online", synthesizer.name)
        return None
    if synthesizer.cache is None:
        log.warning("--batch: %s has no response cache to keep the batches' answers in; its "
                    "calls are asked online", synthesizer.name)
        return None
    return BatchRunner(Path(out) / BATCHES_FILE)


def run_in_passes(synthesis: "Synthesis", runner: BatchRunner) -> int:
    """Passes and rounds until no synthesizer call waits; returns the number of rounds.

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
            first_skipped = {stage: stats.skipped for stage, stats in synthesis.stats.items()}
        else:
            for stage, stats in synthesis.stats.items():
                stats.skipped = first_skipped.get(stage, 0)
        if runner.pending and not runner.closed:
            waiting = ", ".join(f"{stage} {n}" for stage, n in synthesis.waiting.items())
            log.info("batch pass %d: %d call(s) wait for batch round %d (tasks waiting: %s)",
                     passes, runner.pending, runner.rounds + 1, waiting)

    # Each round takes a persona at least one stage (or one re-ask) on.
    max_rounds = max(MAX_ROUNDS, 3 * synthesis.cfg.max_attempts + 2)
    return run_in_rounds(one_pass, runner, [synthesis.models["synthesizer"]],
                         max_rounds=max_rounds, finish_online=True)
