"""The synthesis pipeline (§3, Appendix B): seven resumable stages over many personas.

The output directory's layout is synthesis/outputs.py's.

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
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Generator

from cupid.utils.models.batch import BatchDeferred, runner_for
from cupid.utils.models.cache import CACHE_DIR, ResponseCache
from cupid.utils.models.registry import check_models
from cupid.utils.models.retry import cancel_all, reset_cancel
from cupid.synthesis import personas as persona_stage
from cupid.synthesis.dialogues import dialogue_steps
from cupid.synthesis.factors import generate_factors
from cupid.synthesis.instances import INSTANCE_TYPES, persona_instances
from cupid.synthesis.journey import FINAL, persona_journey
from cupid.synthesis.scheduler import Continue, CriticalPathFirst, Progress, TaskRunner, run_batched
from cupid.synthesis.sessions import generate_sessions
from cupid.synthesis.settings import (SettingsError, SettingsMismatch, SynthesisConfig, check_settings,
                                model_label, stage_models)
from cupid.synthesis.outputs import (BATCHES_FILE, Failure, FailureLog, OutputDir, OutputDirInUse,
                               output_dir_lock)
from cupid.synthesis.summary import write_summary
from cupid.synthesis.taxonomy import load_taxonomy
from cupid.evaluation.steps import decompose
from cupid.utils.models.asking import UnusableAnswer
from cupid.utils.models.errors import ModelCallFailed
from cupid.utils.io import StorageError, atomic_write_json, check_writable, read_json
from cupid.utils.models.asking import Answer
from cupid.utils.stop_signals import stop_cause

__all__ = ["OutputDirInUse", "SettingsError", "SettingsMismatch", "Synthesis", "SynthesisConfig",
           "run_synthesis"]

log = logging.getLogger(__name__)


STAGES = ("templates", "descriptions", "factors", "sessions", "checklists", "dialogues", "instances")
# Dialogues in flight per worker (synthesis/scheduler.py): enough that they end the run
# together, few enough that personas keep being completed during a long run.
DIALOGUES_PER_WORKER = 4


@dataclass
class PersonaState:
    """What a persona's checklist and dialogue tasks share once its sessions exist."""
    persona: dict
    preferences: list[str]                                   # distinct, in session order
    waiting: list[dict]                                      # sessions whose dialogue waits for a checklist
    dialogues_left: int
    checklists: dict[str, list[str]] = field(default_factory=dict)
    instances_submitted: bool = False


