"""The synthesis pipeline (§3, Appendix B): seven resumable stages over many personas.

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
    .llm_cache.sqlite                 every finished LLM call, replayed on a rerun

Each artifact is written atomically as soon as it exists; a stage skips the work whose
artifact exists, and the response cache replays finished calls (also mid-dialogue), so a
rerun after a kill repeats no finished call. A persona whose generation stays invalid after
a bounded number of attempts fails with the reason and the last raw answer; the others go
on. Work runs on ``n_workers`` threads as a task graph (synthesis/scheduler.py): personas
progress independently, and each dialogue starts as soon as its session's checklist exists,
so one persona's dialogues run while another persona's sessions are still being written.
"""
from __future__ import annotations

import logging
import random
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import config
from evaluation.data import make_instance_id
from evaluation.models.model import Model, ResponseCache, check_models, resolve_model
from synthesis import personas as persona_stage
from synthesis.dialogues import simulate_dialogue
from synthesis.factors import generate_factors
from synthesis.generation import GenerationFailed
from synthesis.instances import INSTANCE_TYPES, build_instances
from synthesis.journey import FINAL, MIN_SESSIONS, check_journey, make_journey
from synthesis.parameters import PERSONA_BATCH_SIZE, SEED, STAGE_PARAMS
from synthesis.scheduler import TaskRunner
from synthesis.sessions import generate_sessions
from synthesis.taxonomy import load_occupations, load_taxonomy
from utils.io import atomic_write_json, read_json

log = logging.getLogger(__name__)

# Settings that shape the data: a rerun into the same directory must use the same ones.
SHAPING_SETTINGS = ("model", "user_model", "assistant_model", "decomposer_model", "n_factors",
                    "n_sessions", "max_turns", "seed", "persona_batch_size")


@dataclass
class SynthesisConfig:
    output_dir: Path = Path("synthetic_data")
    # As in the release: --model writes personas, factors and sessions, decomposes the
    # checklists and simulates the user; the assistant simulator is a fixed model.
    model: str = "claude-3-5-sonnet-20241022"
    user_model: str | None = None            # None: the same as ``model``
    assistant_model: str = "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
    decomposer_model: str | None = None      # None: the same as ``model``
    n_personas: int = 4
    n_factors: int = 8
    n_sessions: int = 13
    max_turns: int = 16
    n_workers: int = 1
    seed: int = SEED
    persona_seeds: str | None = None       # None: PersonaHub; "bundled"; or a file
    persona_batch_size: int = PERSONA_BATCH_SIZE
    max_attempts: int = config.MAX_PARSE_RETRIES + 1  # answers per generation, first included
    show_progress: bool | None = None      # None: when stderr is a terminal

    def __post_init__(self) -> None:
        self.user_model = self.user_model or self.model
        self.decomposer_model = self.decomposer_model or self.model

    def check(self) -> None:
        if self.n_personas < 1:
            raise SettingsError("--n_personas must be at least 1")
        if self.n_factors < 3:
            raise SettingsError("--n_factors must be at least 3 (a contrastive pair and another factor)")
        if self.n_sessions < MIN_SESSIONS:
            raise SettingsError(f"--n_sessions must be at least {MIN_SESSIONS}")
        if self.max_turns < 1:
            raise SettingsError("--max_turns must be at least 1")
        if self.n_workers < 1 or self.persona_batch_size < 1 or self.max_attempts < 1:
            raise SettingsError("--n_workers, --persona_batch_size and attempts must be positive")


def model_label(spec: str) -> str:
    """A model spec without its ``@http://host:port/v1`` part: where a server runs does
    not shape the data (and a test server's port changes from run to run)."""
    name, sep, url = spec.rpartition("@")
    return name if sep and name and url.startswith(("http://", "https://")) else spec


def shaping_settings(cfg: "SynthesisConfig") -> dict:
    values = {k: getattr(cfg, k) for k in SHAPING_SETTINGS}
    for key in ("model", "user_model", "assistant_model", "decomposer_model"):
        values[key] = model_label(values[key])
    return values


