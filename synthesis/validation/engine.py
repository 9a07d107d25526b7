"""The validation's engine (§3.2, Appendix E): ``from cupid.synthesis import validate``.

    from cupid.synthesis import validate

    out = validate("synthetic_data", output_dir="validated", n_workers=4)
    out.summary["solvable_pct"], len(out.verified), out.output_dir / "verified"

For every instance of a data directory (a synthesis output or the benchmark's files) and
each of its relevant preferences (validation_plan.py), the validator extracts per checklist
entry the user's fragments that express it (fragments.py, Figure 20), on each session
of that preference and, for the challenging check, on the current request alone. Output
directory::

    validation.jsonl           one row per instance: solvable, challenging, every entry's verdict
    verified/                  the instances that pass both, in the dataset's schema
    summary.json               solvable %, challenging %, entries expressed %, ratings, failures
    answers/<kind>/<key>.json  every extraction (and decomposition) asked, keyed by its request
    batches.json, .llm_cache/  as the other commands keep them

Each answer is written as soon as it exists, keyed by what was asked (the three instances of
a persona share their sessions: each is asked once), so a rerun asks only what is missing
and a failed extraction again, from fresh attempts. A failed extraction is recorded, counted
and leaves its entries "failed" (the instance's verdict unknown), never "not expressed".
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ... import config
from ...utils.progress import HEARTBEAT_S, ProgressLog
from ...evaluation.steps import decompose
from ...evaluation.steps.ask import Ask
from . import fragments
from .plan import (EntryResult, conclude, consistent_instances, known_checklists,
                   plan_checks, session_at)
from ...utils.dataset import Instance
from ...utils.errors import BadInput, Interrupted
from ...utils.io import atomic_write_json, read_json
from ...utils.models.reask import Answer, UnusableAnswer
from ...utils.models.call_errors import ModelCallFailed
from ...utils.models.model import Model
from ...utils.redact import redact

log = logging.getLogger("cupid.validation")

DEFAULT_VALIDATOR = config.DEFAULT_EVALUATOR  # Appendix E: gpt-4o-2024-11-20, temperature 0
LOCK = ".validation.lock"


@dataclass
class ValidationResult:
    """``rows``: validation.jsonl's rows; ``verified``: the instances that passed (rows in
    the dataset's schema, as in ``verified/``); ``summary``: summary.json; ``failed``: the
    extractions that failed for good in this call (a rerun asks them again)."""
    rows: list[dict]
    verified: list[dict]
    summary: dict
    output_dir: Path
    failed: int = 0


class AnswerStore:
    """Every answer asked, one file per request (``answers/<kind>/<key>.json``, the key a
    hash of the model, the prompt version and the values), in the evaluation's step-record
    shape; a request in flight is asked by one thread while others wait for it."""

    def __init__(self, directory: Path, model: Model) -> None:
        self.directory, self.model = directory, model
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.asked_now: set[str] = set()
        self.failed_now = 0

    def key(self, ask: Ask) -> str:
        from ...utils.prompts import load_prompt
        material = json.dumps([self.model.label, ask.prompt, load_prompt(ask.prompt).version, ask.values],
                              sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(material.encode("utf-8")).hexdigest()[:24]

    def path(self, kind: str, ask: Ask) -> Path:
        return self.directory / kind / f"{self.key(ask)}.json"

    def stored(self, kind: str, ask: Ask, check) -> dict | None:
        path = self.path(kind, ask)
        record = read_json(path) if path.exists() else None
        if record and record.get("status") == "done" and check(record.get("output") or {}) is None:
            return record
        return record if record and record.get("status") == "failed" else None

    def get(self, kind: str, ask: Ask, check) -> tuple[dict | None, str | None]:
        """(output, None), or (None, why it failed). Lets BatchDeferred pass (batch mode)."""
        path = self.path(kind, ask)
        with self._guard:
            lock = self._locks.setdefault(str(path), threading.Lock())
        with lock:
            record = self.stored(kind, ask, check)
            if record and (record["status"] == "done" or str(path) in self.asked_now):
                return record.get("output"), record.get("error")
            first_variant = (record or {}).get("next_variant", 0)
            try:
                answer = ask.answer(self.model, first_variant=first_variant)
                status, output, reason = "done", answer.value, None
            except (UnusableAnswer, ModelCallFailed) as exc:
                answer = exc.answer or Answer(next_variant=first_variant)
                status, output = "failed", None
                reason = (f"unparseable answer: {exc.reason}" if isinstance(exc, UnusableAnswer)
                          else f"{type(exc).__name__}: {exc.reason}")
                with self._guard:
                    self.failed_now += 1
                log.warning("%s %s failed: %s", kind, path.stem, reason)
            atomic_write_json(path, {"status": status, "model": self.model.name, "output": output,
                                     "raw": redact(answer.raws), "error": redact(reason), "attempts": answer.attempts,
                                     "next_variant": answer.next_variant, "usage": answer.usage,
                                     "sent": answer.sent or None, "latency_s": answer.latency_s,
                                     "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())})
            self.asked_now.add(str(path))
            return output, reason


class Validation:
    def __init__(self, instances: list[Instance], data_dir: Path, out: Path, model: Model,
                 series: dict[str, Instance]) -> None:
        self.instances, self.out, self.model = instances, out, model
        self.store = AnswerStore(out / "answers", model)
        self.checklists = known_checklists(data_dir, instances)
        self.series = series  # each persona's consistent instance, of the whole data

    def checklist(self, instance: Instance, preference: str) -> tuple[list[str] | None, str]:
        """The preference's checklist and where it came from; decomposed by the validator
        (the evaluation's decompose step) when the data records none."""
        known = self.checklists.get((instance.persona_id, preference.strip()))
        if known:
            return known
        output, error = self.store.get("checklists", decompose.ask(preference), decompose.check)
        return (output["checklist"], "decomposed") if output else (None, f"decomposition failed: {error}")

    def row(self, instance: Instance) -> dict:
        checks, unchecked = plan_checks(instance, self.series.get(instance.persona_id))
        entries, notes = [], list(unchecked)
        for check in checks:
            checklist, source = self.checklist(instance, check.preference)
            if checklist is None:
                notes.append(f"{check.role} preference: {source}")
                entries.append({"preference_role": check.role, "preference": check.preference, "index": None,
                                "entry": None, "verdict": "failed", "fragments": [], "rating": None})
                continue
            results = [EntryResult(check.role, check.preference, i, text, no_session=not check.positions)
                       for i, text in enumerate(checklist, start=1)]
            for position in check.positions:
                session = session_at(instance, position)
                output, error = self.store.get("extractions", fragments.ask(checklist, session),
                                               fragments.check)
                if output is None:
                    notes.append(f"{check.role} preference, {'the request' if position == 0 else f'session {position}'}: "
                                 f"{error}")
                for result, item in zip(results, (output or {}).get("items") or [None] * len(results)):
                    kept, dropped = fragments.kept_fragments(item["fragments"], session) if item else ([], [])
                    result.add(position, item, kept, dropped)
            entries += [r.to_dict() for r in results]
            if source == "decomposed":
                notes.append(f"{check.role} preference: its checklist decomposed by the validator (the data records none)")
        solvable, challenging = conclude(entries)
        return {"instance_id": instance.instance_id, "persona_id": instance.persona_id,
                "instance_type": instance.instance_type, "solvable": solvable, "challenging": challenging,
                "verified": bool(solvable and challenging), "entries": entries, "notes": notes}

    def run(self, n_workers: int, batch: bool) -> list[dict]:
        from ...utils.executor import iter_with_progress
        from ...utils.models.batch import BatchDeferred, run_in_rounds, runner_for

        runner = runner_for(self.model, self.out / "batches.json") if batch else None
        if runner is not None:
            def deferred_ok(instance: Instance) -> None:
                with contextlib.suppress(BatchDeferred):  # asked in the next batch round
                    self.row(instance)
            run_in_rounds(lambda: list(iter_with_progress(deferred_ok, self.instances, n_workers=n_workers,
                                                          show=False)), runner, [self.model])
        # Off a terminal (SLURM, CI, nohup) no bar is drawn: lines at a bounded interval instead.
        lines = None if sys.stderr.isatty() else ProgressLog(
            len(self.instances), max(1, len(self.instances) // 20), f"validation [{self.model.name}]",
            workers=n_workers, heartbeat_s=HEARTBEAT_S)
        rows = {}
        try:
            for instance, row in iter_with_progress(self.row, self.instances, n_workers=n_workers, desc="validation"):
                rows[instance.instance_id] = row
                if lines is not None:  # "failed": a verdict left unknown by a failed extraction
                    lines.add(failed=row["solvable"] is None or row["challenging"] is None)
        finally:
            if lines is not None:
                lines.close()
        return [rows[i.instance_id] for i in self.instances]


def validate(data_dir: str | Path, *, output_dir: str | Path = "validation", model: str | Model = DEFAULT_VALIDATOR,
             n_workers: int = 4, limit: int | None = None, batch: bool = False, rate_limit: Sequence[str] = (),
             timeout: float = config.REQUEST_TIMEOUT, max_retries: int = config.MAX_RETRIES,
             no_cache: bool = False, annotations: Sequence[str | Path] = (), tasks_per_page: int = 16,
             log_file: str | None = None) -> ValidationResult:
    """Validate the instances of ``data_dir`` (any path ``evaluate(data=...)`` reads) into
    ``output_dir``; calling it again resumes. ``annotations``: annotators' answer files
    (annotation.py) folded in as the paper does. Raises ``BadInput`` (an argument, the data,
    an annotation file), ``SetupError`` (a missing key, an output directory in use),
    ``StorageError``, ``Interrupted``; a failed extraction is counted in ``failed``."""
    from ...evaluation.data import InstanceSource
    from ..api import run_logging
    from ..outputs import output_dir_lock
    from ...utils.models.cache import CACHE_DIR, ResponseCache
    from ...utils.forecast import parse_limits
    from ...utils.models.pacing import set_user_limits
    from ...utils.models.registry import check_models, resolve_model
    from ...utils.models.retry import cancel_all, reset_cancel
    from ...utils.stop_signals import SignalGuard, stop_cause, stop_status

    for name, value in (("n_workers", n_workers), ("tasks_per_page", tasks_per_page), ("limit", limit or 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BadInput(f"{name}: expected a whole number of at least 1, got {value!r}")
    limits = parse_limits(rate_limit)
    source = InstanceSource(data_path=data_dir, limit=limit)
    source.validate()
    instances = list(source)
    out = Path(output_dir)
    saved_cache = getattr(model, "cache", None)
    try:
        with run_logging(log_file):
            reset_cancel()
            set_user_limits(limits)
            validator = resolve_model(model, role="evaluator", timeout=timeout, max_retries=max_retries)
            check_models([validator])
            # Checked writable before any call: a read-only or full directory costs nothing.
            with output_dir_lock(out, LOCK, "validation"):
                cache = None if no_cache else ResponseCache(out / CACHE_DIR)
                validator.cache = cache
                started = time.perf_counter()
                try:
                    with SignalGuard():
                        work = Validation(instances, Path(data_dir), out, validator, series_of(source, instances))
                        try:
                            rows = work.run(n_workers, batch)
                        except KeyboardInterrupt as exc:
                            cancel_all()  # the calls in flight end now
                            raise Interrupted(f"{stop_cause(exc)}: every answer received is kept in {out / 'answers'}; "
                                              f"rerun the same command to resume.", stop_status(exc)) from None
                    from .files import write_outputs

                    summary, verified = write_outputs(out, source, instances, rows, validator, annotations=annotations,
                                                      tasks_per_page=tasks_per_page,
                                                      wall_time_s=time.perf_counter() - started,
                                                      failed_now=work.store.failed_now)
                finally:
                    if cache is not None:
                        cache.close()
    finally:
        if isinstance(model, Model):  # a caller's model leaves with the cache it came with
            model.cache = saved_cache
    return ValidationResult(rows=rows, verified=verified, summary=summary, output_dir=out,
                            failed=work.store.failed_now)


def series_of(source, instances: list[Instance]) -> dict[str, Instance]:
    """Each persona's consistent instance, from the whole data (``--limit`` may leave it out)."""
    from ...evaluation.data import InstanceSource

    if source.limit is None or source.limit >= (source.total or 0):
        return consistent_instances(instances)
    return consistent_instances(InstanceSource(data_path=source.data_path))
