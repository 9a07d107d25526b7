"""The interactive task (``--task interaction``): how many rounds of feedback the benchmark's
user simulator still gives the evaluated model before it is satisfied.

Per instance, one dialogue:

* round 1: the evaluated model answers the generation task's request, byte for byte (the
  release's ``response_generator`` prompt with what the context strategy shows, or the
  oracle-preference prompt), at the evaluated model's parameters;
* the user simulator (evaluation/steps/user_simulator.py, the release's Figure 19 verbatim,
  at its parameters) is given the instance's current context factor, preference and checklist
  and a persona description; it scores the reply 1-10, says CONTINUE or END and writes its
  indirect feedback;
* the model answers that feedback in the same chat (its system prompt, the first request, its
  replies and the feedback so far), and so on, up to ``max_rounds`` replies, each scored.

A dialogue is *satisfied* at the round whose reply the simulator ended the dialogue on (END),
and *unsatisfied* when its ``max_rounds``-th reply was scored without END.

Each dialogue is a JSON file (``interaction_<simulator>_r<max_rounds>/<instance>.json`` in the
setting's run directory), rewritten atomically after every reply and every simulator answer,
so that a rerun after a kill -9 resumes at the call that was in flight and never repeats a
finished round. A call that failed for good, or a simulator answer still unparseable after the
release's three tries, marks the dialogue failed (with its reason and raw answers): counted,
never scored; the next invocation asks that call afresh (new variants, past the cached ones)
and goes on from there. One invocation (the dialogues, results.json) is interaction_run.py;
the measures are in report/interaction_measures.py.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from .. import config
from .strategies import Shown, Strategy
from .steps import generate, judge, user_simulator
from .steps.ask import Ask
from .store import instance_file_name, now, run_dir_for
from ..utils.answers import ParseError
from ..utils import events
from ..utils.dataset import Instance, safe_name
from ..utils.errors import SetupError
from ..utils.io import FileLock, StorageError, atomic_write_json, move_aside, read_json
from ..utils.models.reask import Answer, UnusableAnswer, ask_until_usable
from ..utils.models.batch import BatchDeferred
from ..utils.models.call_errors import ModelCallFailed, RunCancelled
from ..utils.models.model import Model
from ..utils.models.retry import CANCEL
from ..utils.redact import redact

log = logging.getLogger("cupid.evaluation")

# The simulator's prompt opens with the persona's profile. Data that carries none (the hub's
# rows have no persona description) gets this stand-in: a departure from the release, whose
# simulator always played a described persona (docs/interaction.md).
NEUTRAL_PERSONA = ("A person who uses a conversational AI assistant for everyday tasks and "
                   "wants each request completed well.")
LOCKS = ".locks"
FINISHED = ("satisfied", "unsatisfied")


def persona_description(instance: Instance) -> tuple[str, str]:
    """(description, where it came from): the data's own (a top-level ``persona_description``
    column, or ``metadata.persona_description`` / ``metadata.persona.description``), else the
    neutral stand-in."""
    extra = instance.extra or {}
    metadata = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
    persona = metadata.get("persona") if isinstance(metadata.get("persona"), dict) else {}
    for where, value in (("persona_description", extra.get("persona_description")),
                         ("metadata.persona_description", metadata.get("persona_description")),
                         ("metadata.persona.description", persona.get("description"))):
        if isinstance(value, str) and value.strip():
            return value, where
    return NEUTRAL_PERSONA, "stand-in"


def first_ask(instance: Instance, setting: Strategy, shown: Shown | None = None) -> Ask:
    """Round 1's request: the generation task's, as the pipeline builds it (``shown``: what the
    strategy shows, when already taken)."""
    if setting.preference_given:
        return generate.ask_given_preference(instance.current_contextual_preference, instance.current_request)
    return generate.ask((shown or setting.shown(instance)).text, instance.current_request)


def interaction_dir(results_dir: str | Path, model_label: str, setting: str, simulator_label: str,
                    max_rounds: int) -> Path:
    """Where a setting's dialogues go, beside its other results (run_dir_for)."""
    return run_dir_for(results_dir, model_label, setting) / f"interaction_{safe_name(simulator_label)}_r{max_rounds}"