# How the release's utils/generation.py sends an OpenAI model's request: single-turn calls
# (generate: personas, factors, sessions, decomposer) with the system prompt as a
# "developer" message, chats (generate_chat: the simulators) as a "system" message, both
# with max_completion_tokens. Other providers' adapters take no such options.
SINGLE_TURN = {"system_role": "developer", "max_tokens_field": "max_completion_tokens"}
CHAT = {"system_role": "system", "max_tokens_field": "max_completion_tokens"}


def resolve_stage_model(spec: str, openai_wire: dict, **params: Any) -> Model:
    model = resolve_model(spec, **params)
    if model.provider == "openai":  # OpenAI's own API, not a vLLM or other compatible server
        model = resolve_model(spec, **params, **openai_wire)
    return model


class SettingsError(ValueError):
    """Bad options, or options that differ from those the output directory was made with."""


class SettingsMismatch(SettingsError):
    pass


@dataclass
class Failure:
    persona_id: str
    stage: str
    reason: str
    attempts: int = 0
    last_raw_output: str | None = None
    next_variant: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class StageStats:
    done: int = 0        # artifacts produced in this invocation
    skipped: int = 0     # artifacts that already existed


STAGES = ("templates", "descriptions", "factors", "sessions", "checklists", "dialogues", "instances")


@dataclass
class PersonaState:
    """What a persona's checklist and dialogue tasks share once its sessions exist."""
    persona: dict
    preferences: list[str]                                   # distinct, in session order
    waiting: list[dict]                                      # sessions whose dialogue waits for a checklist
    dialogues_left: int
    checklists: dict[str, list[str]] = field(default_factory=dict)
    instances_submitted: bool = False


class Progress:
    """One progress bar per stage; totals grow as tasks are submitted."""

    def __init__(self, show: bool | None) -> None:
        import sys

        from tqdm.auto import tqdm

        show = sys.stderr.isatty() if show is None else show
        self._lock = threading.Lock()
        self.bars = {stage: tqdm(total=0, desc=f"{i}/7 {stage}", position=i - 1, disable=not show,
                                 dynamic_ncols=True, leave=True)
                     for i, stage in enumerate(STAGES, start=1)}

    def add(self, stage: str) -> None:
        with self._lock:
            bar = self.bars[stage]
            bar.total += 1
            bar.refresh()

    def done(self, stage: str) -> None:
        with self._lock:
            self.bars[stage].update(1)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


