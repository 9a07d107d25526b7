"""One invocation of one model and setting on its run directory, as named steps that
``evaluation.run.evaluate_one`` calls in order: the data, the models, the run directory,
the batch rounds (``--batch``), the instances, results.json.

Nothing is written before the data, the models and the run directory have been checked. A
step that cannot go on raises ``Refused`` with the message and the exit status; a stop
(Ctrl-C, SIGTERM, SIGHUP, a full disk) is carried to the end as a ``Stop``, so that the
results of what was done are still written.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cupid import config
from cupid.evaluation.aggregate import InstanceOutcome, RunningScores, invocation_counts
from cupid.evaluation.flags import bundled_path, role_overrides
from cupid.evaluation.console import ProgressLog
from cupid.evaluation.context_check import check_context
from cupid.evaluation.data import InstanceSource
from cupid.evaluation.pipeline import Evaluation, run_batch_rounds
from cupid.evaluation.results_file import storage_safe_note
from cupid.evaluation.shards import ShardedInstances, parse_shard
from cupid.evaluation.steps import PROMPTS, prompt_version
from cupid.evaluation.stopping import stop_workers
from cupid.evaluation.store import (BATCHES, CorruptRunFile, RunConflictError, RunStore, Survey, now,
                              run_dir_for)
from cupid.utils.benchmark.dataset import DATASET_PRIOR_SESSIONS, DataValidationError
from cupid.utils.executor import iter_with_progress
from cupid.utils.io import STORAGE_EXIT, StorageError, clean_orphan_tmp
from cupid.utils.models.batch import BatchRunner
from cupid.utils.models.errors import ModelConfigurationError, ModelError, RunCancelled
from cupid.utils.models.limits import parse_rate_limit, set_user_limits
from cupid.utils.models.registry import check_models, resolve_model
from cupid.utils.models.retry import CANCEL
from cupid.utils.models.usage import UsageTracker
from cupid.utils.redact import redact
from cupid.utils.stop_signals import STOP_CODES, stop_cause, stop_status

log = logging.getLogger("cupid.evaluation")


class Refused(Exception):
    """The invocation cannot go on: ``message`` for the user, ``code`` the exit status;
    ``end_process``: threads may still be blocked, the command ends the process."""

    def __init__(self, message: str, code: int, *, end_process: bool = False):
        super().__init__(message)
        self.message, self.code, self.end_process = message, code, end_process


@dataclass
class Stop:
    """Why the invocation stops before its end, and what to tell the user."""
    code: int
    message: str


@dataclass
class RunModels:
    model: object
    evaluator: object
    matcher: object | None

    @property
    def roles(self) -> tuple[tuple[str, object], ...]:
        return (("model", self.model), ("evaluator", self.evaluator), ("matcher", self.matcher))

    @property
    def all(self) -> list:
        return [m for _, m in self.roles if m is not None]


@dataclass
class Invocation:
    """What the steps after the checks share."""
    args: argparse.Namespace
    models: RunModels
    instances: object
    data_source: str
    store: RunStore
    manifest: dict
    evaluation: Evaluation
    survey: Survey
    started: float = field(default_factory=time.perf_counter)  # includes the batch rounds
    started_at: str = field(default_factory=now)

    @property
    def run_dir(self) -> Path:
        return self.store.run_dir

    def new_evaluation(self) -> Evaluation:
        args, m = self.args, self.models
        return Evaluation(model=m.model, evaluator=m.evaluator, matcher=m.matcher, store=self.store,
                          task=args.task, setting=args.setting, inner_workers=args.n_workers)


# ---------------------------------------------------------------------------------------
# 1. Data, validated in full before any model is touched
# ---------------------------------------------------------------------------------------
def select_instances(args: argparse.Namespace) -> tuple[InstanceSource, object]:
    """The data the flags name, validated in full (raises DataValidationError), and the
    instances to run: all of it, or a shard with --shard. ``--dry_run`` forecasts the same."""
    if args.data and args.data_dir:
        raise DataValidationError("give --data or --data_dir, not both")
    data_path = bundled_path(args.data or args.data_dir)
    if data_path and args.revision is not None:
        raise DataValidationError("--revision selects a version of the hub dataset; it does "
                                  "not apply to --data or --data_dir")
    source = InstanceSource(data_path=data_path, dataset=None if data_path else args.dataset,
                            split=args.split, limit=args.limit, revision=args.revision)
    source.validate()
    return source, ShardedInstances(source, *parse_shard(args.shard)) if args.shard else source


def load_data(args: argparse.Namespace) -> tuple[str, object]:
    """The data's name (the same for every shard, so shards share a run directory) and the
    instances to run; the data's warnings on stderr."""
    try:
        source, instances = select_instances(args)
    except DataValidationError as exc:
        raise Refused(f"bad data: {exc}", 2) from None
    for warning in source.warnings:
        print(f"warning: {source.name}: {warning} (the dataset's instances have "
              f"{DATASET_PRIOR_SESSIONS} prior sessions, each opened by the user)", file=sys.stderr)
    return source.name, instances


