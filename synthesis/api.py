"""The synthesis's engine: ``from cupid.synthesis import synthesize``.

    from cupid.synthesis import synthesize

    out = synthesize(embedded=True, n_personas=1, output_dir="synthetic_data")
    len(out.instances), out.output_dir

``cupid-synth`` (synthesis/run.py) parses its flags into these arguments and calls this
function; its exit statuses are the exceptions' ``exit_code``s (utils/errors.py).
"""
from __future__ import annotations

import contextlib
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from .. import config
from .personas import BATCH_SIZE, SEED
from .options import SynthesisConfig
from ..utils.errors import BadInput, Interrupted
from ..utils.models.model import Model


@dataclass
class SynthesisResult:
    """``instances``: every instance in the output directory (the evaluation's data
    format, the rows ``evaluate(data=...)`` takes); ``output_dir``; ``summary``: the content
    of summary.json (counts, failures, usage); ``failures``: the personas that failed in
    this call (a rerun with the same settings retries them)."""

    instances: list[dict]
    output_dir: Path
    summary: dict
    failures: list[dict] = field(default_factory=list)


def synthesize(*, output_dir: str | Path = "synthetic_data", model: str | None = None,
               user_model: str | None = None, assistant_model: str | None = None,
               decomposer_model: str | None = None, all_models: str | None = None, embedded: bool = False,
               n_personas: int = 4, n_factors: int = 8, n_sessions: int = 13, max_turns: int = 16,
               n_workers: int = 1, seed: int = SEED, persona_seeds: str | None = None,
               persona_batch_size: int = BATCH_SIZE, max_regenerations: int = config.MAX_PARSE_RETRIES,
               batch: bool = False, rate_limit: Sequence[str] = (), log_file: str | None = None,
               no_progress: bool = False) -> SynthesisResult:
    """Generate CUPID-style data into ``output_dir`` and return its instances; calling it
    again with the same settings resumes (and a larger ``n_personas`` extends it).

    Roles: ``model`` (default the release's, claude-3-5-sonnet-20241022) writes the personas,
    factors and sessions and, unless named, also decomposes (``decomposer_model``) and
    simulates the user (``user_model``); ``assistant_model`` is the release's fixed Llama 3.1
    8B. ``all_models`` puts one model in every role not named; ``embedded=True`` the
    offline model, with the bundled persona seeds. ``persona_seeds``: a file, ``"bundled"``,
    or None for PersonaHub. Model names are those of the command line, including
    ``path/to/file.py:Class``.

    Raises ``BadInput`` for bad settings (or settings other than those the directory was
    made with), ``SetupError`` (a missing key, the seeds unreachable, ``OutputDirInUse``
    when another run writes to ``output_dir``), ``StorageError`` when the file system refuses
    a write (every file written before it is whole: a call with room resumes there),
    KeyboardInterrupt when stopped. A persona that fails is not raised: it is recorded in
    summary.json (``failures``) and retried by the next call.
    """
    settings = {k: v for k, v in locals().items() if k not in ("rate_limit", "log_file")}  # synthesis_config's
    from .pipeline import run_synthesis
    from ..utils.io import StorageError, check_writable, clean_orphan_tmp
    from ..utils.forecast import parse_limits
    from ..utils.models.pacing import set_user_limits
    from ..utils.stop_signals import SignalGuard, stop_cause, stop_status

    cfg = synthesis_config(**settings)
    limits = parse_limits(rate_limit)
    out, started = Path(cfg.output_dir), False
    try:
        with run_logging(log_file):
            set_user_limits(limits)
            check_writable(out)  # before any model is made or called
            started = True
            clean_orphan_tmp(out)  # left by a writer killed mid-write
            with SignalGuard():  # SIGTERM and SIGHUP stop the run as Ctrl-C does
                summary = run_synthesis(cfg)
    except StorageError as exc:
        if not started:
            exc.add_note(f"safe: nothing was run and nothing in {out} was changed; choose a log file and "
                         f"an --output_dir where you can write and rerun.")
        elif not getattr(exc, "__notes__", None):
            exc.add_note(f"safe: every file written before it in {out} is whole (each is written at once or "
                         f"not at all)" + (f", the submitted batches are listed in {out / 'batches.json'}"
                                           if batch else "")
                         + f"; {remedy(exc)} and rerun the same command: it resumes there without asking "
                           f"finished calls again.")
        raise
    except KeyboardInterrupt as exc:
        raise Interrupted(f"{stop_cause(exc)}: every finished file is kept in {out}"
                          + (f" (what was done so far: {out / 'summary.json'})"
                             if getattr(exc, "summary_written", False) else "")
                          + (f"; the submitted batches are listed in {out / 'batches.json'}" if batch else "")
                          + "; rerun the same command to resume.", stop_status(exc)) from None
    instances = [json.loads(path.read_text(encoding="utf-8")) for path in sorted((out / "instances").glob("*.json"))]
    return SynthesisResult(instances=instances, output_dir=out, summary=summary,
                           failures=list(summary.get("failures", [])))