@dataclass
class DialogueOutcome:
    instance_id: str
    status: str                   # satisfied, unsatisfied, failed, skipped, busy
    already_done: bool = False
    reason: str | None = None


@dataclass
class Interaction:
    """One invocation of the interactive task over one setting's dialogues."""
    model: Model
    simulator: Model
    setting: Strategy
    max_rounds: int
    directory: Path
    judge_model: Model | None = None  # --judge_final: the evaluator, judging each finished dialogue's last reply

    # -- one dialogue -----------------------------------------------------------------------
    def path(self, instance: Instance) -> Path:
        return self.directory / instance_file_name(instance.instance_id)

    def run(self, instance: Instance) -> DialogueOutcome:
        lock = FileLock(self.directory / LOCKS / f"{instance_file_name(instance.instance_id)}.lock")
        if not lock.acquire(blocking=False):
            return DialogueOutcome(instance.instance_id, "busy")
        try:
            return self._run(instance)
        except (SetupError, RunCancelled, StorageError, BatchDeferred):
            raise
        except Exception as exc:  # unexpected: recorded as the dialogue's failure, never lost
            if CANCEL.is_set():
                raise RunCancelled(f"{instance.instance_id}: the run is stopping") from exc
            log.exception("%s: unexpected error", instance.instance_id)
            path = self.path(instance)
            record = self._read(path) or self._new_record(instance)
            if not isinstance(record.get("rounds"), list):
                record = self._new_record(instance)
            return self._failed(path, record, "internal", len(record["rounds"]) + 1,
                                redact(f"{type(exc).__name__}: {exc}"), Answer())
        finally:
            lock.release()

    def _read(self, path: Path) -> dict | None:
        """The dialogue file, or None when there is none; one that is not a JSON object is
        moved aside (kept for inspection) and the dialogue begun afresh."""
        if not path.exists():
            return None
        try:
            record = read_json(path)
        except ValueError as exc:
            record, reason = None, str(exc)
        else:
            reason = None if isinstance(record, dict) else "not a JSON object"
        if reason is not None:
            target = move_aside(path)
            events.warning(f"{path}: {reason}; moved to {target.name}, the dialogue is begun afresh")
            return None
        return record

    def _new_record(self, instance: Instance) -> dict:
        description, source = persona_description(instance)
        return {"instance_id": instance.instance_id, "persona_id": instance.persona_id,
                "instance_type": instance.instance_type, "fingerprint": instance.fingerprint(),
                "model": self.model.label, "simulator": self.simulator.label,
                "setting": self.setting.name, "max_rounds": self.max_rounds,
                "persona_description": description, "persona_source": source,
                # What the simulator holds, beside the dialogue for a reader (report's page).
                "current_request": instance.current_request,
                "current_context_factor": instance.current_context_factor,
                "current_contextual_preference": instance.current_contextual_preference,
                "current_checklist": list(instance.current_checklist),
                "status": "running", "rounds": [], "failures": [], "started_at": now()}

    def _run(self, instance: Instance) -> DialogueOutcome:
        path = self.path(instance)
        record = self._read(path)
        if record is not None and record.get("fingerprint") != instance.fingerprint():
            raise SetupError(f"{path} holds a dialogue of other content for instance {instance.instance_id}; "
                             f"use another --results_dir, or move the file away to evaluate it afresh")
        if record is not None and record.get("status") in FINISHED and damaged(record):
            events.warning(f"{path}: {damaged(record)}; asked again from there")
            heal(record)
        if record is not None and record.get("status") in (*FINISHED, "skipped"):
            if record["status"] in FINISHED and self._needs_judge(record):
                self._judge_final(path, record, instance)
            return DialogueOutcome(instance.instance_id, record["status"], already_done=True)
        if record is not None and damaged(record):
            events.warning(f"{path}: {damaged(record)}; asked again from there")
            heal(record)
        if record is None:
            record = self._new_record(instance)
        skip = self.setting.skip_reason(instance)
        if skip:
            record.update(status="skipped", skipped=skip)
            atomic_write_json(path, record)
            return DialogueOutcome(instance.instance_id, "skipped", reason=skip)
        first_variant = 0
        if record["status"] == "failed":  # asked afresh from the call that failed, past its variants
            first_variant = record["failure"].get("next_variant", 0)
            record.setdefault("failures", []).append(record.pop("failure"))
            record["status"] = "running"
        try:
            shown = None if self.setting.preference_given else self.setting.shown(instance)
        except Exception as exc:  # the strategy's own code (a user's) raised
            return self._failed(path, record, "context", 1, redact(f"{type(exc).__name__}: {exc}"), Answer())
        ask = first_ask(instance, self.setting, shown)
        if shown is not None:  # the 1-based positions of the sessions shown (None: a rendered text)
            record["shown_positions"] = None if shown.positions is None else list(shown.positions)
        system, user_prompt = ask.render()
        model_chat = [{"role": "user", "content": user_prompt}]
        sim_system = user_simulator.system_prompt(record["persona_description"], instance.current_context_factor,
                                                  instance.current_contextual_preference, instance.current_checklist)
        sim_chat = [{"role": "assistant", "content": user_simulator.opening_turn(instance.current_request.strip())}]
        for turn in record["rounds"]:  # the chats so far, rebuilt from the file
            model_chat.append({"role": "assistant", "content": turn["reply"]})
            sim_chat.append({"role": "user", "content": turn["reply"]})
            if turn.get("simulator"):
                sim_chat.append({"role": "assistant", "content": turn["simulator"]["raw"]})
                if not turn["simulator"]["ended"]:
                    model_chat.append({"role": "user", "content": turn["simulator"]["feedback"]})
        while True:
            rounds = record["rounds"]
            last = rounds[-1] if rounds else None
            if last is not None and last.get("simulator") and last["simulator"]["ended"]:
                record["status"] = "satisfied"
                break
            if last is not None and last.get("simulator") and len(rounds) >= self.max_rounds:
                record["status"] = "unsatisfied"
                break
            number = len(rounds) + (last is None or bool(last.get("simulator")))
            try:
                if last is None or last.get("simulator"):
                    answer = self._reply(ask, system, model_chat, number, first_variant)
                    turn = {"round": number, "reply": answer.value["response"], **_call(answer)}
                    if number == 1:
                        turn["sent"] = answer.sent
                    rounds.append(turn)
                    model_chat.append({"role": "assistant", "content": turn["reply"]})
                    sim_chat.append({"role": "user", "content": turn["reply"]})
                else:
                    answer = user_simulator.ask(self.simulator, sim_system, sim_chat, first_variant=first_variant)
                    feedback, ended, score = answer.value
                    last["simulator"] = {"score": score, "ended": ended, "feedback": feedback,
                                         "raw": answer.raw, **_call(answer)}
                    sim_chat.append({"role": "assistant", "content": answer.raw})
                    if not ended:
                        model_chat.append({"role": "user", "content": feedback})
            except (UnusableAnswer, ModelCallFailed) as exc:
                who = "reply" if last is None or last.get("simulator") else "simulator"
                reason = (f"unparseable answer: {exc.reason}" if isinstance(exc, UnusableAnswer)
                          else f"{type(exc).__name__}: {exc.reason}")
                return self._failed(path, record, who, number, reason, exc.answer or Answer(next_variant=first_variant))
            first_variant = 0
            atomic_write_json(path, record)  # after every call: a kill loses at most the one in flight
        record["finished_at"] = now()
        atomic_write_json(path, record)
        if self._needs_judge(record):
            self._judge_final(path, record, instance)
        return DialogueOutcome(instance.instance_id, record["status"])

    def _needs_judge(self, record: dict) -> bool:
        done = (record.get("final_judge") or {}).get(self.judge_model.label) if self.judge_model is not None else None
        return self.judge_model is not None and not (done and done.get("status") == "done"
                                               and judge.score_problem(done.get("score")) is None)

    def _judge_final(self, path: Path, record: dict, instance: Instance) -> None:
        """The judge step (Figure 16, the generation task's, at the evaluator's parameters) on
        the dialogue's last reply, recorded under the judge's label; a failure is recorded and
        counted (the dialogue stays finished), and asked afresh by the next invocation."""
        earlier = (record.get("final_judge") or {}).get(self.judge_model.label) or {}
        step = judge.ask(instance.current_contextual_preference, instance.current_checklist,
                         instance.current_request, record["rounds"][-1]["reply"])
        try:
            answer = step.answer(self.judge_model, first_variant=earlier.get("next_variant", 0))
            entry = {"status": "done", "score": answer.value["score"], "raw": answer.raws, "usage": answer.usage,
                     "round": len(record["rounds"])}
        except (UnusableAnswer, ModelCallFailed) as exc:
            answer = exc.answer or Answer()
            entry = {"status": "failed", "error": (f"unparseable answer: {exc.reason}" if isinstance(exc, UnusableAnswer)
                                                   else f"{type(exc).__name__}: {exc.reason}"),
                     "raw": answer.raws, "usage": answer.usage, "next_variant": answer.next_variant}
            log.warning("%s: the final reply's judge failed: %s", record["instance_id"], entry["error"])
        record.setdefault("final_judge", {})[self.judge_model.label] = entry
        atomic_write_json(path, record)

    def _reply(self, ask: Ask, system: str, chat: list[dict], number: int, first_variant: int) -> Answer:
        """The evaluated model's reply: round 1 is the generation step's request (its re-asks
        too); later rounds continue the chat, read and re-asked as the generation step's."""
        if number == 1:
            return ask.answer(self.model, first_variant=first_variant)
        return ask_until_usable(self.model, system, list(chat), generate.parse, tries=config.MAX_PARSE_RETRIES + 1,
                                invalid=(ParseError,), first_variant=first_variant)

    def _failed(self, path: Path, record: dict, who: str, number: int, reason: str, answer: Answer) -> DialogueOutcome:
        record["status"] = "failed"
        record["failure"] = {"at": who, "round": number, "reason": reason, "raw": answer.raws,
                             "usage": answer.usage, "next_variant": answer.next_variant, "at_time": now()}
        atomic_write_json(path, record)
        log.warning("%s: dialogue failed at round %d (%s): %s", record["instance_id"], number, who, reason)
        return DialogueOutcome(record["instance_id"], "failed", reason=reason)