class Synthesis:
    def __init__(self, cfg: SynthesisConfig, *, models: dict[str, Model] | None = None,
                 hub_loader: Callable[[], list[str]] = persona_stage.load_hub_seeds) -> None:
        cfg.check()
        self.cfg = cfg
        self.out = Path(cfg.output_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.taxonomy = load_taxonomy()
        self.hub_loader = hub_loader
        self.cache: ResponseCache | None = None
        if models is None:
            self.cache = ResponseCache(self.out / ".llm_cache.sqlite")
            models = {
                # Each stage passes its own temperature and max_tokens (synthesis/parameters.py);
                # the decomposer step uses the model's, so they are set here.
                "synthesizer": resolve_stage_model(cfg.model, SINGLE_TURN, cache=self.cache),
                "user_simulator": resolve_stage_model(cfg.user_model, CHAT, cache=self.cache),
                "assistant_simulator": resolve_stage_model(cfg.assistant_model, CHAT,
                                                           cache=self.cache),
                "decomposer": resolve_stage_model(cfg.decomposer_model, SINGLE_TURN,
                                                  cache=self.cache,
                                                  **STAGE_PARAMS["preference_decomposer"]),
            }
        self.models = models
        self._lock = threading.Lock()
        self.failures: dict[str, Failure] = {}
        self.previous_failures: dict[str, Failure] = {}
        self.stats: dict[str, StageStats] = {}
        self.seed_source: str | None = None
        self.personas: list[dict] = []

    # -- paths ----------------------------------------------------------------------------
    def persona_dir(self, persona_id: str) -> Path:
        return self.out / "personas" / persona_id

    def artifact(self, persona_id: str, name: str) -> Path:
        return self.persona_dir(persona_id) / name

    def dialogue_path(self, persona_id: str, index: int) -> Path:
        return self.persona_dir(persona_id) / "dialogues" / f"{index:02d}.json"

    def instance_path(self, persona_id: str, instance_type: str) -> Path:
        return self.out / "instances" / f"{make_instance_id(persona_id, instance_type)}.json"

    # -- failures -------------------------------------------------------------------------
    def fail(self, failure: Failure) -> None:
        with self._lock:
            if failure.persona_id in self.failures:
                return  # the first failure of a persona is the one reported
            self.failures[failure.persona_id] = failure
        log.error("persona %s failed at %s: %s", failure.persona_id, failure.stage, failure.reason)
        atomic_write_json(self.artifact(failure.persona_id, "failure.json"), failure.to_dict())

    def failed(self, persona_id: str) -> bool:
        with self._lock:
            return persona_id in self.failures

    def resume_point(self, persona_id: str, stage: str) -> tuple[int, tuple[str, str] | None]:
        """Where a stage that failed in an earlier run continues: fresh attempts after the
        failed ones (replaying them from the cache would fail the same way)."""
        previous = self.previous_failures.get(persona_id)
        if previous is None or previous.stage != stage or previous.next_variant <= 0:
            return 0, None
        reason = re.sub(r"^invalid after \d+ attempts: ", "", previous.reason)
        last = (previous.last_raw_output, reason) if previous.last_raw_output else None
        return previous.next_variant, last

    def _load_previous_failures(self) -> None:
        # Kept on disk until the persona completes, or replaced by a new failure, so that a
        # kill during this run loses nothing.
        for persona in self.personas:
            path = self.artifact(persona["persona_id"], "failure.json")
            if path.exists():
                self.previous_failures[persona["persona_id"]] = Failure(**read_json(path))

    def _count(self, stage: str, done: int = 0, skipped: int = 0) -> None:
        with self._lock:
            stats = self.stats.setdefault(stage, StageStats())
            stats.done += done
            stats.skipped += skipped

    # -- settings ---------------------------------------------------------------------------
    def check_settings(self) -> None:
        path = self.out / "run.json"
        current = shaping_settings(self.cfg)
        if path.exists():
            previous = read_json(path).get("settings", {})
            different = {k: (previous.get(k), v) for k, v in current.items() if previous.get(k) != v}
            if different:
                details = "; ".join(f"{k}: {a!r} before, {b!r} now" for k, (a, b) in different.items())
                raise SettingsMismatch(
                    f"{self.out} holds data made with other settings ({details}). Use another "
                    f"--output_dir, or the same settings to continue it.")
        else:
            atomic_write_json(path, {"settings": current})

    # =====================================================================================
    # Stage 1: persona templates
    # =====================================================================================
    def load_templates(self) -> int:
        """The templates on disk (the first ``n_personas``); returns how many are missing."""
        path = self.out / "personas.json"
        document = read_json(path) if path.exists() else {"seed_source": None, "personas": []}
        self.seed_source = document["seed_source"]
        self.personas = document["personas"][: self.cfg.n_personas]
        self._count("templates", skipped=len(self.personas))
        return self.cfg.n_personas - len(self.personas)

    def task_templates(self) -> None:
        """Stage 1 for the missing personas. Only here are seeds read (and PersonaHub
        loaded); personas that already exist go on meanwhile."""
        seeds, source = persona_stage.load_seeds(self.cfg.persona_seeds, self.hub_loader)
        log.info("persona seeds: %s (%d descriptions)", source, len(seeds))
        path = self.out / "personas.json"
        with self._lock:
            document = read_json(path) if path.exists() else {"seed_source": None, "personas": []}
            existing = document["personas"]
            templates = persona_stage.make_templates(seeds, self.cfg.n_personas, load_occupations(),
                                                     self.taxonomy, self.cfg.seed, existing=existing)
            new = [dict(t, description=None, occupation=None) for t in templates[len(existing):]]
            sources = [s for s in (document.get("seed_source"), source) if s]
            document = {"seed_source": " + ".join(dict.fromkeys(sources)),
                        "personas": existing + new}
            atomic_write_json(path, document)
            self.seed_source = document["seed_source"]
            self.personas.extend(new)
        self._count("templates", done=len(new))
        self.plan(new)

    def _save_personas(self) -> None:
        path = self.out / "personas.json"
        with self._lock:
            document = read_json(path)
            by_id = {p["persona_id"]: p for p in self.personas}
            document["personas"] = [by_id.get(p["persona_id"], p) for p in document["personas"]]
            atomic_write_json(path, document)

    # =====================================================================================
    # The task graph: each task does one unit of work, then submits what it unlocks.
    # Priorities: the earliest stage first (see synthesis/scheduler.py).
    # =====================================================================================
    def _submit(self, stage: str, fn: Callable, *args: Any) -> None:
        self.progress.add(stage)
        self.runner.submit(STAGES.index(stage), self._tracked(stage, fn), *args)

    def _tracked(self, stage: str, fn: Callable) -> Callable:
        def task(*args: Any) -> None:
            try:
                fn(*args)
            finally:
                self.progress.done(stage)
        return task

    def plan(self, personas: list[dict]) -> None:
        todo = [p for p in personas if not p.get("description")]
        self._count("descriptions", skipped=len(personas) - len(todo))
        size = self.cfg.persona_batch_size
        for i in range(0, len(todo), size):
            self._submit("descriptions", self.task_describe, todo[i:i + size])
        for persona in personas:
            if persona.get("description"):
                self._submit("factors", self.task_factors, persona)

    # -- Stage 2: persona descriptions (Figure 13), in batches -----------------------------
    def task_describe(self, batch: list[dict]) -> None:
        first_variant, previous = self.resume_point(batch[0]["persona_id"], "descriptions")
        try:
            generated = persona_stage.describe_personas(
                self.models["synthesizer"], batch, self.taxonomy, max_attempts=self.cfg.max_attempts,
                first_variant=first_variant, previous=previous,
                params=STAGE_PARAMS["persona_generator"])
        except GenerationFailed as exc:
            for persona in batch:
                self.fail(Failure(persona["persona_id"], "descriptions", exc.reason, exc.attempts,
                                  exc.last_raw, exc.next_variant))
            return
        with self._lock:
            for persona, described in zip(batch, generated.value):
                persona["description"] = described["description"]
                persona["occupation"] = described["occupation"]
                persona["description_attempts"] = generated.attempts
                persona["description_batch"] = batch[0]["persona_id"]
        self._save_personas()
        self._count("descriptions", done=len(batch))
        for persona in batch:
            self._submit("factors", self.task_factors, persona)

    # -- Stage 3: context factors (Figure 17) ----------------------------------------------
    def task_factors(self, persona: dict) -> None:
        pid = persona["persona_id"]
        path = self.artifact(pid, "factors.json")
        if path.exists():
            self._count("factors", skipped=1)
        else:
            first_variant, previous = self.resume_point(pid, "factors")
            try:
                generated = generate_factors(self.models["synthesizer"], persona["description"],
                                             self.cfg.n_factors, self.taxonomy,
                                             max_attempts=self.cfg.max_attempts,
                                             first_variant=first_variant, previous=previous)
            except GenerationFailed as exc:
                self.fail(Failure(pid, "factors", exc.reason, exc.attempts, exc.last_raw,
                                  exc.next_variant))
                return
            atomic_write_json(path, {**generated.value, "attempts": generated.attempts})
            self._count("factors", done=1)
        self._submit("sessions", self.task_sessions, persona)

    # -- Stage 4: sessions (Figure 18) from the journey template ---------------------------
    def journey_for(self, persona_id: str, factors: list[dict]):
        rng = random.Random(f"{self.cfg.seed}:journey:{persona_id}")
        pair = (factors[-2]["context_factor"], factors[-1]["context_factor"])
        journey = make_journey(rng, self.cfg.n_sessions, pair)
        check_journey(journey)
        return journey

    def task_sessions(self, persona: dict) -> None:
        pid = persona["persona_id"]
        path = self.artifact(pid, "sessions.json")
        if path.exists():
            self._count("sessions", skipped=1)
        else:
            factors = read_json(self.artifact(pid, "factors.json"))["factors"]
            journey = self.journey_for(pid, factors)
            first_variant, previous = self.resume_point(pid, "sessions")
            try:
                generated = generate_sessions(self.models["synthesizer"], persona["description"],
                                              factors, journey, self.taxonomy,
                                              max_attempts=self.cfg.max_attempts,
                                              first_variant=first_variant, previous=previous)
            except GenerationFailed as exc:
                self.fail(Failure(pid, "sessions", exc.reason, exc.attempts, exc.last_raw,
                                  exc.next_variant))
                return
            atomic_write_json(path, {"journey": journey.to_dict(), **generated.value,
                                     "attempts": generated.attempts})
            self._count("sessions", done=1)
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
        from evaluation.steps import StepFailed, decompose_preference

        pid = state.persona["persona_id"]
        if self.failed(pid):
            return
        try:
            checklist = decompose_preference(self.models["decomposer"], preference)
        except StepFailed as exc:
            self.fail(Failure(pid, "checklists", f"decomposing {preference!r}: {exc.reason}",
                              exc.attempts, exc.raw[-1] if exc.raw else None))
            return
        if not checklist or not all(isinstance(q, str) and q.strip() for q in checklist):
            self.fail(Failure(pid, "checklists", f"empty checklist for {preference!r}", 1))
            return
        self.checklist_ready(state, preference, list(checklist))

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
    def task_dialogue(self, state: "PersonaState", session: dict, checklist: list[str]) -> None:
        persona = state.persona
        pid = persona["persona_id"]
        if self.failed(pid):
            return  # a sibling failed; spend nothing more on this persona
        # A dialogue that failed in an earlier run is simulated afresh (new variants).
        retry = self.dialogue_path(pid, session["index"]).with_suffix(".retry")
        first_variant = read_json(retry)["next_variant"] if retry.exists() else 0
        try:
            dialogue = simulate_dialogue(
                self.models["user_simulator"], self.models["assistant_simulator"],
                persona["description"], session, checklist, max_turns=self.cfg.max_turns,
                max_attempts=self.cfg.max_attempts, first_variant=first_variant)
        except GenerationFailed as exc:
            atomic_write_json(retry, {"next_variant": exc.next_variant, "reason": exc.reason})
            self.fail(Failure(pid, "dialogues", f"session {session['index']}: {exc.reason}",
                              exc.attempts, exc.last_raw, exc.next_variant))
            return
        atomic_write_json(self.dialogue_path(pid, session["index"]), dialogue)
        if retry.exists():
            retry.unlink()
        self._count("dialogues", done=1)
        with self._lock:
            state.dialogues_left -= 1
        self._maybe_instances(state)

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
        if self.failed(pid):
            return
        paths = [self.instance_path(pid, t) for t in INSTANCE_TYPES]
        if all(p.exists() for p in paths):
            self._count("instances", skipped=len(paths))
        else:
            sessions_doc = read_json(self.artifact(pid, "sessions.json"))
            checklists = read_json(self.artifact(pid, "checklists.json"))
            dialogues = {s["index"]: read_json(self.dialogue_path(pid, s["index"]))
                         for s in sessions_doc["sessions"] if s["role"] != FINAL}
            try:
                rows = build_instances(pid, sessions_doc, checklists, dialogues, self.cfg.seed,
                                       extra_metadata={
                                           "synthesizer": model_label(self.cfg.model),
                                           "user_simulator": model_label(self.cfg.user_model),
                                           "assistant_simulator": model_label(self.cfg.assistant_model)})
            except (ValueError, KeyError) as exc:
                self.fail(Failure(pid, "instances", f"{type(exc).__name__}: {exc}"))
                return
            for row, path in zip(rows, paths):
                atomic_write_json(path, row)
            self._count("instances", done=len(rows))
        failure_file = self.artifact(pid, "failure.json")
        if failure_file.exists():
            failure_file.unlink()  # an earlier run's failure, now overcome

    # =====================================================================================
    # The whole run
    # =====================================================================================
    def check_models(self) -> None:
        """Fail fast on a missing key or an unreachable server, before any work; every
        missing key is named in one message."""
        unique = {id(model): model for model in self.models.values()}
        check_models(list(unique.values()), probe=False)

    def run(self) -> dict:
        started = time.perf_counter()
        self.check_models()
        self.check_settings()
        missing = self.load_templates()
        if missing and self.cfg.persona_seeds not in (None, persona_stage.BUNDLED) \
                and not Path(self.cfg.persona_seeds).is_file():
            raise persona_stage.SeedSourceError(f"{self.cfg.persona_seeds}: no such persona seed file")
        self._load_previous_failures()
        self.runner = TaskRunner(self.cfg.n_workers)
        self.progress = Progress(self.cfg.show_progress)
        try:
            self.plan(list(self.personas))
            if missing:
                self._submit("templates", self.task_templates)
            self.runner.run()
        finally:
            self.progress.close()
        summary = self.summary(time.perf_counter() - started)
        atomic_write_json(self.out / "summary.json", summary)
        return summary

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()

    # -- summary ------------------------------------------------------------------------------
    def summary(self, wall_time: float) -> dict:
        counts = {"personas_requested": len(self.personas), "personas_complete": 0,
                  "personas_failed": len(self.failures), "sessions": 0, "dialogues": 0,
                  "dialogues_satisfied": 0, "instances": 0}
        regenerations = {"descriptions": 0, "factors": 0, "sessions": 0, "dialogues": 0}
        turns: list[int] = []
        batches_seen = set()
        for persona in self.personas:
            pid = persona["persona_id"]
            batch = persona.get("description_batch")
            if persona.get("description_attempts") and batch not in batches_seen:
                batches_seen.add(batch)
                regenerations["descriptions"] += persona["description_attempts"] - 1
            for stage in ("factors", "sessions"):
                path = self.artifact(pid, f"{stage}.json")
                if path.exists():
                    regenerations[stage] += read_json(path).get("attempts", 1) - 1
            sessions_path = self.artifact(pid, "sessions.json")
            if sessions_path.exists():
                counts["sessions"] += len(read_json(sessions_path)["sessions"])
            dialogue_dir = self.persona_dir(pid) / "dialogues"
            for path in sorted(dialogue_dir.glob("*.json")) if dialogue_dir.is_dir() else []:
                dialogue = read_json(path)
                counts["dialogues"] += 1
                counts["dialogues_satisfied"] += int(dialogue["satisfied"])
                regenerations["dialogues"] += dialogue.get("regenerations", 0)
                turns.append(dialogue["n_turns"])
            n_instances = sum(self.instance_path(pid, t).exists() for t in INSTANCE_TYPES)
            counts["instances"] += n_instances
            counts["personas_complete"] += int(n_instances == len(INSTANCE_TYPES)
                                               and pid not in self.failures)
        failed_attempts = sum(max(f.attempts - 1, 0) for f in self.failures.values())
        usage = {}
        for role, model in self.models.items():
            snapshot = model.usage.snapshot(model.name) if hasattr(model, "usage") else {}
            usage[role] = {"model": model.name, **snapshot}
        return {
            "output_dir": str(self.out),
            "seed_source": self.seed_source,
            "settings": {**shaping_settings(self.cfg), "n_personas": self.cfg.n_personas,
                         "n_workers": self.cfg.n_workers},
            "counts": counts,
            "mean_dialogue_turns": round(sum(turns) / len(turns), 2) if turns else None,
            "regenerations": {**regenerations, "in_failed_generations": failed_attempts,
                              "total": sum(regenerations.values()) + failed_attempts},
            "stages": {name: asdict(s) for name, s in self.stats.items()},
            "failures": [f.to_dict() for f in self.failures.values()],
            "usage": usage,
            "wall_time_s": round(wall_time, 3),
        }


def run_synthesis(cfg: SynthesisConfig, **kwargs: Any) -> dict:
    synthesis = Synthesis(cfg, **kwargs)
    try:
        return synthesis.run()
    finally:
        synthesis.close()