# ---------------------------------------------------------------------------------------
# 2. Models, each endpoint reached once before any work (missing keys, unreachable servers,
#    refused keys)
# ---------------------------------------------------------------------------------------
def resolve_models(args: argparse.Namespace, shared, instances) -> RunModels:
    try:
        set_user_limits(dict(parse_rate_limit(spec) for spec in args.rate_limit))
    except ValueError as exc:
        raise Refused(str(exc), 2) from None
    common = {"timeout": args.timeout, "max_retries": args.max_retries}
    overrides = role_overrides(args)
    try:
        model = resolve_model(args.model, role="evaluated", overrides=overrides["evaluated"], **common)
        # The evaluator and matcher are one object for every run of a sweep.
        evaluator = shared.model(args.evaluator, "evaluator", overrides=overrides["evaluator"], **common)
        matcher = None
        if args.use_matcher:
            matcher = shared.model(f"vllm:{config.PREFMATCHER_MODEL}@{args.matcher_url}",
                                   "matcher", overrides=overrides["matcher"], **common)
        models = RunModels(model, evaluator, matcher)
        for m in models.all[1:]:
            m.usage = UsageTracker()  # this run's calls only, in its results.json
        check_models(models.all)
        # The servers' stated contexts against the longest requests, before any paid call.
        check_context({"evaluated": model, "evaluator": evaluator, "matcher": matcher},
                      instances, task=args.task, setting=args.setting)
    except ModelError as exc:
        raise Refused(str(exc), 2) from None
    return models


# ---------------------------------------------------------------------------------------
# 3. The run directory: settings, data and every instance file checked before writing
# ---------------------------------------------------------------------------------------
def prompt_keys(task: str, setting: str, prefmatcher: bool) -> list[str]:
    """The prompts (steps.PROMPTS keys) a task and setting send, for run.json."""
    needed = {"inference": ["infer", "decompose", "match_prefmatcher" if prefmatcher else "match"],
              "generation": ["generate", "judge"]}
    keys = needed["inference"] * (task != "generation") + needed["generation"] * (task != "inference")
    if setting == "summary":
        keys = [{"infer": "infer_from_summaries", "generate": "generate_from_summaries"}.get(k, k)
                for k in keys] + ["summarize"]
    if setting == "oracle_preference":
        keys = [{"generate": "generate_oracle_preference"}.get(k, k) for k in keys]
    return keys


def check_run_dir(args: argparse.Namespace, models: RunModels, data_source: str, instances) -> Invocation:
    model = models.model
    keys = prompt_keys(args.task, args.setting, models.matcher is not None)
    # A run with generation overrides is another run: its own directory, named by its label.
    run_dir = run_dir_for(args.results_dir, model.label, args.setting)
    manifest = {"model": model.label, "setting": args.setting, "data_source": data_source,
                "data": instances.describe(),
                "prompt_versions": {PROMPTS[k]: prompt_version(k) for k in keys}}
    if model.overrides:
        manifest["model_name"] = model.name
        manifest["generation_overrides"] = dict(model.overrides)
    store = RunStore(run_dir, manifest)
    evaluation = Evaluation(model=model, evaluator=models.evaluator, matcher=models.matcher,
                            store=store, task=args.task, setting=args.setting,
                            inner_workers=args.n_workers)
    try:
        existing_manifest = store.read_manifest()
        survey = store.survey(instances, evaluation.is_finished, evaluation.stored_problems)
        if survey.changed:
            names = ", ".join(i for i, _ in survey.changed[:5])
            more = f" and {len(survey.changed) - 5} more" if len(survey.changed) > 5 else ""
            raise RunConflictError(
                f"{run_dir} holds results of other content for {len(survey.changed)} "
                f"instance(s) with the same id: {names}{more} (e.g. {survey.changed[0][1]}). "
                f"Use another --results_dir, or move those files away to evaluate them afresh.")
        store.check()
    except (RunConflictError, CorruptRunFile, ValueError) as exc:
        evaluation.close()
        raise Refused(str(exc), 2) from None
    except StorageError as exc:
        evaluation.close()
        raise Refused(f"{exc}; nothing was run, nothing in {run_dir} was changed", STORAGE_EXIT) from None
    warn_about_run_dir(run_dir, survey, endpoint_change(existing_manifest, model))
    return Invocation(args, models, instances, data_source, store, manifest, evaluation, survey)


