"""Results on disk: one run directory per (model, setting); see docs/results_format.md.

Every per-instance file is rewritten atomically after every step, so a run killed at any
moment resumes where it stopped and never repeats a finished step. A rerun whose settings
differ from the directory's manifest is refused rather than mixing results.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import threading
from pathlib import Path
from typing import Any, Iterator

from evaluation.data import Instance, approx_tokens, format_session_log, relevant_positions, safe_name
from utils.io import atomic_write_json, read_json

SETTINGS = ("default", "oracle", "summary", "oracle_preference")
MANIFEST = "run.json"
RESULTS = "results.json"
RESERVED = {MANIFEST, RESULTS}


def _is_reserved(file_name: str) -> bool:
    """run.json, results.json and results.<scorer>.json are not instance files."""
    return file_name in RESERVED or file_name.startswith("results.")


class RunConflictError(RuntimeError):
    """The run directory holds results made with other settings."""


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def run_dir_for(results_dir: str | Path, model_name: str, setting: str) -> Path:
    base = Path(results_dir) / safe_name(model_name)
    return base if setting == "default" else base / setting


class InstanceRecord:
    """One instance's results file; updates are serialized by a lock and saved atomically."""

    def __init__(self, path: Path, data: dict):
        self.path = path
        self.data = data
        self.lock = threading.Lock()

    def step(self, name: str, scorer: str | None = None) -> dict | None:
        with self.lock:
            steps = self._steps(scorer)
            return steps.get(name)

    def done_output(self, name: str, scorer: str | None = None) -> dict | None:
        step = self.step(name, scorer)
        return step["output"] if step and step.get("status") == "done" else None

    def _steps(self, scorer: str | None) -> dict:
        if scorer is None:
            return self.data.setdefault("steps", {})
        return self.data.setdefault("evaluations", {}).get(scorer, {}).setdefault("steps", {})

    def ensure_scorer(self, scorer: str, evaluator: str, matcher: str) -> None:
        with self.lock:
            evaluations = self.data.setdefault("evaluations", {})
            entry = evaluations.setdefault(scorer, {"evaluator": evaluator, "matcher": matcher,
                                                    "steps": {}, "inference": None,
                                                    "generation": None})
            entry.setdefault("steps", {})

    def set_step(self, name: str, step: dict, scorer: str | None = None) -> None:
        with self.lock:
            self._steps(scorer)[name] = step
            atomic_write_json(self.path, self.data)

    def set_scorer_field(self, scorer: str, key: str, value: Any) -> None:
        with self.lock:
            self.data["evaluations"][scorer][key] = value
            atomic_write_json(self.path, self.data)

    def save(self) -> None:
        with self.lock:
            atomic_write_json(self.path, self.data)


class RunStore:
    def __init__(self, run_dir: str | Path, manifest: dict):
        self.run_dir = Path(run_dir)
        self.manifest = manifest
        self._summary_locks: dict[str, threading.Lock] = {}
        self._summary_locks_guard = threading.Lock()

    # -- the manifest ----------------------------------------------------------------------
    def open(self) -> "RunStore":
        """Create the directory, or check that an existing one was made with our settings."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / MANIFEST
        if path.exists():
            existing = read_json(path)
            conflicts = [
                f"{key}: {existing.get(key)!r} there, {self.manifest.get(key)!r} now"
                for key in ("model", "setting") if existing.get(key) != self.manifest.get(key)]
            old_versions = existing.get("prompt_versions", {})
            for name, version in self.manifest.get("prompt_versions", {}).items():
                if name in old_versions and old_versions[name] != version:
                    conflicts.append(f"prompt {name}: version {old_versions[name]} there, {version} now")
            if conflicts:
                raise RunConflictError(
                    f"{self.run_dir} holds results made with other settings ("
                    + "; ".join(conflicts) + "). Use another --results_dir, or move it away.")
            merged = dict(existing)
            merged["prompt_versions"] = {**old_versions, **self.manifest.get("prompt_versions", {})}
            merged["updated"] = now()
            self.manifest = merged
        else:
            self.manifest = {**self.manifest, "created": now()}
        atomic_write_json(path, self.manifest)
        return self

    # -- instances -------------------------------------------------------------------------
    def instance_path(self, instance_id: str) -> Path:
        name = safe_name(instance_id)
        if _is_reserved(f"{name}.json"):
            name = f"instance-{name}"
        path = (self.run_dir / f"{name}.json").resolve()
        if path.parent != self.run_dir.resolve():  # defence in depth; safe_name forbids it
            raise ValueError(f"instance id {instance_id!r} escapes the results directory")
        return path

    def load(self, instance: Instance, setting: str, model_name: str) -> InstanceRecord:
        path = self.instance_path(instance.instance_id)
        if path.exists():
            data = read_json(path)
            if data.get("instance_id") != instance.instance_id:
                raise RunConflictError(
                    f"{path} belongs to instance {data.get('instance_id')!r}, "
                    f"not {instance.instance_id!r}")
            return InstanceRecord(path, data)
        history = format_session_log(instance.prior_interactions)
        data = {
            "instance_id": instance.instance_id,
            "persona_id": instance.persona_id,
            "instance_type": instance.instance_type,
            "model": model_name,
            "setting": setting,
            "history": {
                "n_sessions": len(instance.prior_interactions),
                "relevant_positions": relevant_positions(instance),
                "history_tokens": approx_tokens(history),
            },
            "steps": {},
            "evaluations": {},
        }
        return InstanceRecord(path, data)

    def iter_records(self) -> Iterator[dict]:
        for path in sorted(self.run_dir.glob("*.json")):
            if not _is_reserved(path.name):
                yield read_json(path)

    # -- session summaries (summary setting), shared by every instance ------------------
    def summary_path(self, session_text: str) -> Path:
        digest = hashlib.sha256(session_text.encode("utf-8")).hexdigest()[:20]
        return self.run_dir / "session_summaries" / f"{digest}.json"

    def summary_lock(self, session_text: str) -> threading.Lock:
        with self._summary_locks_guard:
            return self._summary_locks.setdefault(session_text, threading.Lock())

    def write_results(self, results: dict, scorer: str) -> Path:
        path = self.run_dir / RESULTS
        atomic_write_json(path, results)
        atomic_write_json(self.run_dir / f"results.{safe_name(scorer)}.json", results)
        return path