def synthesis_config(*, output_dir, model, user_model, assistant_model, decomposer_model, all_models,
                     embedded, n_personas, n_factors, n_sessions, max_turns, n_workers, seed, persona_seeds,
                     persona_batch_size, max_regenerations, batch, no_progress) -> SynthesisConfig:
    """The checked settings: each role its own model, else ``all_models`` (or the embedded
    model), else the release's default."""
    if embedded and all_models:
        raise BadInput("embedded: give embedded=True or all_models=NAME, not both")
    for name, value in (("model", model), ("user_model", user_model), ("assistant_model", assistant_model),
                        ("decomposer_model", decomposer_model), ("all_models", all_models)):
        if value is not None and not isinstance(value, (str, Model)):
            raise BadInput(f"{name}: expected a model name, got {value!r}")
    for name, value in (("n_personas", n_personas), ("n_factors", n_factors), ("n_sessions", n_sessions),
                        ("max_turns", max_turns), ("n_workers", n_workers), ("persona_batch_size", persona_batch_size),
                        ("seed", seed), ("max_regenerations", max_regenerations)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadInput(f"{name}: expected a whole number, got {value!r}")
    if max_regenerations < 0 or seed < 0:
        raise BadInput("max_regenerations and seed must be at least 0")
    every = config.EMBEDDED_MODEL if embedded else all_models
    cfg = SynthesisConfig(
        output_dir=Path(output_dir), model=model or every or SynthesisConfig.model,
        user_model=user_model or every, assistant_model=assistant_model or every or SynthesisConfig.assistant_model,
        decomposer_model=decomposer_model or every, n_personas=n_personas, n_factors=n_factors,
        n_sessions=n_sessions, max_turns=max_turns, n_workers=n_workers, seed=seed,
        persona_seeds="bundled" if embedded and persona_seeds is None else persona_seeds,
        persona_batch_size=persona_batch_size, max_attempts=max_regenerations + 1,
        show_progress=False if no_progress else None, batch=batch)
    cfg.check()
    return cfg


@contextlib.contextmanager
def run_logging(log_file: str | None) -> Iterator[None]:
    """For the duration of a run, our messages at INFO on stderr (and in ``log_file``),
    libraries' at WARNING, no key in either; then the root logger's handlers and level and
    our loggers' levels, which ``logging.basicConfig(force=True)`` replaces, put back.
    Raises StorageError when the log file cannot be opened."""
    from ..utils.io import open_log_file
    from ..utils import events
    from ..utils.redact import RedactingFormatter

    root, ours = logging.getLogger(), ("cupid", "synthesis", "evaluation")
    saved_handlers, saved_level = list(root.handlers), root.level
    saved_levels = {name: logging.getLogger(name).level for name in ours}
    try:
        handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
        if log_file:  # a write refused later is one warning; the run goes on without the log
            handlers.append(open_log_file(log_file))
        formatter = RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        for handler in handlers:
            handler.setFormatter(formatter)
        logging.basicConfig(level=logging.WARNING, handlers=handlers, force=True)
        for name in ours:
            logging.getLogger(name).setLevel(logging.INFO)
        with events.routed(log_handler=handlers[1] if log_file else None):  # a line each on stderr already
            yield
    finally:
        for handler in root.handlers:
            if handler not in saved_handlers:
                handler.close()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)


def remedy(exc: OSError) -> str:
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space"
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return "make the directory writable"
    return "make the path a writable directory again"
