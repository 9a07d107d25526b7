"""The Python API of the synthesis: ``from synthesis import synthesize``.

    from synthesis import synthesize

    out = synthesize(embedded=True, n_personas=1, output_dir="synthetic_data")
    len(out.instances), out.output_dir

``synthesize`` runs what ``cupid-synth`` (``python -m synthesis.run``) runs, through the
same settings (``synthesis.run.synthesis_config``) and pipeline: the same output directory,
resume and failure rules. Its keyword arguments are the command's flags by name; bad ones
raise ``ValueError`` naming the argument. The logging it sets up for the run is taken down
afterwards.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cupid.utils.command_line import namespace_from_kwargs


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


def synthesize(*, output_dir: str | Path = "synthetic_data", **flags: Any) -> SynthesisResult:
    """Generate CUPID-style data into ``output_dir`` and return its instances.

    ``flags``: every flag of ``cupid-synth`` by its name, e.g. ``model=...``,
    ``user_model=...``, ``all_models=...``, ``embedded=True``, ``n_personas=2``,
    ``n_factors=8``, ``n_sessions=13``, ``max_turns=16``, ``n_workers=4``, ``seed=0``,
    ``persona_seeds="bundled"``, ``batch=True``, ``log_file=...``. Model names are those of
    the command line, including ``path/to/file.py:Class``.

    Raises ``utils.io.StorageError`` (an OSError naming the file and the operation) when the
    file system refuses a write (disk full, read-only, permission denied, not a directory):
    a read-only ``output_dir`` before any call; mid-run, once the worker threads have
    stopped. Every file written before it is whole; a call with room resumes there.

    Raises ``synthesis.pipeline.OutputDirInUse`` (naming the directory and the pid and host
    of the run holding it), before any model is made, when another run (a command or
    another ``synthesize()``) is writing to ``output_dir``.
    """
    from cupid.synthesis.pipeline import run_synthesis
    from cupid.synthesis.run import build_parser, setup_logging, synthesis_config
    from cupid.utils.io import clean_orphan_tmp

    from cupid.utils.models.limits import parse_rate_limit, set_user_limits

    for name in ("dry_run", "json"):
        if name in flags:
            raise ValueError(f"{name}: not an argument of synthesize(); run cupid-synth --dry_run "
                             f"for a forecast")
    args = namespace_from_kwargs(build_parser(), {"output_dir": str(output_dir), **flags})
    if args.embedded and args.all_models:
        raise ValueError("embedded: give embedded=True or all_models=NAME, not both")
    try:
        limits = dict(parse_rate_limit(spec) for spec in args.rate_limit)
    except ValueError as exc:
        raise ValueError(f"rate_limit: {exc}") from None
    cfg = synthesis_config(args)
    set_user_limits(limits)
    saved = _LoggingState()
    setup_logging(args.log_file)
    try:
        clean_orphan_tmp(cfg.output_dir)
        cfg.check()
        summary = run_synthesis(cfg)
    finally:
        saved.restore()
    out = Path(cfg.output_dir)
    instances = [json.loads(path.read_text(encoding="utf-8"))
                 for path in sorted((out / "instances").glob("*.json"))]
    return SynthesisResult(instances=instances, output_dir=out, summary=summary,
                           failures=list(summary.get("failures", [])))


class _LoggingState:
    """The root logger's handlers and level and our loggers' levels, which the run's
    logging setup (``logging.basicConfig(force=True)``) replaces."""

    NAMES = ("synthesis", "evaluation", "cupid")

    def __init__(self) -> None:
        self.root = logging.getLogger()
        self.handlers = list(self.root.handlers)
        self.level = self.root.level
        self.levels = {name: logging.getLogger(name).level for name in self.NAMES}

    def restore(self) -> None:
        for handler in list(self.root.handlers):
            if handler not in self.handlers:
                self.root.removeHandler(handler)
                handler.close()
        for handler in self.handlers:
            if handler not in self.root.handlers:
                self.root.addHandler(handler)
        self.root.setLevel(self.level)
        for name, level in self.levels.items():
            logging.getLogger(name).setLevel(level)
