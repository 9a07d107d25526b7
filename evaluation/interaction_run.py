"""One invocation of ``--task interaction`` (``evaluate(task="interaction")``): the dialogues
of the selected instances (evaluation/interaction.py), online or in batch rounds, then
results.json with the measures (evaluation/report/interaction_measures.py), and the summary
``cupid-eval`` prints."""
from __future__ import annotations

import copy
import math
import sys
import time
from pathlib import Path

from ..utils.progress import HEARTBEAT_S, ProgressLog
from .context_check import check_context
from .interaction import (FINISHED, LOCKS, DialogueOutcome, Interaction, interaction_dir,
                          persona_description)
from .report.interaction_measures import MANIFEST, dialogue_records, measures
from .steps import user_simulator
from .store import BATCHES, now
from ..utils import events
from ..utils.dataset import Instance
from ..utils.errors import Interrupted, SetupError
from ..utils.executor import iter_with_progress, worker_threads
from ..utils.io import FileLock, StorageError, atomic_write_json, read_json
from ..utils.models.batch import BatchDeferred, BatchRunner, run_in_rounds
from ..utils.models.call_errors import ModelConfigurationError
from ..utils.models.model import Model
from ..utils.models.tokens import MAX_CHARS_PER_TOKEN
from ..utils.models.retry import cancel_all
from ..utils.stop_signals import stop_cause, stop_status


