"""The Python API of the evaluation: ``from evaluation import evaluate``.

    from evaluation import evaluate

    run = evaluate("gpt-4.1-nano-2025-04-14", data="data/sample", task="both", n_workers=8)
    run.results["inference"]["f1"], run.run_dir

``evaluate`` runs exactly what ``cupid-eval`` (``python -m evaluation.run``) runs for one
model and setting, through the same function (``evaluation.run.evaluate_one``): the same
validation, run directory, resume, cache and failure rules, and the same results.json. It
adds what a program calling it needs: a model may be a ``Model`` object, the data a list of
rows or a ``datasets.Dataset``; bad arguments raise ``ValueError`` naming the argument; and
the process is left as it was found (the "cupid" logger's handlers, signal handlers, the
response cache's connection; no worker thread outlives the call).
"""
from __future__ import annotations

import hashlib
import json
import logging
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cupid import config
from cupid.evaluation.flags import build_parser, collected_errors, setup_logging
from cupid.utils.command_line import namespace_from_kwargs
from cupid.utils.models.model import Model
from cupid.utils.models.retry import reset_cancel


class EvaluationError(ValueError):
    """The run could not start or was stopped (bad data, a missing key, an unreachable
    server, a run directory made with other settings); the message is the one line the
    command prints."""


@dataclass
class EvaluationResult:
    """One run's outcome. ``results`` is the content of results.json (docs/results_format.md);
    ``run_dir`` holds it with every instance's file; ``failed`` counts the instances whose
    steps failed in this call (recorded in results.json, asked again by the next call)."""

    results: dict
    run_dir: Path
    exit_code: int
    failed: int = 0
    _samples: list[dict] | None = field(default=None, repr=False)

    @property
    def samples(self) -> list[dict]:
        """One dict per (scorer, instance): the rows ``cupid-report --export`` writes."""
        if self._samples is None:
            from cupid.evaluation.samples import sample_rows

            self._samples = sample_rows(self.run_dir)
        return self._samples

    def to_pandas(self):
        """``samples`` as a pandas DataFrame (pandas comes with ``datasets``)."""
        import pandas as pd

        return pd.DataFrame(self.samples)


def evaluate(model: str | Model, *, evaluator: str | Model | None = None,
             data: Any = None, task: str = "inference", setting: str = "default",
             results_dir: str | Path = "results", n_workers: int = 4,
             **flags: Any) -> EvaluationResult:
    """Evaluate ``model`` on CUPID and return its results.

    ``model`` and ``evaluator``: a name as the command line takes it (a registered name, a
    hosted name, ``vllm:NAME@URL``, ``path/to/file.py:Class``, ``pkg.module:Class``) or a
    ``Model`` object, registered or not (used as it is). ``evaluator`` defaults to the
    benchmark's (config.DEFAULT_EVALUATOR). ``data``: a path (a file, or a directory such
    as ``"data/sample"``), a list of dicts in the dataset's schema, a ``datasets.Dataset``,
    or None for the Hugging Face dataset (``dataset``, ``split``, ``revision`` flags). Rows
    given in memory are written once to ``RESULTS_DIR/.inputs/data-<hash>.jsonl`` so the run
    records a file it came from. ``flags``: every other flag of ``cupid-eval`` by its
    name (``limit=10``, ``use_matcher=True``, ``model_args={"temperature": 0.2}``,
    ``batch=True``, ``rate_limit=["tpm=30000"]``, ``log_file=...``); not ``sweep`` or
    ``shard`` (call ``evaluate`` once per run instead), nor ``dry_run`` (a command).

    Raises ``ValueError`` for a bad argument (naming it), ``EvaluationError`` (a
    ValueError) when the run cannot start, ``KeyboardInterrupt`` when interrupted (every
    finished step is kept; call again to resume).
    """
    from cupid.evaluation import run as run_module

    hints = {"sweep": "call evaluate() once per run", "shard": "call evaluate() once per run",
             "data_dir": "pass data=PATH", "dry_run": "run cupid-eval --dry_run for a forecast",
             "json": "run cupid-eval --dry_run --json for a forecast"}
    for name in flags:
        if name in hints:
            raise ValueError(f"{name}: not an argument of evaluate(); {hints[name]}")
    _check_model_argument("model", model)
    if evaluator is not None:
        _check_model_argument("evaluator", evaluator)
    parser = build_parser()
    args = namespace_from_kwargs(parser, {
        "task": task, "setting": setting, "results_dir": str(results_dir),
        "n_workers": n_workers, **flags})
    from cupid.utils.models.limits import parse_rate_limit

    for spec in args.rate_limit:
        try:
            parse_rate_limit(spec)
        except ValueError as exc:
            raise ValueError(f"rate_limit: {exc}") from None
    args.model = model
    args.evaluator = evaluator if evaluator is not None else config.DEFAULT_EVALUATOR
    args.data, args.data_dir = _data_arguments(data, Path(args.results_dir))

    from cupid.utils.io import StorageError
    from cupid.utils.stop_signals import STOP_CODES

    saved = _ProcessState.save([m for m in (model, evaluator) if isinstance(m, Model)])
    shared = run_module.SharedResources(owns_process=False)
    try:
        with collected_errors() as errors:
            try:
                setup_logging(args.log_file)
                reset_cancel()
                with shared.signals:  # SIGTERM and SIGHUP stop the run as Ctrl-C does, as in the command
                    code = run_module.evaluate_one(args, shared)
            except StorageError as exc:
                raise EvaluationError(str(exc)) from None
    finally:
        shared.close()
        saved.restore()
    if code in STOP_CODES:
        raise KeyboardInterrupt("interrupted; every finished step is kept, call evaluate() again to resume")
    if code not in (0, 1) or shared.last_results is None:
        message = errors[-1] if errors else f"the run stopped with exit status {code}"
        raise EvaluationError(message.removeprefix("error: "))
    results = shared.last_results
    return EvaluationResult(results=results, run_dir=_run_dir(results, args), exit_code=code,
                            failed=results.get("this_invocation", {}).get("ran_failed", 0))