def warn_about_run_dir(run_dir: Path, survey: Survey, changed_server: str | None) -> None:
    if changed_server and survey.done:
        print(redact(f"warning: {run_dir}: {changed_server}; the {len(survey.done)} instances "
                     f"already done there are kept, not asked again (use another --results_dir "
                     f"to evaluate this server afresh)"), file=sys.stderr)
    for path, problems in survey.invalid:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        print(redact(f"warning: {path}: {problems[0]}{more}; its steps are run again, the "
                     f"values are not aggregated"), file=sys.stderr)
    for path, target, reason in survey.moved_aside:
        print(redact(f"warning: {path}: {reason}; moved to {target.name}, the instance is "
                     f"evaluated afresh"), file=sys.stderr)


def endpoint_change(manifest: dict | None, model) -> str | None:
    """How the evaluated model's server differs from the one run.json last recorded."""
    invocations = (manifest or {}).get("invocations") or []
    recorded = ((invocations[-1].get("endpoints") or {}).get("model") or {}) if invocations else {}
    if "endpoint" not in recorded:
        return None
    before, now_ = recorded["endpoint"], model.endpoint()
    if before == now_:
        return None
    return (f"{model.name} was answered by {before or 'the provider default'} in the last "
            f"invocation, now by {now_ or 'the provider default'}")


def open_run_dir(run: Invocation) -> None:
    try:
        run.store.open()
    except StorageError as exc:
        run.evaluation.close()
        raise Refused(f"{exc}; nothing was run, nothing in {run.run_dir} was changed", STORAGE_EXIT) from None
    clean_orphan_tmp(run.run_dir)
    print(f"{run.run_dir}: {len(run.survey.done)} of {len(run.instances)} instances already done, "
          f"{len(run.survey.todo)} to run", file=sys.stderr)


# ---------------------------------------------------------------------------------------
# 4. --batch: the instances to run go through the batch rounds first
# ---------------------------------------------------------------------------------------
def batch_rounds(run: Invocation, shared) -> tuple[BatchRunner, set[str], Stop | None]:
    """The batch runner, the instances it took on (run by this invocation), and the stop."""
    batched = set(run.survey.todo)
    runner = BatchRunner(run.run_dir / BATCHES)
    try:
        run_batch_rounds(run.new_evaluation, [i for i in run.instances if i.instance_id in batched],
                         runner, run.models.all, n_workers=run.args.n_workers)
    except KeyboardInterrupt as exc:
        shared.signals.second_ends_process()
        stop_workers(run.evaluation, grace=3.0)
        return runner, batched, Stop(stop_status(exc), f"{stop_cause(exc)}: the submitted batches are "
                                                       f"listed in {runner.state_path}; rerun the same "
                                                       f"command to resume them.")
    except ModelError as exc:
        run.evaluation.close()
        raise Refused(str(exc), 2) from None
    except StorageError as exc:
        run.evaluation.close()
        raise Refused(f"{exc}\nsafe: every batch submitted so far is listed in {run.run_dir / BATCHES} "
                      f"(as far as it could be written) and its answers are fetched by a rerun; make "
                      f"room and rerun the same command.", STORAGE_EXIT, end_process=True) from None
    return runner, batched, None


