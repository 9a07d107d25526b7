"""Results on disk: one run directory per (model, setting); see docs/results_format.md.

Every per-instance file is rewritten atomically after every step, so a run killed at any
moment resumes where it stopped and never repeats a finished step. A rerun whose settings
or data differ from the directory's manifest is refused rather than mixing results.

Several processes (or machines sharing the directory) may work on one run directory: an
instance is evaluated only by the process holding its lock (``flock`` on a file under
``.locks/``, released by the kernel when the holder dies, so ``kill -9`` leaves nothing
stuck); the manifest and ``results.json`` are updated under the directory's own lock.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .steps.layouts import format_session_log
from ..utils.dataset import Instance, safe_name
from ..utils.io import FileLock, StorageError, atomic_write_json, move_aside, read_json
from ..utils.redact import redact
from ..utils.errors import SetupError

log = logging.getLogger("cupid.evaluation.store")

MANIFEST = "run.json"
RESULTS = "results.json"
BATCHES = "batches.json"  # batch mode's submitted batch ids (utils/models/batch.py)
RESERVED = {MANIFEST, RESULTS, BATCHES}
LOCKS_DIR = ".locks"
RUN_LOCK = ".run.lock"


def is_reserved_file(file_name: str) -> bool:
    """run.json, results.json, results.<scorer>.json and batches.json are not instance files."""
    return file_name in RESERVED or file_name.startswith("results.")


def is_results_file(file_name: str) -> bool:
    """results.json and results.<scorer>.json: a run's aggregates."""
    return file_name.endswith(".json") and (file_name == RESULTS or file_name.startswith("results."))


def is_instance_file(path: Path) -> bool:
    """A per-instance file of a run directory: a .json file that is neither reserved nor hidden
    (a hidden file is an atomic write in progress)."""
    return path.suffix == ".json" and not path.name.startswith(".") and not is_reserved_file(path.name)


class RunConflictError(SetupError):
    """The run directory holds results made with other settings or other data."""


class CorruptRunFile(SetupError):
    """A file of the run directory that cannot be read and cannot be rebuilt."""


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def run_dir_for(results_dir: str | Path, model_name: str, setting: str) -> Path:
    """``RESULTS_DIR/<model>`` for the default setting, else its subdirectory named after the
    setting's canonical name (``recent:k=2`` -> ``recent_k=2``, ``mine.py:Mine@0a1b2c3d4e`` ->
    ``mine.py_Mine-0a1b2c3d4e``; a name with other characters made safe, with a hash)."""
    base = Path(results_dir) / safe_name(model_name)
    if setting == "default":
        return base
    # A user's strategy's name ends with "@" and its identity's hash: "-hash" in the directory.
    head, hashed, digest = setting.rpartition("@")
    if not hashed or not re.fullmatch(r"[0-9a-f]{10}", digest):
        head, digest = setting, ""
    name = re.sub(r"[:,]", "_", head) + (f"-{digest}" if digest else "")
    return base / (name if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._=-]{0,119}", name) else safe_name(setting))


def instance_file_name(instance_id: str) -> str:
    """Injective: ``safe_name`` keeps an id made of [A-Za-z0-9._-] as it is and appends a hash
    of the original to any other, so distinct ids give distinct names; an id whose name
    would be reserved gets a '+' in front, a character no safe name contains."""
    name = f"{safe_name(instance_id)}.json"
    return f"+{name}" if is_reserved_file(name) else name


def step_record(data: dict, step, scorer: str | None) -> dict:
    """A step's record in an instance file's data ({} when there is none): under the
    scorer's evaluation for a per-scorer step, else the instance's own."""
    recorded = ((data.get("evaluations") or {}).get(scorer) or {}).get("steps") if step.per_scorer \
        else data.get("steps")
    record = (recorded or {}).get(step.name)
    return record if isinstance(record, dict) else {}


# ---------------------------------------------------------------------------------------
# One instance's file
# ---------------------------------------------------------------------------------------
class InstanceRecord:
    """One instance's results file; updates are serialized by a lock and saved atomically.
    The process holding the instance's file lock is its only writer, so what it loaded
    after taking the lock is what is on disk."""

    def __init__(self, path: Path, data: dict):
        self.path = path
        self.data = data
        self.lock = threading.Lock()

    def step(self, name: str, scorer: str | None = None) -> dict | None:
        with self.lock:
            return self._steps(scorer).get(name)

    def _steps(self, scorer: str | None) -> dict:
        if scorer is None:
            return self.data.setdefault("steps", {})
        return self.data.setdefault("evaluations", {}).get(scorer, {}).setdefault("steps", {})

    def ensure_scorer(self, scorer: str, evaluator: str, matcher: str) -> None:
        with self.lock:
            self.data.setdefault("evaluations", {}).setdefault(scorer, {
                "evaluator": evaluator, "matcher": matcher, "steps": {}, "inference": None, "generation": None})

    def set_step(self, name: str, step: dict, scorer: str | None = None) -> None:
        step = {**step, "raw": redact(step.get("raw")), "error": redact(step.get("error"))}
        with self.lock:
            self._steps(scorer)[name] = step
            atomic_write_json(self.path, self.data)

    def set_field(self, key: str, value: Any, scorer: str | None = None) -> None:
        """The file's ``key`` (with ``scorer``, that scorer's) set to ``value``, and saved."""
        with self.lock:
            (self.data if scorer is None else self.data["evaluations"][scorer])[key] = value
            atomic_write_json(self.path, self.data)

    def save(self) -> None:
        with self.lock:
            atomic_write_json(self.path, self.data)