def run_interaction(spec, signals=None) -> tuple[dict, Path]:
    """Every selected instance's dialogue, then results.json with the measures; returns
    (results, directory). Raises as evaluate() does."""
    from ..utils.models.cache import CACHE_DIR, ResponseCache
    from ..utils.models.registry import check_models
    from ..utils.models.usage import UsageTracker

    source, instances = spec.instances()
    models = spec.resolve_models()
    model = models["model"]
    simulator = resolve_simulator(spec)
    judge_model = models["evaluator"] if spec.judge_final else None
    used = [m for m in (model, simulator, judge_model) if m is not None]
    for m in used:
        m.usage = UsageTracker()
    check_models(used)
    check_simulator_context(simulator, instances)
    # Round 1's request against a served model's stated context (later rounds are longer).
    check_context({"evaluated": model}, instances, task="generation", setting=spec.strategy)
    directory = interaction_dir(spec.results_dir, model.label, spec.strategy.name, simulator.label, spec.max_rounds)
    manifest = {"task": "interaction", "model": model.label, "simulator": simulator.label,
                "setting": spec.strategy.name, "max_rounds": spec.max_rounds, "data_source": source.name}
    manifest_path = directory / MANIFEST
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with FileLock(directory / LOCKS / "run.lock"):  # shards may share the directory
            if manifest_path.exists():
                existing = read_json(manifest_path)
                differs = [k for k, v in manifest.items() if existing.get(k) != v]
                if differs:
                    raise SetupError(f"{directory} holds dialogues made with other {', '.join(differs)}; use "
                                     f"another --results_dir")
                manifest["invocations"] = existing.get("invocations", [])
            atomic_write_json(manifest_path, {**manifest, "invocations": manifest.get("invocations", [])})
    except StorageError as exc:
        exc.add_note("nothing was run")
        raise
    cache = None if spec.no_cache else ResponseCache(Path(spec.results_dir).resolve() / CACHE_DIR)
    for m in used:
        m.cache = cache
    run = Interaction(model, simulator, spec.strategy, spec.max_rounds, directory, judge_model)
    started, started_at = time.perf_counter(), now()
    outcomes: dict[str, DialogueOutcome] = {}
    stop: BaseException | None = None
    found = {r["instance_id"] for r in dialogue_records(directory, {i.instance_id for i in instances})
             if r.get("status") in (*FINISHED, "skipped")}
    events.note(f"{directory}: {len(found)} of {len(instances)} dialogues already finished, "
                f"{len(instances) - len(found)} to run")
    runner = None
    try:
        if spec.batch:
            runner = batch_rounds(run, [i for i in instances if i.instance_id not in found], spec.n_workers,
                                  directory)
        label = f"{model.name} [{spec.strategy.name}] interaction"
        every = spec.progress_every or (0 if sys.stderr.isatty() else max(1, len(instances) // 20))
        progress = ProgressLog(len(instances), every, label, workers=spec.n_workers,
                               heartbeat_s=None if sys.stderr.isatty() else HEARTBEAT_S) if every else None
        try:
            for instance, outcome in iter_with_progress(run.run, instances, n_workers=spec.n_workers, desc=label):
                outcomes[instance.instance_id] = outcome
                if progress is not None and outcome.status != "busy":
                    progress.add(outcome.status == "failed", found_done=instance.instance_id in found)
        finally:
            if progress is not None:
                progress.close()
    except KeyboardInterrupt as exc:
        stop_calls()
        stop = Interrupted(f"{stop_cause(exc)}: every finished round is saved in {directory}"
                           + (" and every submitted batch is listed in its batches.json" if spec.batch else "")
                           + "; rerun the same command to resume.", stop_status(exc))
    except ModelConfigurationError as exc:
        stop_calls()
        stop = exc
    except StorageError as exc:  # the disk refused a write: every call saved before it is safe
        stop_calls()
        exc.add_note(f"safe: every round saved before the failure is in {directory}; make room (or make the "
                     f"directory writable) and rerun the same command to go on without asking finished rounds "
                     f"again.")
        stop = exc
    finally:
        if cache is not None:
            cache.close()
    try:
        results = _finish(spec, directory, manifest_path, instances, found, outcomes, stop, started, started_at,
                          runner, model, simulator, judge_model)
    except StorageError:
        if isinstance(stop, StorageError):
            raise stop from None
        raise
    if stop is not None:
        if isinstance(stop, Interrupted):
            stop.results, stop.results_path = results, directory / "results.json"
        raise stop
    return results, directory


def stop_calls(grace: float = 3.0) -> None:
    """Tell every model call in flight to stop and give the dialogues' threads ``grace``
    seconds to return (one blocked in a hung request is left to its timeout)."""
    cancel_all()
    deadline = time.monotonic() + grace
    for thread in worker_threads():
        thread.join(max(0.0, deadline - time.monotonic()))


def _finish(spec, directory: Path, manifest_path: Path, instances, found: set[str], outcomes: dict,
            stop: BaseException | None, started: float, started_at: str, runner, model: Model, simulator: Model,
            judge_model: Model | None) -> dict:
    """The invocation's record in interaction_run.json, and results.json (its content returned)."""
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
    results = measures(directory, ids, spec.max_rounds, baseline=baseline_dir(spec, model, simulator),
                       judge=judge_model.label if judge_model is not None else None)
    results["settings"] = {k: manifest[k] for k in ("model", "simulator", "setting", "max_rounds", "data_source")}
    results["settings"].update(task="interaction", simulator_parameters=dict(user_simulator.PARAMS),
                               persona_sources=_persona_sources(directory, ids))
    results["usage"] = {"this_invocation": {role: {"model": m.name, **m.usage.snapshot(m.name)}
                                            for role, m in (("model", model), ("simulator", simulator),
                                                            ("final_judge", judge_model)) if m is not None},
                        "recorded": recorded_usage(directory, ids, model.name, simulator.name, judge_model)}
    results["this_invocation"] = this
    atomic_write_json(directory / "results.json", results)
    return results


def check_simulator_context(simulator: Model, instances) -> None:
    """Raise ModelConfigurationError when a served simulator's stated context cannot hold its
    first request (system prompt, opening turn, and a reply, left empty) plus its max_tokens
    (8192, the release's): every call of every dialogue would be refused."""
    limit = getattr(simulator, "max_model_len", None)
    if not limit:
        return
    longest = max((len(user_simulator.system_prompt(persona_description(i)[0], i.current_context_factor,
                                                    i.current_contextual_preference, i.current_checklist))
                   + len(user_simulator.opening_turn(i.current_request.strip())) for i in instances), default=0)
    tokens = math.floor(longest / MAX_CHARS_PER_TOKEN)
    max_tokens = simulator.overrides.get("max_tokens", user_simulator.PARAMS["max_tokens"])
    if tokens + max_tokens > limit:
        raise ModelConfigurationError(
            f"{simulator.name} (simulator): the server's max_model_len {limit} cannot hold the simulator's first "
            f"request: at least {tokens} prompt tokens (estimated from its length) + max_tokens {max_tokens} = "
            f"{tokens + max_tokens}, and every later request is longer; restart vLLM with --max-model-len "
            f"{1 << (tokens + max_tokens - 1).bit_length()} or more")


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

    # Two calls a round, a re-ask now and then, and the final reply's judge.
    models = [m for m in (run.model, run.simulator, run.judge_model) if m is not None]
    run_in_rounds(one_pass, runner, models, max_rounds=2 * run.max_rounds + 5)
    return runner


def resolve_simulator(spec) -> Model:
    """The simulator's model at the release's parameters (to OpenAI, as the release sends a chat)."""
    from ..utils.models.registry import resolve_model

    seed = {} if spec.seed is None else {"seed": spec.seed}
    # A caller's Model object is copied, not rewritten (as RunSpec.resolve_models does).
    own = lambda: copy.copy(spec.simulator) if isinstance(spec.simulator, Model) else spec.simulator  # noqa: E731
    simulator = resolve_model(own(), overrides=seed, timeout=spec.timeout, max_retries=spec.max_retries,
                              **user_simulator.PARAMS)
    if simulator.provider == "openai" and not isinstance(spec.simulator, Model):  # OpenAI's own API
        simulator = resolve_model(spec.simulator, overrides=seed, timeout=spec.timeout,
                                  max_retries=spec.max_retries, **user_simulator.PARAMS, **user_simulator.OPENAI_WIRE)
    return simulator


def recorded_usage(directory: Path, ids: set[str], model_name: str, simulator_name: str,
                   judge_model: Model | None = None) -> dict:
    """The tokens every invocation's calls cost, from the dialogue files (failed calls too),
    per role, with the estimated cost at the catalog's price."""
    from ..utils.models.usage import cost_of

    names = {"model": model_name, "simulator": simulator_name}
    if judge_model is not None:
        names["final_judge"] = judge_model.name
    totals: dict[str, dict] = {role: {} for role in names}
    for record in dialogue_records(directory, ids):
        parts = [("model", t.get("usage")) for t in record.get("rounds") or []]
        parts += [("simulator", (t.get("simulator") or {}).get("usage")) for t in record.get("rounds") or []]
        for failure in [*record.get("failures", []), *([record["failure"]] if record.get("failure") else [])]:
            parts.append(("simulator" if failure.get("at") == "simulator" else "model", failure.get("usage")))
        if judge_model is not None:
            parts.append(("final_judge", ((record.get("final_judge") or {}).get(judge_model.label) or {}).get("usage")))
        for role, usage in parts:
            for name, tokens in (usage or {}).items():
                totals[role][name] = totals[role].get(name, 0) + tokens
    return {role: {"model": names[role], **usage, "estimated_cost_usd": cost_of(names[role], usage)}
            for role, usage in totals.items()}


def baseline_dir(spec, model: Model, simulator: Model) -> Path | None:
    """The `none` strategy's dialogues of the same model, simulator and cap (the rounds-saved
    baseline), when this run is not itself that one."""
    if spec.strategy.name == "none":
        return None
    return interaction_dir(spec.results_dir, model.label, "none", simulator.label, spec.max_rounds)


def _persona_sources(directory: Path, ids: set[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in dialogue_records(directory, ids):
        counts[record.get("persona_source", "?")] = counts.get(record.get("persona_source", "?"), 0) + 1
    return counts
