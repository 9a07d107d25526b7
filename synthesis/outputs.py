"""A synthesis output directory: where each artifact lives, and the personas' failures.

Layout of an output directory::

    run.json                          the settings that shape the data (a rerun must match)
    personas.json                     templates (stage 1) and descriptions (stage 2)
    personas/<persona_id>/factors.json        stage 3
    personas/<persona_id>/sessions.json       stage 4 (with the journey template)
    personas/<persona_id>/checklists.json     stage 5 (preference -> checklist)
    personas/<persona_id>/dialogues/<i>.json  stage 6, one per session but the last
    personas/<persona_id>/failure.json        why the persona failed (removed on success)
    instances/<instance_id>.json      stage 7, the evaluation's data format
    summary.json                      counts, regenerations, failures, usage
    batches.json                      --batch: every submitted batch id (a rerun resumes them)
    .synthesis.lock                   held by the run writing here (its pid, host, start)
    .llm_cache/<host>-<pid>-<start>.jsonl  every finished LLM call (one file per process), replayed on a rerun
"""
from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from ..utils.dataset import make_instance_id
from ..utils.models.call_errors import ModelCallFailed
from ..utils.io import FileLock, StorageError, atomic_write_json, check_writable, read_json
from ..utils.errors import SetupError

log = logging.getLogger("synthesis.pipeline")

BATCHES_FILE = "batches.json"
RUN_LOCK = ".synthesis.lock"


class OutputDirInUse(SetupError):
    """Another run (``command``) holds the output directory's lock. Two runs on one directory
    would pay for the same calls twice and overwrite each other's files (a persona's
    description from one run, its factors made from the other's), so the second stops
    before it makes any model. ``holder``: what the lock file says of the run holding it
    (pid, host, started), empty when it has not written it yet."""

    def __init__(self, output_dir: str | Path, holder: dict, command: str = "synthesis") -> None:
        self.output_dir, self.holder, self.command = Path(output_dir), holder, command
        super().__init__(str(self))

    def __str__(self) -> str:
        pid, host, started = (self.holder.get(k) for k in ("pid", "host", "started"))
        who = (f"pid {pid}" + (f" on {host}" if host else "") + (f", started {started}" if started else "")
               if pid else "its pid is not recorded yet")
        return (f"{self.output_dir} is in use by another {self.command} run ({who}): nothing was asked; wait "
                f"for it to end (then rerun to resume), or give another --output_dir")


def read_holder(lock_path: Path) -> dict:
    """The holder note of a lock file; empty when absent, unreadable or half written."""
    try:
        note = json.loads(lock_path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return note if isinstance(note, dict) else {}


@contextmanager
def output_dir_lock(output_dir: str | Path, lock_name: str = RUN_LOCK, command: str = "synthesis") -> Iterator[None]:
    """Hold the output directory for one run, or raise OutputDirInUse at once. The lock
    is an ``flock``: the kernel frees it when the holder exits or is killed, so a crashed
    run never blocks the next. The holder writes its pid, host and start time into the
    lock file (in place: a rename would put a new, unlocked file there) for the message of
    a run it refuses. Raises StorageError when the directory cannot be written."""
    output_dir = Path(output_dir)
    check_writable(output_dir)
    lock = FileLock(output_dir / lock_name)
    if not lock.acquire(blocking=False):
        raise OutputDirInUse(output_dir, read_holder(lock.path), command)
    try:
        note = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                           "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})
        try:
            with open(lock.path, "r+", encoding="utf-8") as handle:  # another open file: the flock stays
                handle.truncate(0)
                handle.write(note + "\n")
        except OSError as exc:  # the lock holds without the note; a refused run says "not recorded"
            log.warning("%s: cannot record this run's pid in the lock file (%s)", lock.path, exc)
        yield
    finally:
        lock.release()


def remove(path: Path) -> None:
    """Delete a file that is no longer true (absent is fine); a refusal names it."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise StorageError(path, "remove", exc) from exc


class OutputDir:
    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)

    def persona_dir(self, persona_id: str) -> Path:
        return self.out / "personas" / persona_id

    def artifact(self, persona_id: str, name: str) -> Path:
        return self.persona_dir(persona_id) / name

    def dialogue_path(self, persona_id: str, index: int) -> Path:
        return self.persona_dir(persona_id) / "dialogues" / f"{index:02d}.json"

    def instance_path(self, persona_id: str, instance_type: str) -> Path:
        return self.out / "instances" / f"{make_instance_id(persona_id, instance_type)}.json"

    def dialogue_first_variant(self, persona_id: str, index: int) -> int:
        """Where a dialogue's attempts start: after those of an earlier run that failed (so
        it is simulated afresh, not replayed from the cache), else 0."""
        retry = self.dialogue_path(persona_id, index).with_suffix(".retry")
        return read_json(retry)["next_variant"] if retry.exists() else 0

    def dialogue_failed(self, persona_id: str, index: int, next_variant: int, reason: str) -> None:
        atomic_write_json(self.dialogue_path(persona_id, index).with_suffix(".retry"),
                          {"next_variant": next_variant, "reason": reason})

    def write_dialogue(self, persona_id: str, index: int, dialogue: dict) -> None:
        atomic_write_json(self.dialogue_path(persona_id, index), dialogue)
        remove(self.dialogue_path(persona_id, index).with_suffix(".retry"))

    def read_personas(self) -> dict:
        """personas.json: ``{"seed_source", "personas": [template + description, ...]}``."""
        path = self.out / "personas.json"
        return read_json(path) if path.exists() else {"seed_source": None, "personas": []}

    def write_personas(self, document: dict) -> None:
        atomic_write_json(self.out / "personas.json", document)

    def update_personas(self, personas: list[dict]) -> None:
        """Rewrite personas.json with these personas' current state (matched by id)."""
        document = self.read_personas()
        by_id = {p["persona_id"]: p for p in personas}
        document["personas"] = [by_id.get(p["persona_id"], p) for p in document["personas"]]
        self.write_personas(document)


