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
and goes on from there. The measures are in report/interaction_measures.py.
"""
from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cupid import config
from cupid.evaluation.report.interaction_measures import MANIFEST, dialogue_records, measures
from cupid.evaluation.settings import Context, Setting
from cupid.evaluation.steps import generate, user_simulator
from cupid.evaluation.steps.ask import Ask
from cupid.evaluation.store import BATCHES, instance_file_name, now, run_dir_for
from cupid.utils.answers import ParseError
from cupid.utils.dataset import Instance, safe_name
from cupid.utils.errors import Interrupted, SetupError
from cupid.utils.executor import iter_with_progress
from cupid.utils.io import FileLock, StorageError, atomic_write_json, read_json
from cupid.utils.models.asking import Answer, UnusableAnswer, ask_until_usable
from cupid.utils.models.batch import BatchDeferred, BatchRunner, run_in_rounds
from cupid.utils.models.errors import ModelCallFailed, ModelConfigurationError, RunCancelled
from cupid.utils.models.model import Model
from cupid.utils.models.retry import CANCEL, cancel_all
from cupid.utils.redact import redact
from cupid.utils.stop_signals import stop_cause, stop_status

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


def first_ask(instance: Instance, setting: Setting, context: Context | None = None) -> Ask:
    """Round 1's request: the generation task's, as the pipeline builds it (``context``: the
    strategy's, when already taken)."""
    if setting.preference_given:
        return generate.ask_given_preference(instance.current_contextual_preference, instance.current_request)
    return generate.ask((context or setting.context(instance)).text, instance.current_request)


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
    setting: Setting
    max_rounds: int
    directory: Path

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
            record = read_json(path) if path.exists() else {"instance_id": instance.instance_id, "rounds": []}
            return self._failed(path, record, "internal", len(record.get("rounds") or []) + 1,
                                redact(f"{type(exc).__name__}: {exc}"), Answer())
        finally:
            lock.release()

    def _run(self, instance: Instance) -> DialogueOutcome:
        path = self.path(instance)
        record = read_json(path) if path.exists() else None
        if record is not None and record.get("fingerprint") != instance.fingerprint():
            raise SetupError(f"{path} holds a dialogue of other content for instance {instance.instance_id}; "
                             f"use another --results_dir, or move the file away to evaluate it afresh")
        if record is not None and record.get("status") in FINISHED and damaged(record):
            log.warning("%s: %s; asked again from there", path, damaged(record))
            heal(record)
        if record is not None and record.get("status") in (*FINISHED, "skipped"):
            return DialogueOutcome(instance.instance_id, record["status"], already_done=True)
        if record is not None and damaged(record):
            log.warning("%s: %s; asked again from there", path, damaged(record))
            heal(record)
        if record is None:
            description, source = persona_description(instance)
            record = {"instance_id": instance.instance_id, "persona_id": instance.persona_id,
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
        skip = self.setting.skip_reason(instance)
        if skip:
            record.update(status="skipped", skipped=skip)
            atomic_write_json(path, record)
            return DialogueOutcome(instance.instance_id, "skipped", reason=skip)
        first_variant = 0
        if record["status"] == "failed":  # asked afresh from the call that failed, past its variants
            first_variant = record["failure"].get("next_variant", 0)
            record["failures"].append(record.pop("failure"))
            record["status"] = "running"
        try:
            context = None if self.setting.preference_given else self.setting.context(instance)
        except Exception as exc:  # the strategy's own code (a user's) raised
            return self._failed(path, record, "context", 1, redact(f"{type(exc).__name__}: {exc}"), Answer())
        ask = first_ask(instance, self.setting, context)
        if context is not None:  # the 1-based positions of the sessions shown (None: a rendered text)
            record["shown_positions"] = None if context.positions is None else list(context.positions)
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
        return DialogueOutcome(instance.instance_id, record["status"])

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
    for number, turn in enumerate(rounds, start=1):
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


# ---------------------------------------------------------------------------------------
# One invocation (evaluate(task="interaction"))
# ---------------------------------------------------------------------------------------
def run_interaction(spec, signals=None) -> tuple[dict, Path]:
    """Every selected instance's dialogue, then results.json with the measures; returns
    (results, directory). Raises as evaluate() does."""
    from cupid.utils.models.cache import CACHE_DIR, ResponseCache
    from cupid.utils.models.registry import check_models
    from cupid.utils.models.usage import UsageTracker

    source, instances = spec.instances()
    models = spec.resolve_models()
    model = models["model"]
    simulator = resolve_simulator(spec)
    for m in (model, simulator):
        m.usage = UsageTracker()
    check_models([model, simulator])
    directory = interaction_dir(spec.results_dir, model.label, spec.setting_.name, simulator.label, spec.max_rounds)
    manifest = {"task": "interaction", "model": model.label, "simulator": simulator.label,
                "setting": spec.setting_.name, "max_rounds": spec.max_rounds, "data_source": source.name}
    directory.mkdir(parents=True, exist_ok=True)
    manifest_path = directory / MANIFEST
    with FileLock(directory / LOCKS / "run.lock"):  # shards may share the directory
        if manifest_path.exists():
            existing = read_json(manifest_path)
            differs = [k for k, v in manifest.items() if existing.get(k) != v]
            if differs:
                raise SetupError(f"{directory} holds dialogues made with other {', '.join(differs)}; use another "
                                 f"--results_dir")
            manifest["invocations"] = existing.get("invocations", [])
        atomic_write_json(manifest_path, {**manifest, "invocations": manifest.get("invocations", [])})
    cache = None if spec.no_cache else ResponseCache(Path(spec.results_dir).resolve() / CACHE_DIR)
    model.cache = simulator.cache = cache
    run = Interaction(model, simulator, spec.setting_, spec.max_rounds, directory)
    started, started_at = time.perf_counter(), now()
    outcomes: dict[str, DialogueOutcome] = {}
    stop: BaseException | None = None
    found = {r["instance_id"] for r in dialogue_records(directory, {i.instance_id for i in instances})
             if r.get("status") in (*FINISHED, "skipped")}
    runner = None
    try:
        if spec.batch:
            runner = batch_rounds(run, [i for i in instances if i.instance_id not in found], spec.n_workers,
                                  directory)
        for instance, outcome in iter_with_progress(run.run, instances, n_workers=spec.n_workers,
                                                    desc=f"{model.name} [{spec.setting_.name}] interaction"):
            outcomes[instance.instance_id] = outcome
    except KeyboardInterrupt as exc:
        cancel_all()
        stop = Interrupted(f"{stop_cause(exc)}: every finished round is saved in {directory}"
                           + (" and every submitted batch is listed in its batches.json" if spec.batch else "")
                           + "; rerun the same command to resume.", stop_status(exc))
    except ModelConfigurationError as exc:
        stop = exc
    finally:
        if cache is not None:
            cache.close()
    this = {"started": started_at, "wall_time_s": round(time.perf_counter() - started, 2),
            "selected": len(instances), "found_done": len(found),
            "ran": sum(i not in found and o.status != "busy" for i, o in outcomes.items()),
            "ran_failed": sum(o.status == "failed" for o in outcomes.values()),
            "busy": sum(o.status == "busy" for o in outcomes.values()),
            "interrupted": isinstance(stop, Interrupted)}
    if runner is not None:
        this["batch"] = runner.counts()
    with FileLock(directory / LOCKS / "run.lock"):
        manifest = read_json(manifest_path)
        manifest["invocations"].append(this)
        atomic_write_json(manifest_path, manifest)
    # Every dialogue of the directory (another shard's or an earlier --limit's too), as results.json
    # aggregates every instance file of a run directory.
    ids = {i.instance_id for i in instances} | {r["instance_id"] for r in dialogue_records(directory)}
    results = measures(directory, ids, spec.max_rounds, baseline=baseline_dir(spec, model, simulator))
    results["settings"] = {k: manifest[k] for k in ("model", "simulator", "setting", "max_rounds", "data_source")}
    results["settings"].update(task="interaction", simulator_parameters=dict(user_simulator.PARAMS),
                               persona_sources=_persona_sources(directory, ids))
    results["usage"] = {"this_invocation": {role: {"model": m.name, **m.usage.snapshot(m.name)}
                                            for role, m in (("model", model), ("simulator", simulator))},
                        "recorded": recorded_usage(directory, ids, model.name, simulator.name)}
    results["this_invocation"] = this
    atomic_write_json(directory / "results.json", results)
    if stop is not None:
        if isinstance(stop, Interrupted):
            stop.results, stop.results_path = results, directory / "results.json"
        raise stop
    return results, directory


def batch_rounds(run: Interaction, todo: list[Instance], n_workers: int, directory: Path) -> BatchRunner:
    """``--batch``: passes over the unfinished dialogues, each taking every dialogue to its
    next call not yet answered, which goes into the round's batch (one round of all dialogues
    a batch: a reply, then the simulator's answer, ...), until no call is deferred or the
    rounds run out (the rest is asked online by the ordinary pass after them)."""
    runner = BatchRunner(directory / BATCHES)

    def one(instance: Instance) -> DialogueOutcome:
        try:
            return run.run(instance)
        except BatchDeferred:
            return DialogueOutcome(instance.instance_id, "deferred")

    def one_pass() -> None:
        list(iter_with_progress(one, todo, n_workers=n_workers, show=False))

    # Two calls a round, and a re-ask now and then.
    run_in_rounds(one_pass, runner, [run.model, run.simulator], max_rounds=2 * run.max_rounds + 4)
    return runner


def resolve_simulator(spec) -> Model:
    """The simulator's model at the release's parameters (to OpenAI, as the release sends a chat)."""
    from cupid.utils.models.registry import resolve_model

    seed = {} if spec.seed is None else {"seed": spec.seed}
    simulator = resolve_model(spec.simulator, overrides=seed, timeout=spec.timeout, max_retries=spec.max_retries,
                              **user_simulator.PARAMS)
    if simulator.provider == "openai":  # OpenAI's own API, not a compatible server
        simulator = resolve_model(spec.simulator, overrides=seed, timeout=spec.timeout,
                                  max_retries=spec.max_retries, **user_simulator.PARAMS, **user_simulator.OPENAI_WIRE)
    return simulator


def recorded_usage(directory: Path, ids: set[str], model_name: str, simulator_name: str) -> dict:
    """The tokens every invocation's calls cost, from the dialogue files (failed calls too),
    per role, with the estimated cost at the catalog's price."""
    from cupid.utils.models.usage import cost_of

    totals = {"model": {}, "simulator": {}}
    for record in dialogue_records(directory, ids):
        parts = [("model", t.get("usage")) for t in record.get("rounds") or []]
        parts += [("simulator", (t.get("simulator") or {}).get("usage")) for t in record.get("rounds") or []]
        for failure in [*record.get("failures", []), *([record["failure"]] if record.get("failure") else [])]:
            parts.append(("simulator" if failure.get("at") == "simulator" else "model", failure.get("usage")))
        for role, usage in parts:
            for name, tokens in (usage or {}).items():
                totals[role][name] = totals[role].get(name, 0) + tokens
    return {role: {"model": name, **usage, "estimated_cost_usd": cost_of(name, usage)}
            for (role, usage), name in zip(totals.items(), (model_name, simulator_name))}


def baseline_dir(spec, model: Model, simulator: Model) -> Path | None:
    """The `none` strategy's dialogues of the same model, simulator and cap (the rounds-saved
    baseline), when this run is not itself that one."""
    if spec.setting_.name == "none":
        return None
    return interaction_dir(spec.results_dir, model.label, "none", simulator.label, spec.max_rounds)


def _persona_sources(directory: Path, ids: set[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in dialogue_records(directory, ids):
        counts[record.get("persona_source", "?")] = counts.get(record.get("persona_source", "?"), 0) + 1
    return counts


def print_interaction_summary(results: dict, path: Path | None = None, out=None) -> None:
    out = out or sys.stdout
    s, c = results["settings"], results["counts"]
    print(f"\nCUPID interaction · model {s['model']} · setting {s['setting']} · simulator {s['simulator']} · "
          f"max_rounds {s['max_rounds']}", file=out)
    rts = results["rounds_to_satisfaction"]
    print(f"dialogues: {c['selected']} · satisfied {c['satisfied']} · unsatisfied {c['unsatisfied']} "
          f"(counted at {s['max_rounds']} rounds) · FAILED {c['failed']} · skipped {c['skipped']}"
          + (f" · unfinished {c['unfinished']}" if c.get("unfinished") else ""), file=out)
    if rts["value"] is not None:
        print(f"rounds to satisfaction: {rts['value']:.2f} [{rts['low']:.2f}, {rts['high']:.2f}] (n={rts['n']})",
              file=out)
    saved = results.get("rounds_saved_vs_none")
    if saved and saved.get("difference") is not None:
        print(f"feedback rounds saved vs none: {saved['difference']:+.2f} [{saved['low']:+.2f}, "
              f"{saved['high']:+.2f}] (paired n={saved['n']})", file=out)
    curve = " ".join(f"{p['value']:.2f}" if p["value"] is not None else "-" for p in results["satisfied_by_round"])
    print(f"satisfied by round 1..{s['max_rounds']}: {curve}", file=out)
    for role, usage in (results.get("usage") or {}).get("this_invocation", {}).items():
        print(f"{role} {usage.get('model')}: {usage.get('calls', 0)} calls · {usage.get('prompt_tokens', 0)} "
              f"prompt + {usage.get('completion_tokens', 0)} completion tokens", file=out)
    embedded = sorted({s[role] for role in ("model", "simulator") if str(s.get(role) or "")
                       .startswith(config.EMBEDDED_MODEL)})
    if embedded:
        print(f"note: {' and '.join(embedded)} is the embedded 135M offline model: these numbers "
              f"exercise the harness end to end and mean nothing about the benchmark", file=out)
    if path is not None:
        print(f"results: {path}", file=out)