class Synthesis(OutputDir):
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
        # The most calls one task of each stage makes in sequence (a dialogue: max_turns
        # assistant replies and max_turns - 1 user-simulator messages).
        self.priorities = CriticalPathFirst(list(zip(STAGES, (0, 1, 1, 1, 1, 2 * cfg.max_turns - 1, 0))))

    def _count(self, stage: str, done: int = 0, skipped: int = 0) -> None:
        with self._lock:
            stats = self.stats.setdefault(stage, Counter(done=0, skipped=0))
            stats["done"] += done
            stats["skipped"] += skipped

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
                self._submit("factors", self.task_factors, persona)

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
            self._submit("factors", self.task_factors, persona)

    # -- Stages 3 and 4 write one artifact each: generate, or skip what exists ------------
    def _generate_artifact(self, persona: dict, stage: str, generate: Callable[..., Answer],
                           document: Callable[[Answer], dict]) -> bool:
        """Stage ``stage``'s artifact of a persona: skipped when it exists, else generated
        and written. False when it failed."""
        path = self.artifact(persona["persona_id"], f"{stage}.json")
        if path.exists():
            self._count(stage, skipped=1)
            return True
        generated = self._generate(stage, [persona["persona_id"]], generate)
        if generated is None:
            return False
        atomic_write_json(path, {**document(generated), "attempts": generated.attempts})
        self._count(stage, done=1)
        return True

    # -- Stage 3: context factors (Figure 17) ----------------------------------------------
    def task_factors(self, persona: dict) -> None:
        def generate(**attempts: Any) -> Answer:
            return generate_factors(self.models["synthesizer"], persona["description"],
                                    self.cfg.n_factors, self.taxonomy, **attempts)
        if self._generate_artifact(persona, "factors", generate, lambda g: g.value):
            self._submit("sessions", self.task_sessions, persona)

    # -- Stage 4: sessions (Figure 18) from the journey template ---------------------------
    def task_sessions(self, persona: dict) -> None:
        pid = persona["persona_id"]
        journey = None

        def generate(**attempts: Any) -> Answer:
            nonlocal journey
            factors = read_json(self.artifact(pid, "factors.json"))["factors"]
            journey = persona_journey(self.cfg.seed, pid, self.cfg.n_sessions, factors)
            return generate_sessions(self.models["synthesizer"], persona["description"], factors,
                                     journey, self.taxonomy, **attempts)
        if self._generate_artifact(persona, "sessions", generate,
                                   lambda g: {"journey": asdict(journey), **g.value}):
            self.after_sessions(persona)

    # -- Stage 5: a checklist per distinct session preference ------------------------------
    def after_sessions(self, persona: dict) -> None:
        pid = persona["persona_id"]
        sessions = read_json(self.artifact(pid, "sessions.json"))["sessions"]
        preferences = list(dict.fromkeys(s["contextual_preference"] for s in sessions))
        prior = [s for s in sessions if s["role"] != FINAL]  # the final session is only its request
        missing = [s for s in prior if not self.dialogue_path(pid, s["index"]).exists()]
        self._count("dialogues", skipped=len(prior) - len(missing))
        state = PersonaState(persona=persona, preferences=preferences, waiting=missing,
                             dialogues_left=len(missing))
        path = self.artifact(pid, "checklists.json")
        if path.exists():
            self._count("checklists", skipped=1)
            for preference, checklist in read_json(path).items():
                self.checklist_ready(state, preference, checklist)
        else:
            for preference in preferences:
                self._submit("checklists", self.task_checklist, state, preference)

    def task_checklist(self, state: "PersonaState", preference: str) -> None:
        pid = state.persona["persona_id"]
        if self.failure_log.has(pid):
            return
        try:
            checklist = decompose.checklist(self.models["decomposer"], preference)
        except (UnusableAnswer, ModelCallFailed) as exc:
            failure = Failure.of(pid, "checklists", exc, prefix=f"decomposing {preference!r}: ")
            failure.next_variant = 0
            self.failure_log.record(failure)
            return
        self.checklist_ready(state, preference, checklist)  # decompose.parse: entries of text, one or more

    def checklist_ready(self, state: "PersonaState", preference: str, checklist: list[str]) -> None:
        """Record a checklist and start the dialogues that were waiting for it."""
        pid = state.persona["persona_id"]
        with self._lock:
            state.checklists[preference] = checklist
            complete = len(state.checklists) == len(state.preferences)
            ready = [s for s in state.waiting if s["contextual_preference"] == preference]
            state.waiting = [s for s in state.waiting if s["contextual_preference"] != preference]
        if complete and not self.artifact(pid, "checklists.json").exists():
            atomic_write_json(self.artifact(pid, "checklists.json"),
                              {p: state.checklists[p] for p in state.preferences})
            self._count("checklists", done=1)
        for session in ready:
            self._submit("dialogues", self.task_dialogue, state, session, checklist)
        self._maybe_instances(state)

    # -- Stage 6: dialogues, each as soon as its checklist exists --------------------------
    def task_dialogue(self, state: "PersonaState", session: dict, checklist: list[str]) -> Continue | None:
        persona = state.persona
        pid = persona["persona_id"]
        if self.failure_log.has(pid):
            return None  # a sibling failed; spend nothing more on this persona
        steps = dialogue_steps(
            self.models["user_simulator"], self.models["assistant_simulator"],
            persona["description"], session, checklist, max_turns=self.cfg.max_turns,
            max_attempts=self.cfg.max_attempts, first_variant=self.dialogue_first_variant(pid, session["index"]))
        return self._dialogue_step(state, session, steps, 0)

    def _dialogue_step(self, state: "PersonaState", session: dict, steps: Generator[None, None, dict],
                       calls_made: int) -> Continue | None:
        """One call of a dialogue; the rest waits in the queue as a new task."""
        pid = state.persona["persona_id"]
        try:
            next(steps)
        except StopIteration as finished:
            dialogue = finished.value
        except (UnusableAnswer, ModelCallFailed) as exc:
            failure = Failure.of(pid, "dialogues", exc, prefix=f"session {session['index']}: ")
            self.dialogue_failed(pid, session["index"], failure.next_variant,
                                 failure.reason.removeprefix(f"session {session['index']}: "))
            self.failure_log.record(failure)
            return None
        else:
            return Continue(self.priorities.key("dialogues", calls_made + 1), self._dialogue_step,
                            (state, session, steps, calls_made + 1))
        self.write_dialogue(pid, session["index"], dialogue)
        self._count("dialogues", done=1)
        with self._lock:
            state.dialogues_left -= 1
        self._maybe_instances(state)
        return None

    def _maybe_instances(self, state: "PersonaState") -> None:
        with self._lock:
            ready = (state.dialogues_left == 0 and len(state.checklists) == len(state.preferences)
                     and not state.instances_submitted)
            state.instances_submitted |= ready
        if ready:
            self._submit("instances", self.task_instances, state.persona)

    # -- Stage 7: instances ----------------------------------------------------------------
    def task_instances(self, persona: dict) -> None:
        pid = persona["persona_id"]
        if self.failure_log.has(pid):
            return
        paths = [self.instance_path(pid, t) for t in INSTANCE_TYPES]
        if all(p.exists() for p in paths):
            self._count("instances", skipped=len(paths))
        else:
            try:
                rows = persona_instances(self, pid, self.cfg.seed, {
                    # The profile the user simulator played (Figure 19), which --task
                    # interaction gives its simulator in turn.
                    "persona_description": persona["description"],
                    "synthesizer": model_label(self.cfg.model),
                    "user_simulator": model_label(self.cfg.user_model),
                    "assistant_simulator": model_label(self.cfg.assistant_model)})
            except (ValueError, KeyError) as exc:
                self.failure_log.record(Failure(pid, "instances", f"{type(exc).__name__}: {exc}"))
                return
            for row, path in zip(rows, paths):
                atomic_write_json(path, row)
            self._count("instances", done=len(rows))
        self.failure_log.overcome(pid)

    # =====================================================================================
    # The whole run
    # =====================================================================================
    def run(self) -> dict:
        started = time.perf_counter()
        reset_cancel()  # a stop of an earlier run in this process ends with it
        # Fail fast on a missing key, before any work; every missing key named in one message.
        check_models(list({id(m): m for m in self.models.values()}.values()), probe=False)
        check_settings(self.out, self.cfg)
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
        self.runner = TaskRunner(self.cfg.n_workers,
                                 windows={"dialogues": DIALOGUES_PER_WORKER * self.cfg.n_workers},
                                 on_error=self._stop_on_refused_write)
        self.progress = Progress(STAGES, self.cfg.show_progress)
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