def _turn_problem(turn) -> tuple[str, str] | None:
    """(part, problem) of a stored round that cannot be used: its reply or its simulator turn."""
    if not isinstance(turn, dict) or not isinstance(turn.get("reply"), str) or not turn["reply"].strip():
        return "reply", "the reply is not a non-empty string"
    simulator = turn.get("simulator")
    if simulator is not None:
        problem = user_simulator.check(simulator) if isinstance(simulator, dict) else "not an object"
        if problem is None and not isinstance(simulator.get("raw"), str):
            problem = "raw is not a string"
        if problem:
            return "simulator", problem
    return None


def damaged(record: dict) -> str | None:
    """What is wrong with a dialogue file's rounds (None: usable), first problem only."""
    rounds = record.get("rounds")
    if not isinstance(rounds, list):
        return "its rounds are not a list"
    for number, turn in enumerate(rounds, start=1):
        found = _turn_problem(turn)
        if found:
            return f"round {number}: {found[0]}: {found[1]}"
        if turn.get("simulator") is None and number < len(rounds):
            return f"round {number}: no simulator answer before a later round"
    if record.get("status") == "satisfied" and not (rounds and (rounds[-1].get("simulator") or {}).get("ended")):
        return "satisfied, but its last round did not end the dialogue"
    return None


def heal(record: dict) -> None:
    """Drop a dialogue's rounds from its first unusable part on: they are asked again (the
    response cache replays the answers once paid for, so a damaged file heals without a call)."""
    rounds = record["rounds"] if isinstance(record.get("rounds"), list) else []
    kept = []
    for turn in rounds:
        found = _turn_problem(turn)
        if found and found[0] == "reply":
            break
        if found:
            kept.append({k: v for k, v in turn.items() if k != "simulator"})
            break
        kept.append(turn)
        if turn.get("simulator") is None:
            break
    record["rounds"], record["status"] = kept, "running"


def _call(answer: Answer) -> dict:
    """What a turn keeps of its call besides its value."""
    kept = {"attempts": answer.attempts, "usage": answer.usage, "latency_s": answer.latency_s}
    if answer.attempts > 1:
        kept["unusable"] = answer.raws[:-1]
    return kept