# ---------------------------------------------------------------------------------------
# 5. The instances, on n_workers threads
# ---------------------------------------------------------------------------------------
def run_instances(run: Invocation, shared, stop: Stop | None) -> tuple[dict[str, InstanceOutcome], Stop | None]:
    """Every instance's outcome (after a stop in the batch rounds nothing more is run), and
    the stop, if one came."""
    args, evaluation, n_selected = run.args, run.evaluation, len(run.instances)
    label = f"{run.models.model.name} [{args.setting}]"
    running = RunningScores()
    every = args.progress_every or (0 if sys.stderr.isatty() else max(1, n_selected // 20))
    progress = ProgressLog(n_selected, every, label, workers=args.n_workers,
                           heartbeat_s=None if sys.stderr.isatty() else 60.0) if every else None

    def evaluate(instance) -> InstanceOutcome:
        try:
            outcome = evaluation.evaluate(instance)
        except (ModelConfigurationError, RunCancelled, StorageError):
            raise
        except Exception as exc:  # recorded and counted as a failure, never dropped
            if CANCEL.is_set():  # the run is stopping and its pools are shut: left for a rerun
                raise RunCancelled(f"{instance.instance_id}: the run is stopping") from exc
            log.exception("%s: unexpected error", instance.instance_id)
            outcome = InstanceOutcome(instance.instance_id, instance.instance_type, "failed",
                                      failures=[("internal", redact(f"{type(exc).__name__}: {exc}"))])
        if outcome.status != "busy":
            running.add(outcome)
            if progress is not None:
                progress.add(outcome.status == "failed", found_done=outcome.already_done)
        return outcome

    outcomes: dict[str, InstanceOutcome] = {}
    try:
        busy = []
        for instance, outcome in iter_with_progress(evaluate, run.instances if stop is None else [],
                                                    n_workers=args.n_workers, desc=label,
                                                    postfix=running.postfix):
            outcomes[instance.instance_id] = outcome
            if outcome.status == "busy":
                busy.append(instance)
        retry_busy(busy, evaluate, outcomes)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (utils/stop_signals.py)
        shared.signals.second_ends_process()
        print(f"\n{stop_cause(exc)}: stopping (a second signal ends the process at once)",
              file=sys.stderr)
        stop_workers(evaluation, grace=3.0)
        stop = Stop(stop_status(exc),
                    f"{stop_cause(exc)}: {sum(o.status != 'busy' for o in outcomes.values())} of "
                    f"{n_selected} instances finished in this invocation; every finished step "
                    f"is saved in {run.run_dir}. Rerun the same command to resume.")
    except ModelConfigurationError as exc:
        stop_workers(evaluation, grace=3.0)
        stop = Stop(2, f"error: {exc}")
    except StorageError as exc:
        # The disk refused a write: every step saved before it is safe; stop rather than
        # pay for answers that cannot be kept.
        stop_workers(evaluation, grace=3.0)
        stop = Stop(STORAGE_EXIT, f"error: {exc}\n{storage_safe_note(outcomes, n_selected, run.run_dir)}")
    else:
        evaluation.close()
    if progress is not None:
        progress.close()
    return outcomes, stop


def retry_busy(busy: list, evaluate, outcomes: dict[str, InstanceOutcome]) -> None:
    """Instances another process held: taken up again once it lets go (their finished steps
    are then read back, not asked again), for at most config.LOCK_WAIT_S."""
    deadline = time.monotonic() + config.LOCK_WAIT_S
    while busy and time.monotonic() < deadline:
        time.sleep(0.2)
        still = []
        for instance in busy:
            outcome = evaluate(instance)
            outcomes[instance.instance_id] = outcome
            if outcome.status == "busy":
                still.append(instance)
        busy = still


# ---------------------------------------------------------------------------------------
# 6. What run.json records of this invocation (results.json: results_file.py)
# ---------------------------------------------------------------------------------------
def invocation_record(run: Invocation, outcomes: dict, batched: set[str], stop: Stop | None,
                      runner: BatchRunner | None) -> dict:
    """run.json's entry for this invocation (results.json's "this_invocation")."""
    record = {
        "task": run.args.task, "started": run.started_at,
        "wall_time_s": round(time.perf_counter() - run.started, 2),
        **invocation_counts(len(run.instances), run.survey.done, outcomes, ran_by_batch=batched),
        "interrupted": stop is not None and stop.code in STOP_CODES,
        # Which server answered each role: the cache keys on it, and a reader of run.json
        # can tell two checkpoints served under one name apart.
        "endpoints": {role: {"model": m.name, "provider": m.provider, "endpoint": m.endpoint()}
                      for role, m in run.models.roles if m is not None},
    }
    if runner is not None:
        record["batch"] = runner.counts()
    adapted = parameter_adaptations(run.models.all)
    if adapted:  # what the providers refused and how the requests were sent instead
        record["parameter_adaptations"] = adapted
    return record


def parameter_adaptations(models) -> dict:
    """{model name: adaptations learned} for this run's models (utils/models/adaptations.py)."""
    from cupid.utils.models.adaptations import ADAPTATIONS

    names = {m.name for m in models if m is not None}
    return {name: items for name, items in ADAPTATIONS.snapshot().items() if name in names}
