"""The synthesis pipeline (§3, Appendix B): the resumable stages of synthesis/stages.py over
many personas. The output directory's layout is synthesis/outputs.py's; the tasks that fan out
from a persona's sessions (checklists, dialogues, instances) are synthesis/fan_out.py's.

Each artifact is written atomically as soon as it exists; a stage skips the work whose
artifact exists, and the response cache replays finished calls (also mid-dialogue), so a
rerun after a kill repeats no finished call. A persona whose generation stays invalid after
a bounded number of attempts fails with the reason and the last raw answer; the others go
on. Work runs on ``n_workers`` threads as a task graph (synthesis/scheduler.py): personas
progress independently, and each dialogue starts as soon as its session's checklist exists,
so one persona's dialogues run while another persona's sessions are still being written.

The file system refusing a write (disk full, read-only, permission denied) stops the run:
the output directory is checked writable before any call, a refused write in a worker
cancels the calls in flight and starts no new task, and ``run`` raises the StorageError
naming the file. Every artifact written before it is whole (written atomically), so a rerun
with room resumes there. A response cache that can no longer write (it keeps answers in
memory) has the output directory checked again: when that is refused too, the run stops
rather than pay for answers that cannot be kept.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from functools import partial
from typing import Any, Callable

from ..utils.models.batch import BatchDeferred, runner_for
from ..utils.models.cache import CACHE_DIR, ResponseCache
from ..utils.models.registry import check_models
from ..utils.models.retry import cancel_all, reset_cancel
from . import personas as persona_stage
from . import stages as stage_table
from .fan_out import FanOutStages
from .scheduler import Continue, CriticalPathFirst, Progress, TaskRunner, run_batched
from .options import (OptionsError, OptionsMismatch, SynthesisConfig, check_options,
                      stage_models)
from .outputs import (BATCHES_FILE, Failure, FailureLog, OutputDir, OutputDirInUse,
                      output_dir_lock)
from .summary import write_summary
from .taxonomy import load_taxonomy
from ..utils.models.reask import UnusableAnswer
from ..utils.models.call_errors import ModelCallFailed
from ..utils.io import StorageError, atomic_write_json, check_writable, read_json
from ..utils.models.reask import Answer
from ..utils.stop_signals import stop_cause

__all__ = ["OutputDirInUse", "OptionsError", "OptionsMismatch", "Synthesis", "SynthesisConfig",
           "run_synthesis"]

log = logging.getLogger(__name__)


# Dialogues in flight per worker (synthesis/scheduler.py): enough that they end the run
# together, few enough that personas keep being completed during a long run.
DIALOGUES_PER_WORKER = 4


class Synthesis(FanOutStages, OutputDir):
    def __init__(self, cfg: SynthesisConfig) -> None:
        cfg.check()
        self.cfg = cfg
        OutputDir.__init__(self, cfg.output_dir)  # checked writable by output_dir_lock
        self.taxonomy = load_taxonomy()
        self.cache = ResponseCache(self.out / CACHE_DIR)
        self._cache_refusal_checked = False
        self.models = models = stage_models(cfg, self.cache)
        # --batch: the synthesizer's calls go through its provider's batch API (the
        # simulators and the decomposer answer online: a dialogue's turns wait on each other).
        self.batch_runner = (runner_for(models["synthesizer"], self.out / BATCHES_FILE)
                             if cfg.batch else None)
        self._lock = threading.Lock()
        self.failure_log = FailureLog(self)
        self.stats: dict[str, Counter] = {}  # stage -> {"done": n, "skipped": n} (summary.py)
        self.seed_source: str | None = None
        self.personas: list[dict] = []
        self.waiting: Counter = Counter()  # tasks of this pass waiting for a batch round
        self._description_batches: dict[str, tuple[str, ...]] = {}  # persona id -> its batch
        # The most calls one task of each stage makes in sequence (synthesis/stages.py).
        self.priorities = CriticalPathFirst([(row.name, row.weight(cfg)) for row in stage_table.STAGES])

    def _count(self, stage: str, done: int = 0, skipped: int = 0) -> None:
        with self._lock:
            stats = self.stats.setdefault(stage, Counter(done=0, skipped=0))
            stats["done"] += done
            stats["skipped"] += skipped
        progress = getattr(self, "progress", None)
        if skipped and progress is not None:
            progress.found_done(stage, skipped)

    # =====================================================================================
    # Stage 1: persona templates
    # =====================================================================================
    def load_templates(self) -> int:
        """The templates on disk (the first ``n_personas``); returns how many are missing."""
        document = self.read_personas()
        self.seed_source = document["seed_source"]
        self.personas = document["personas"][: self.cfg.n_personas]
        self._count("templates", skipped=len(self.personas))
        return self.cfg.n_personas - len(self.personas)

    def task_templates(self) -> None:
        """Stage 1 for the missing personas. Only here are seeds read (and PersonaHub
        loaded); personas that already exist go on meanwhile."""
        seeds, source = persona_stage.load_seeds(self.cfg.persona_seeds)
        log.info("persona seeds: %s (%d descriptions)", source, len(seeds))
        with self._lock:
            document, new = persona_stage.add_templates(self.read_personas(), seeds, source,
                                                        self.cfg.n_personas, self.taxonomy, self.cfg.seed)
            self.write_personas(document)
            self.seed_source = document["seed_source"]
            self.personas.extend(new)
        self._count("templates", done=len(new))
        self.plan(new)

    # =====================================================================================
    # The task graph: each task does one unit of work, then submits what it unlocks.
    # Priorities: the critical path first (see synthesis/scheduler.py).
    # =====================================================================================
    def _submit(self, stage: str, fn: Callable, *args: Any) -> None:
        self.progress.add(stage)
        self.runner.submit(self.priorities.key(stage), self._tracked(stage, fn), *args, kind=stage)

    def _tracked(self, stage: str, fn: Callable) -> Callable:
        def task(*args: Any) -> Continue | None:
            rest = None
            try:
                rest = fn(*args)
            except BatchDeferred:  # answered by the next batch round: no failure, no attempt
                with self._lock:
                    self.waiting[stage] += 1
            finally:
                if rest is None:
                    self.progress.done(stage)
            self._check_cache_refusal()
            if rest is not None:
                return rest._replace(fn=self._tracked(stage, rest.fn))
            return None
        return task

    def _check_cache_refusal(self) -> None:
        """The cache stopped writing (it warned once): when the output directory refuses a
        write too (a full disk), stop now instead of asking calls whose answers are lost."""
        if self.cache.writable:
            return
        with self._lock:
            if self._cache_refusal_checked:
                return
            self._cache_refusal_checked = True
        check_writable(self.out)

    def _stop_on_refused_write(self, exc: BaseException) -> None:
        if isinstance(exc, StorageError):
            cancel_all()  # the calls in flight end now; their answers could not be kept

    def plan(self, personas: list[dict]) -> None:
        personas = [p for p in personas if not self.failure_log.has(p["persona_id"])]
        todo = [p for p in personas if not p.get("description")]
        self._count("descriptions", skipped=len(personas) - len(todo))
        for batch in persona_stage.description_batches(todo, self.cfg.persona_batch_size,
                                                       self._description_batches):
            self._submit("descriptions", self.task_describe, batch)
        for persona in personas:
            if persona.get("description"):
                self.after("descriptions", persona)

    def _generate(self, stage: str, persona_ids: list[str], generate: Callable[..., Answer]) -> Answer | None:
        """``generate``'s answer, continuing an earlier run's failed attempts at ``stage``;
        None when it failed (recorded for each of ``persona_ids``)."""
        first_variant, previous = self.failure_log.resume_point(persona_ids[0], stage)
        try:
            return generate(max_attempts=self.cfg.max_attempts, first_variant=first_variant, previous=previous)
        except (UnusableAnswer, ModelCallFailed) as exc:
            for pid in persona_ids:
                self.failure_log.record(Failure.of(pid, stage, exc, previous_raw=previous and previous[0]))
            return None

    # -- Stage 2: persona descriptions (Figure 13), in batches -----------------------------
    def task_describe(self, batch: list[dict]) -> None:
        generated = self._generate("descriptions", [p["persona_id"] for p in batch], lambda **attempts:
                                   persona_stage.describe_personas(self.models["synthesizer"], batch,
                                                                   self.taxonomy, **attempts))
        if generated is None:
            return
        with self._lock:
            persona_stage.record_descriptions(batch, generated)
            self.update_personas(self.personas)
        self._count("descriptions", done=len(batch))
        for persona in batch:
            self.after("descriptions", persona)

    # -- The table's hand-offs, and its persona stages (stages.py) --------------------------
    def has_artifact(self, name: str, persona: dict) -> bool:
        """Whether ``name``'s work for ``persona`` is on disk (what a stage waiting on it reads)."""
        if name == "descriptions":
            return bool(persona.get("description"))
        return self.artifact(persona["persona_id"], f"{name}.json").exists()

    def after(self, name: str, persona: dict) -> None:
        """``name`` is done for ``persona``: start each stage that reads it once all it reads is
        there. The dialogues and instances are started by the checklists as they come."""
        starters = {"checklists": self.after_sessions}
        for row in stage_table.waiting_on(name):
            start = (partial(self._submit, row.name, self.task_persona_stage, row) if row.persona_stage
                     else starters.get(row.name))
            if start is None or not all(self.has_artifact(i, persona) for i in row.inputs
                                        if stage_table.stage(i).persona_stage or i == "descriptions"):
                continue
            with self._lock:  # once a pass: a stage with two inputs hears of both
                if (row.name, persona["persona_id"]) in self._started:
                    continue
                self._started.add((row.name, persona["persona_id"]))
            start(persona)

    def task_persona_stage(self, row: stage_table.Stage, persona: dict) -> None:
        """A persona stage's artifact: skipped when it exists, else generated and written."""
        pid = persona["persona_id"]
        path = self.artifact(pid, f"{row.name}.json")
        if path.exists():
            self._count(row.name, skipped=1)
        else:
            hooks = row.hooks()
            inputs = {i: read_json(self.artifact(pid, f"{i}.json")) for i in row.inputs
                      if stage_table.stage(i).persona_stage}
            generated = self._generate(row.name, [pid], lambda **attempts: hooks.request(
                self.models[row.roles[0]], persona, inputs, self.cfg, self.taxonomy, **attempts))
            if generated is None:
                return
            atomic_write_json(path, {**hooks.document(generated, persona, inputs, self.cfg),
                                     "attempts": generated.attempts})
            self._count(row.name, done=1)
        self.after(row.name, persona)

    # =====================================================================================
    # The whole run
    # =====================================================================================
    def run(self) -> dict:
        started = time.perf_counter()
        reset_cancel()  # a stop of an earlier run in this process ends with it
        # Fail fast on a missing key, before any work; every missing key named in one message.
        check_models(list({id(m): m for m in self.models.values()}.values()), probe=False)
        check_options(self.out, self.cfg)
        self.templates_missing = missing = self.load_templates()
        if missing and self.cfg.persona_seeds not in (None, persona_stage.BUNDLED):
            persona_stage.read_seed_file(self.cfg.persona_seeds)  # a bad seed file is refused before any work
        self.failure_log.load_previous(self.personas)
        try:
            if self.batch_runner is not None:
                run_batched(self, self.batch_runner)
            else:
                self.run_pass()
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: what is done is summarized
            cancel_all()
            write_summary(self, time.perf_counter() - started, stopped=stop_cause(exc))
            exc.summary_written = True
            raise
        return write_summary(self, time.perf_counter() - started)

    def run_pass(self) -> None:
        """The task graph over what is on disk, until no task is left (batch mode runs
        several passes: scheduler.run_batched)."""
        self.waiting.clear()
        self._started: set[tuple[str, str]] = set()  # (stage, persona id) started in this pass
        self.runner = TaskRunner(self.cfg.n_workers,
                                 windows={"dialogues": DIALOGUES_PER_WORKER * self.cfg.n_workers},
                                 on_error=self._stop_on_refused_write)
        self.progress = Progress(stage_table.names(), self.cfg.show_progress)
        try:
            self.plan(list(self.personas))
            if self.templates_missing:  # made in the first pass (no model call)
                self.templates_missing = 0
                self._submit("templates", self.task_templates)
            self.runner.run()
        finally:
            self.progress.close()

    def close(self) -> None:
        self.cache.close()


def run_synthesis(cfg: SynthesisConfig) -> dict:
    """One run over ``cfg.output_dir``, holding its lock: OutputDirInUse, before any model
    is made, when another run holds it."""
    with output_dir_lock(cfg.output_dir):
        synthesis = Synthesis(cfg)
        try:
            return synthesis.run()
        finally:
            synthesis.close()