def _run_dir(results: dict, args) -> Path:
    from cupid.evaluation.store import run_dir_for

    return Path(run_dir_for(args.results_dir, results["settings"]["model"], args.setting))


def _check_model_argument(name: str, value: Any) -> None:
    if isinstance(value, Model):
        return
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name}: expected a model name or a Model instance, got {value!r}")


def _data_arguments(data: Any, results_dir: Path) -> tuple[str | None, str | None]:
    """(--data, --data_dir) for ``data``."""
    if data is None:
        return None, None
    if isinstance(data, (str, Path)):
        from cupid.evaluation.flags import bundled_path

        path = bundled_path(str(data))
        return (None, path) if Path(path).is_dir() else (path, None)
    if type(data).__module__.split(".")[0] == "datasets" and hasattr(data, "to_list"):
        data = data.to_list()
    if isinstance(data, (list, tuple)):
        if not data:
            raise ValueError("data: the list of rows is empty")
        lines = []
        for number, row in enumerate(data):
            if not isinstance(row, dict):
                raise ValueError(f"data: row {number} is a {type(row).__name__}, not a dict in the "
                                 f"dataset's schema")
            try:
                lines.append(json.dumps(row, ensure_ascii=False, sort_keys=True))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"data: row {number} is not JSON ({exc})") from None
        text = "\n".join(lines) + "\n"
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        path = results_dir / ".inputs" / f"data-{digest}.jsonl"
        if not path.exists():
            from cupid.utils.io import atomic_write_text

            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
        return str(path), None
    raise ValueError(f"data: expected a path, a list of dicts or a datasets.Dataset, got "
                     f"{type(data).__name__}")


class _ProcessState:
    """What a run changes in the process and ``evaluate`` puts back: the "cupid" logger's
    handlers and level (setup_logging replaces them), the signal handlers, and the cache of
    the caller's own Model objects (the run's cache is closed when it ends). Their usage is
    counted afresh for each call, as a resolved model's is."""

    SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                    if hasattr(signal, name))

    def __init__(self, models: list[Model]) -> None:
        from cupid.utils.models.usage import UsageTracker

        self.caches = [(m, m.cache) for m in models]
        for m in models:
            m.usage = UsageTracker()
        self.logger = logging.getLogger("cupid")
        self.handlers = list(self.logger.handlers)
        self.level = self.logger.level
        self.signals = ({s: signal.getsignal(s) for s in self.SIGNALS}
                        if threading.current_thread() is threading.main_thread() else {})

    @classmethod
    def save(cls, models: list[Model]) -> "_ProcessState":
        return cls(models)

    def restore(self) -> None:
        for model, cache in self.caches:
            model.cache = cache
        for handler in list(self.logger.handlers):
            if handler not in self.handlers:
                self.logger.removeHandler(handler)
                handler.close()
        for handler in self.handlers:
            if handler not in self.logger.handlers:
                self.logger.addHandler(handler)
        self.logger.setLevel(self.level)
        for signum, handler in self.signals.items():
            if handler is not None and signal.getsignal(signum) is not handler:
                signal.signal(signum, handler)
