"""The evaluation's engine: ``from cupid.evaluation import evaluate``.

    from cupid.evaluation import evaluate

    run = evaluate("gpt-4.1-nano-2025-04-14", data="data/sample", task="both", n_workers=8)
    run.results["inference"]["f1"], run.run_dir

``cupid-eval`` (evaluation/run.py) parses its flags into these arguments and calls this
function; its exit statuses are the exceptions' ``exit_code``s (utils/errors.py). The
engine prints nothing: its notes, warnings and progress lines are events (utils/events.py), a
line each on stderr unless ``on_event`` takes them. The process is left as it was found: the
"cupid" loggers' handlers, the signal handlers, the caller's Model objects (the run uses
copies); no worker thread outlives the call.
"""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .. import config
from .run_spec import RunSpec, data_path
from ..utils import events
from ..utils.events import Event
from ..utils.io import open_log_file
from ..utils.models.model import Model
from ..utils.models.retry import reset_cancel
from ..utils.redact import RedactingFormatter
from ..utils.stop_signals import SignalGuard


@dataclass
class EvaluationResult:
    """One run's outcome. ``results`` is the content of results.json (docs/results_format.md);
    ``run_dir`` holds it with every instance's file; ``failed`` counts the instances whose
    steps failed in this call (recorded in results.json, asked again by the next call)."""

    results: dict
    run_dir: Path
    failed: int = 0

    @cached_property
    def samples(self) -> list[dict]:
        """One dict per (scorer, instance): the rows ``cupid-report --export`` writes; for
        ``task="interaction"``, one per dialogue (its FILE.interaction export's rows)."""
        if self.results.get("task") == "interaction":
            from .report.interaction_section import sample_rows as dialogue_rows

            return dialogue_rows(self.run_dir)
        from .sample_rows import sample_rows

        return sample_rows(self.run_dir)

    def to_pandas(self):
        """``samples`` as a pandas DataFrame (pandas comes with ``datasets``)."""
        import pandas as pd

        return pd.DataFrame(self.samples)


def evaluate(model: str | Model, *, evaluator: str | Model = config.DEFAULT_EVALUATOR, data: Any = None,
             dataset: str = config.HF_DATASET, split: str = config.HF_SPLIT, revision: str | None = None,
             limit: int | None = None, shard: str | None = None, task: str = "inference",
             setting: Any = "default", strategy_model: str | Model | None = None,
             results_dir: str | Path = "results", n_workers: int = 4,
             use_matcher: bool = False, matcher_url: str = config.PREFMATCHER_BASE_URL,
             model_args: dict | None = None, evaluator_args: dict | None = None,
             matcher_args: dict | None = None, seed: int | None = None,
             timeout: float = config.REQUEST_TIMEOUT, max_retries: int = config.MAX_RETRIES,
             no_cache: bool = False, batch: bool = False, rate_limit: Sequence[str] = (),
             progress_every: int = 0, log_file: str | None = None,
             exclude_filtered: bool = False, on_event: Callable[[Event], Any] | None = None,
             simulator: str | Model = config.DEFAULT_SIMULATOR, max_rounds: int = config.DEFAULT_MAX_ROUNDS,
             judge_final: bool = False) -> EvaluationResult:
    """Evaluate ``model`` on CUPID into ``RESULTS_DIR/<model>[/<setting>]`` and return its
    results; calling it again with the same arguments resumes.

    ``model``, ``evaluator``: a name (a registered name, a hosted name, ``vllm:NAME@URL``,
    ``path/to/file.py:Class``, ``pkg.module:Class``) or a ``Model`` object, used as it is
    (through a copy, which the run gives its cache, usage and overrides).
    ``data``: a file or directory in the dataset's schema (``"data/sample"``), a list of rows,
    a ``datasets.Dataset``, or None for the hub dataset (``dataset``, ``split``, ``revision``).
    ``setting``: a context strategy's name (``"oracle"``, ``"recent:k=2"``, ``"bm25:k=3"``,
    ``"path/file.py:Class"``) or a strategy object (docs/strategies.md). ``strategy_model``:
    the LLM given to a strategy that asks one (``uses_model``), by default the evaluator's.
    ``shard``: ``"I/N"``, the instances whose id hashes to I. ``*_args``: a role's generation
    overrides (``{"temperature": 0.2}``), which name its run. ``exclude_filtered``: results.json's
    numbers leave out the results read from a filtered or refused answer (counted either way).
    ``on_event``: a callable given each note, warning and progress line as an ``Event``
    (utils/events.py) instead of their line on stderr.
    ``task="interaction"``: a dialogue per instance with the release's user simulator
    (``simulator``, at its parameters) for up to ``max_rounds`` replies (docs/interaction.md);
    its results.json (the measures) is in the returned ``run_dir``; ``judge_final``: the
    evaluator also judges each dialogue's last reply (Figure 16's judge).
    The rest as ``cupid-eval --help``.

    Raises ``BadInput`` (a ValueError) for a bad argument or bad data, ``SetupError`` when
    the run cannot start (a missing key, an unreachable server, a run directory made with other
    settings), ``StorageError`` when the file system refuses a write, ``Interrupted`` (a
    KeyboardInterrupt) on Ctrl-C, SIGTERM or SIGHUP; every finished step is kept either way.
    A failed step is not raised: it is recorded, counted (``failed``) and asked again next time.
    """
    arguments = dict(locals())  # RunSpec's fields, and on_event
    del arguments["on_event"]
    from .invocation import Invocation

    spec = RunSpec(**{**arguments, "data": data_path(data, results_dir)})
    with process_state_kept(spec.log_file, on_event):
        reset_cancel()
        with SignalGuard() as signals:  # SIGTERM and SIGHUP stop the run as Ctrl-C does
            if spec.task == "interaction":
                from .interaction_run import run_interaction

                results, run_dir = run_interaction(spec)
                return EvaluationResult(results=results, run_dir=run_dir,
                                        failed=results["this_invocation"]["ran_failed"])
            invocation = Invocation(spec, signals)
            results = invocation.run()
    return EvaluationResult(results=results, run_dir=invocation.run_dir, failed=results["this_invocation"]["ran_failed"])


@contextmanager
def process_state_kept(log_file: str | None, on_event: Callable[[Event], Any] | None) -> Iterator[None]:
    """The run's logging on the "cupid" logger: errors on stderr; with ``log_file``, everything
    at INFO there, the run's events too (StorageError when it cannot be opened, before anything
    is run). Its events (utils/events.py) to ``on_event`` when given. What the run changed in
    the process is put back when it ends (``SignalGuard`` puts back the signal handlers): the
    loggers' handlers and level. A caller's Model objects are copied by the run, never changed."""
    logger = logging.getLogger("cupid")
    handlers, level = list(logger.handlers), logger.level
    try:
        logger.setLevel(logging.INFO)
        console = logging.StreamHandler(sys.stderr)
        console.setLevel(logging.ERROR)
        console.setFormatter(RedactingFormatter("%(levelname)s %(message)s"))
        logger.handlers[:] = [console]
        file_handler = None
        if log_file:
            file_handler = open_log_file(log_file)
            file_handler.setLevel(logging.INFO)
            file_handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
            logger.addHandler(file_handler)
        with events.routed(on_event, file_handler):
            yield
    finally:
        for handler in logger.handlers:
            if handler not in handlers:
                handler.close()
        logger.handlers[:] = handlers
        logger.setLevel(level)
