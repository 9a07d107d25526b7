"""The stages that fan out from a persona's sessions and in again (synthesis/stages.py's
checklists, dialogues and instances): a checklist per distinct session preference, a dialogue
per session as soon as its checklist exists, three instances once every dialogue is written.
A mixin of the pipeline's ``Synthesis``, whose task graph (``_submit``), failure log and
counters these tasks use."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generator

from ..evaluation.steps import decompose
from .dialogues import dialogue_steps
from .instances import INSTANCE_TYPES, persona_instances
from .journey import FINAL
from .outputs import Failure
from .scheduler import Continue
from .options import model_label
from ..utils.io import atomic_write_json, read_json
from ..utils.models.reask import UnusableAnswer
from ..utils.models.call_errors import ModelCallFailed


@dataclass
class PersonaState:
    """What a persona's checklist and dialogue tasks share once its sessions exist."""
    persona: dict
    preferences: list[str]                                   # distinct, in session order
    waiting: list[dict]                                      # sessions whose dialogue waits for a checklist
    dialogues_left: int
    checklists: dict[str, list[str]] = field(default_factory=dict)
    instances_submitted: bool = False


class FanOutStages:
    """The checklist, dialogue and instance tasks of ``Synthesis`` (pipeline.py)."""

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