@dataclass
class Survey:
    """What a run directory holds for the instances of one invocation, before any work."""
    done: list[str] = field(default_factory=list)
    changed: list[tuple[str, Path]] = field(default_factory=list)  # id, file
    moved_aside: list[tuple[Path, Path, str]] = field(default_factory=list)  # file, to, why
    invalid: list[tuple[Path, list[str]]] = field(default_factory=list)  # file, its bad values


# ---------------------------------------------------------------------------------------
# The run directory
# ---------------------------------------------------------------------------------------
class RunStore:
    def __init__(self, run_dir: str | Path, manifest: dict):
        self.run_dir = Path(run_dir)
        self.manifest = manifest
        self._summary_locks: dict[str, threading.Lock] = {}
        self._summary_locks_guard = threading.Lock()

    def run_lock(self) -> FileLock:
        return FileLock(self.run_dir / RUN_LOCK)

    # -- the manifest ----------------------------------------------------------------------
    def conflicts_with(self, existing: dict) -> list[str]:
        conflicts = [
            f"{key}: {existing.get(key)!r} there, {self.manifest.get(key)!r} now"
            for key in ("model", "setting") if existing.get(key) != self.manifest.get(key)]
        old_versions = existing.get("prompt_versions", {})
        for name, version in self.manifest.get("prompt_versions", {}).items():
            if name in old_versions and old_versions[name] != version:
                conflicts.append(f"prompt {name}: version {old_versions[name]} there, {version} now")
        old_data, new_data = existing.get("data") or {}, self.manifest.get("data") or {}
        if old_data.get("fingerprint") and new_data.get("fingerprint") \
                and old_data["fingerprint"] != new_data["fingerprint"]:
            conflicts.append(f"data: {_describe_data(old_data)} there, {_describe_data(new_data)} now")
        return conflicts

    def read_manifest(self) -> dict | None:
        path = self.run_dir / MANIFEST
        if not path.exists():
            return None
        try:
            existing = read_json(path)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptRunFile(
                f"{path}: not valid JSON ({str(exc).split(': ', 1)[-1]}); it records the run's "
                f"settings and data, so move it away to start the manifest afresh (instance "
                f"files are kept and reused)") from exc
        except OSError as exc:
            raise StorageError(path, "read", exc) from exc
        if not isinstance(existing, dict):
            raise CorruptRunFile(f"{path}: expected a JSON object; move it away to start afresh")
        return existing

    def open(self) -> "RunStore":
        """Create the directory, or refuse an existing one made with other settings or data,
        and record this invocation's settings in the manifest."""
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(self.run_dir, "create the run directory", exc) from exc
        with self.run_lock():
            existing = self.read_manifest()
            if existing is not None:
                conflicts = self.conflicts_with(existing)
                if conflicts:
                    raise RunConflictError(
                        f"{self.run_dir} holds results made with other settings or data ("
                        + "; ".join(conflicts) + "). Use another --results_dir, or move it away.")
                # This invocation's settings over the recorded ones; the prompt versions of both.
                self.manifest = {**existing, **self.manifest, "updated": now(), "prompt_versions": {
                    **existing.get("prompt_versions", {}), **self.manifest.get("prompt_versions", {})}}
            else:
                self.manifest = {**self.manifest, "created": now()}
            atomic_write_json(self.run_dir / MANIFEST, self.manifest)
        return self

    def record_invocation(self, entry: dict) -> dict:
        """Append one invocation (task, timings, what it ran) to the manifest; return the
        accumulated totals."""
        with self.run_lock():
            manifest = self.read_manifest() or dict(self.manifest)
            invocations = manifest.setdefault("invocations", [])
            invocations.append(entry)
            manifest["wall_time_s"] = round(sum(i.get("wall_time_s", 0) for i in invocations), 2)
            atomic_write_json(self.run_dir / MANIFEST, manifest)
            self.manifest = manifest
        return {"wall_time_s": manifest["wall_time_s"], "invocations": len(invocations)}

    # -- instances -------------------------------------------------------------------------
    def instance_path(self, instance_id: str) -> Path:
        return (self.run_dir / instance_file_name(instance_id)).resolve()

    def instance_lock(self, instance_id: str) -> FileLock:
        return FileLock(self.run_dir / LOCKS_DIR / f"{instance_file_name(instance_id)}.lock")

    def _read_instance(self, path: Path, instance: Instance) -> tuple[dict | None, tuple | None]:
        """The instance's file (None when there is none) and, when it could not be read,
        (file, where it was moved, why): the instance is then evaluated afresh."""
        if not path.exists():
            return None, None
        try:
            data = read_json(path)
            evaluations = data.get("evaluations", {}) if isinstance(data, dict) else None
            if not isinstance(data, dict) or not isinstance(data.get("steps", {}), dict) \
                    or not isinstance(evaluations, dict) or not all(
                        isinstance(e, dict) and isinstance(e.get("steps", {}), dict) for e in evaluations.values()):
                raise ValueError("not an instance record (expected a JSON object with steps and evaluations)")
        except OSError as exc:
            raise StorageError(path, "read", exc) from exc
        except (ValueError, UnicodeDecodeError) as exc:
            reason = str(exc).removeprefix(f"{path}: ")
            try:
                target = move_aside(path)
            except OSError as move_exc:
                raise StorageError(path, f"move the unreadable file aside ({reason})",
                                   move_exc) from move_exc
            log.warning("%s: %s; moved to %s, the instance is evaluated afresh", path, reason, target)
            return None, (path, target, reason)
        if data.get("instance_id") != instance.instance_id:
            raise RunConflictError(
                f"{path} belongs to instance {data.get('instance_id')!r}, "
                f"not {instance.instance_id!r}")
        return data, None

    def survey(self, instances: Iterable[Instance], is_finished: Callable[[dict], bool],
               problems: Callable[[dict], list[str]]) -> Survey:
        """Find the invocation's instances done already; list the ones whose file was
        computed from other content, and those holding unusable values (``problems``); move
        unreadable files aside. Reads, writes nothing else."""
        survey = Survey()
        for instance in instances:
            path = self.instance_path(instance.instance_id)
            data, moved = self._read_instance(path, instance)
            if moved:
                survey.moved_aside.append(moved)
            if data is None:
                continue
            recorded = data.get("fingerprint")
            if recorded is not None and recorded != instance.fingerprint():
                survey.changed.append((instance.instance_id, path))
            else:
                bad = problems(data)
                if bad:
                    survey.invalid.append((path, bad))
                if is_finished(data):
                    survey.done.append(instance.instance_id)
        return survey

    def load(self, instance: Instance, setting: str, model_name: str) -> InstanceRecord:
        """The instance's record, read afresh; call it holding the instance's lock."""
        path = self.instance_path(instance.instance_id)
        data, _ = self._read_instance(path, instance)
        fingerprint = instance.fingerprint()
        if data is not None:
            if data.get("fingerprint") not in (None, fingerprint):
                raise RunConflictError(
                    f"{path} was computed from other content of instance {instance.instance_id!r} "
                    f"(fingerprint {data.get('fingerprint')} there, {fingerprint} now); "
                    f"use another --results_dir, or move the file away to evaluate it afresh")
            data["fingerprint"] = fingerprint
            return InstanceRecord(path, data)
        history = format_session_log(instance.prior_interactions)
        data = {
            "instance_id": instance.instance_id,
            "persona_id": instance.persona_id,
            "instance_type": instance.instance_type,
            "fingerprint": fingerprint,
            "model": model_name,
            "setting": setting,
            "history": {
                "n_sessions": len(instance.prior_interactions),
                "relevant_positions": instance.relevant_positions(),
                # A tokenizer-free estimate: about 4 characters per token for English.
                "history_tokens": max(1, round(len(history) / 4)),
            },
            "steps": {},
            "evaluations": {},
        }
        return InstanceRecord(path, data)

    def iter_records(self) -> Iterator[dict]:
        """Every readable instance file of the directory (another process's included); a file
        that cannot be read is logged and left for the run that owns it to move aside."""
        for path in filter(is_instance_file, sorted(self.run_dir.glob("*.json"))):
            try:
                data = read_json(path)
            except (ValueError, UnicodeDecodeError, OSError) as exc:
                log.error("%s: skipped in the aggregate: %s", path, exc)
                continue
            if isinstance(data, dict):
                yield data

    # -- session summaries (summary setting), shared by every instance ------------------
    def summary_path(self, session_text: str) -> Path:
        digest = hashlib.sha256(session_text.encode("utf-8")).hexdigest()[:20]
        return self.run_dir / "session_summaries" / f"{digest}.json"

    def summary_lock(self, session_text: str) -> threading.Lock:
        with self._summary_locks_guard:
            return self._summary_locks.setdefault(session_text, threading.Lock())

    def write_results(self, results: dict, scorer: str) -> None:
        results = redact(results)
        atomic_write_json(self.run_dir / RESULTS, results)
        atomic_write_json(self.run_dir / f"results.{safe_name(scorer)}.json", results)


def _describe_data(data: dict) -> str:
    where = data.get("path") or f"{data.get('dataset')}[{data.get('split')}]"
    return f"{where} ({data.get('n_instances')} instances, fingerprint {data.get('fingerprint')})"