@dataclass
class Failure:
    persona_id: str
    stage: str
    reason: str
    attempts: int = 0
    last_raw_output: str | None = None
    next_variant: int = 0

    @classmethod
    def of(cls, persona_id: str, stage: str, exc: Exception, *, prefix: str = "",
           previous_raw: str | None = None) -> "Failure":
        """The failure that ``exc`` ends a stage with: the re-ask loop's UnusableAnswer, or
        the model layer's ModelCallFailed (both carry the answers received so far)."""
        answer = getattr(exc, "answer", None)
        raws = (answer.raws if answer else []) or ([previous_raw] if previous_raw else [])
        reason = f"model call failed: {exc}" if isinstance(exc, ModelCallFailed) else exc.reason
        return cls(persona_id, stage, prefix + reason, len(answer.raws) if answer else 0,
                   raws[-1] if raws else None, answer.next_variant if answer else 0)


class FailureLog:
    """This run's failures (the first of each persona) and the previous run's, from which a
    failed stage continues. A persona's failure.json stays on disk until the persona
    completes, or is replaced by a new failure, so that a kill during this run loses nothing."""

    def __init__(self, outputs: OutputDir) -> None:
        self.outputs = outputs
        self._lock = threading.Lock()
        self.failures: dict[str, Failure] = {}
        self.previous: dict[str, Failure] = {}

    def record(self, failure: Failure) -> None:
        with self._lock:
            if failure.persona_id in self.failures:
                return  # the first failure of a persona is the one reported
            self.failures[failure.persona_id] = failure
        log.error("persona %s failed at %s: %s", failure.persona_id, failure.stage, failure.reason)
        atomic_write_json(self.outputs.artifact(failure.persona_id, "failure.json"), asdict(failure))

    def overcome(self, persona_id: str) -> None:
        """The persona completed: an earlier run's failure.json goes."""
        remove(self.outputs.artifact(persona_id, "failure.json"))

    def has(self, persona_id: str) -> bool:
        with self._lock:
            return persona_id in self.failures

    def resume_point(self, persona_id: str, stage: str) -> tuple[int, tuple[str, str] | None]:
        """Where a stage that failed in an earlier run continues: fresh attempts after the
        failed ones (replaying them from the cache would fail the same way)."""
        previous = self.previous.get(persona_id)
        if previous is None or previous.stage != stage or previous.next_variant <= 0:
            return 0, None
        reason = re.sub(r"^invalid after \d+ attempts: ", "", previous.reason)
        last = (previous.last_raw_output, reason) if previous.last_raw_output else None
        return previous.next_variant, last

    def load_previous(self, personas: list[dict]) -> None:
        for persona in personas:
            path = self.outputs.artifact(persona["persona_id"], "failure.json")
            if path.exists():
                self.previous[persona["persona_id"]] = Failure(**read_json(path))
