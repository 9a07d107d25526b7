"""Evaluate a model on CUPID.

    python -m evaluation.run --model gpt-4.1-nano-2025-04-14 --evaluator gpt-4o-2024-11-20 --n_workers 4
    python -m evaluation.run --model smollm2-135m --evaluator smollm2-135m --data_dir data/sample

Exit status: 0 when every instance was evaluated, 1 when any instance failed (the summary
and results.json say which step failed and why), 2 for bad input or setup (nothing run and
nothing written) or a key the server refused mid-run, 3 when the file system refused a
results file (disk full, read-only, permission denied: one line names the file, and what is
saved; rerun the same command to resume), 130 when interrupted (rerun the same command to
resume).

Several invocations may share a run directory at once (other tasks, shards, machines on a
shared disk): each instance is worked on by one process at a time, and results.json is the
aggregate of every instance file in the directory.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import config
from evaluation.aggregate import (
    InstanceOutcome, RunningScores, aggregate_records, invocation_counts, recorded_usage)
from evaluation.cli import (build_parser, bundled_path, error, flag_conflict, role_overrides,
                            setup_logging)
from evaluation.context_check import check_context
from evaluation.data import InstanceSource
from evaluation.pipeline import Evaluation, run_batch_rounds
from evaluation.steps import PROMPTS, prompt_version
from evaluation.stopping import exit_now, stop_workers, worker_threads
from evaluation.store import BATCHES, CorruptRunFile, RunConflictError, RunStore, now, run_dir_for
from evaluation.console import ProgressLog, print_summary, print_sweep_table
from evaluation.shards import ShardedInstances, parse_shard
from evaluation.sweep import sweep_runs
from utils.benchmark.dataset import DATASET_PRIOR_SESSIONS, DataValidationError
from utils.executor import iter_with_progress
from utils.io import StorageError, clean_orphan_tmp
from utils.models.batch import BatchRunner
from utils.models.cache import CACHE_DIR, ResponseCache
from utils.models.errors import ModelConfigurationError, ModelError, RunCancelled
from utils.models.limits import parse_rate_limit, set_user_limits
from utils.models.registry import check_models, resolve_model
from utils.models.retry import CANCEL, reset_cancel
from utils.models.usage import UsageTracker
from utils.redact import redact
from utils.stop_signals import STOP_CODES, SignalGuard, stop_cause, stop_status

log = logging.getLogger("cupid.evaluation")
# A results file could not be written or read (disk full, read-only, permission denied).
STORAGE_EXIT = 3


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        setup_logging(args.log_file)
    except StorageError as exc:
        error(str(exc))
        return STORAGE_EXIT
    reset_cancel()
    try:
        runs = sweep_runs(args, parser)
        if args.shard:
            parse_shard(args.shard)
    except ValueError as exc:
        error(str(exc))
        return 2
    if args.json and not args.dry_run:
        parser.error("--json goes with --dry_run")
    if args.dry_run:
        from evaluation import dry_run
        return dry_run.main(runs, as_json=args.json)
    shared = SharedResources()
    with shared.signals:  # SIGTERM and SIGHUP handled as Ctrl-C until the runs end
        try:
            if len(runs) == 1:
                return evaluate_one(runs[0], shared)
            rows = []
            for run in runs:
                print(f"\n=== sweep run {len(rows) + 1}/{len(runs)}: {run.model} [{run.setting}] ===",
                      file=sys.stderr, flush=True)
                code = evaluate_one(run, shared)
                rows.append((run, shared.last_results, code))
                shared.last_results = None
                if code in STOP_CODES or code == STORAGE_EXIT:  # stopped, or the disk refuses
                    break
            print_sweep_table(rows)
            return max(code for _, _, code in rows)
        except StorageError as exc:  # a file outside one run's bookkeeping
            error(str(exc))
            return STORAGE_EXIT
        finally:
            shared.close()


class SharedResources:
    """What the runs of a sweep share: the response cache per results directory and the
    evaluator and matcher per (name, role, options); the rate limiters are shared by
    endpoint anyway."""

    def __init__(self, *, owns_process: bool = True) -> None:
        self.caches: dict[Path, ResponseCache] = {}
        self.models: dict[tuple, object] = {}
        self.last_results: dict | None = None
        self.signals = SignalGuard()
        # The command may end the process when a hung request keeps a worker thread after a
        # stop; a caller of evaluate() (a notebook's kernel) must get control back instead.
        self.owns_process = owns_process

    def cache(self, results_dir: str) -> ResponseCache:
        path = Path(results_dir).resolve() / CACHE_DIR
        if path not in self.caches:
            self.caches[path] = ResponseCache(path)
        return self.caches[path]

    def model(self, spec: str, role: str, **params):
        key = (spec, role, repr(sorted(params.items())))
        if key not in self.models:
            self.models[key] = resolve_model(spec, role=role, **params)
        return self.models[key]

    def close(self) -> None:
        if worker_threads():  # threads still blocked after an interrupt may use a cache
            return
        for cache in self.caches.values():
            cache.close()
        self.caches.clear()


def evaluate_one(args: argparse.Namespace, shared: SharedResources) -> int:
    """One model and setting into its run directory; returns the exit status."""
    shared.signals.raising()
    conflict = flag_conflict(args)
    if conflict:
        error(conflict)
        return 2

    # 1. Data, validated in full before any model is touched.
    try:
        if args.data and args.data_dir:
            raise DataValidationError("give --data or --data_dir, not both")
        data_path = bundled_path(args.data or args.data_dir)
        if data_path and args.revision is not None:
            raise DataValidationError("--revision selects a version of the hub dataset; it does "
                                      "not apply to --data or --data_dir")
        instances = InstanceSource(data_path=data_path, dataset=None if data_path else args.dataset,
                                   split=args.split, limit=args.limit, revision=args.revision)
        instances.validate()
    except DataValidationError as exc:
        error(f"bad data: {exc}")
        return 2
    data_source = instances.name  # the same for every shard, so shards share a run directory
    for warning in instances.warnings:
        print(f"warning: {data_source}: {warning} (the dataset's instances have "
              f"{DATASET_PRIOR_SESSIONS} prior sessions, each opened by the user)", file=sys.stderr)
    if args.shard:
        instances = ShardedInstances(instances, *parse_shard(args.shard))

    # 2. Models, each endpoint reached once before any work (missing keys, unreachable
    #    servers, refused keys). Nothing is written before this passes.
    try:
        set_user_limits(dict(parse_rate_limit(spec) for spec in args.rate_limit))
    except ValueError as exc:
        error(str(exc))
        return 2
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
        models = [m for m in (model, evaluator, matcher) if m is not None]
        for m in models[1:]:
            m.usage = UsageTracker()  # this run's calls only, in its results.json
        check_models(models)
        # The servers' stated contexts against the longest requests, before any paid call.
        check_context({"evaluated": model, "evaluator": evaluator, "matcher": matcher},
                      instances, task=args.task, setting=args.setting)
    except ModelError as exc:
        error(str(exc))
        return 2

    # 3. The run directory: settings, data and every instance file checked before writing.
    needed = {"inference": ["infer", "decompose", "match_prefmatcher" if matcher else "match"],
              "generation": ["generate", "judge"]}
    keys = needed["inference"] * (args.task != "generation") + needed["generation"] * (args.task != "inference")
    if args.setting == "summary":
        keys = [{"infer": "infer_from_summaries", "generate": "generate_from_summaries"}.get(k, k)
                for k in keys] + ["summarize"]
    if args.setting == "oracle_preference":
        keys = [{"generate": "generate_oracle_preference"}.get(k, k) for k in keys]
    # A run with generation overrides is another run: its own directory, named by its label.
    run_dir = run_dir_for(args.results_dir, model.label, args.setting)
    manifest = {"model": model.label, "setting": args.setting, "data_source": data_source,
                "data": instances.describe(),
                "prompt_versions": {PROMPTS[k]: prompt_version(k) for k in keys}}
    if model.overrides:
        manifest["model_name"] = model.name
        manifest["generation_overrides"] = dict(model.overrides)
    store = RunStore(run_dir, manifest)
    evaluation = Evaluation(model=model, evaluator=evaluator, matcher=matcher, store=store,
                            task=args.task, setting=args.setting, inner_workers=args.n_workers)
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
        error(str(exc))
        return 2
    except StorageError as exc:
        evaluation.close()
        error(f"{exc}; nothing was run, nothing in {run_dir} was changed")
        return STORAGE_EXIT
    changed_server = endpoint_change(existing_manifest, model)
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

    cache = None if args.no_cache else shared.cache(args.results_dir)
    for m in models:
        m.cache = cache
    try:
        store.open()
    except StorageError as exc:
        evaluation.close()
        error(f"{exc}; nothing was run, nothing in {run_dir} was changed")
        return STORAGE_EXIT
    clean_orphan_tmp(run_dir)
    n_selected = len(instances)
    print(f"{run_dir}: {len(survey.done)} of {n_selected} instances already done, "
          f"{len(survey.todo)} to run", file=sys.stderr)

    started = time.perf_counter()  # this invocation's time includes its batch rounds
    started_at = now()
    stop_code, stop_message = None, None
    batched: set[str] = set()  # instances the batch rounds took on: run by this invocation
    runner = None
    if args.batch:
        def make_evaluation() -> Evaluation:
            return Evaluation(model=model, evaluator=evaluator, matcher=matcher, store=store,
                              task=args.task, setting=args.setting, inner_workers=args.n_workers)

        batched = set(survey.todo)
        runner = BatchRunner(run_dir / BATCHES)
        try:
            run_batch_rounds(make_evaluation, [i for i in instances if i.instance_id in batched],
                             runner, models, n_workers=args.n_workers)
        except KeyboardInterrupt as exc:
            shared.signals.second_ends_process()
            stop_workers(evaluation, grace=3.0)
            stop_code = stop_status(exc)
            stop_message = (f"{stop_cause(exc)}: the submitted batches are listed in "
                            f"{runner.state_path}; rerun the same command to resume them.")
        except ModelError as exc:
            evaluation.close()
            error(str(exc))
            return 2
        except StorageError as exc:
            evaluation.close()
            error(f"{exc}\nsafe: every batch submitted so far is listed in {run_dir / BATCHES} "
                  f"(as far as it could be written) and its answers are fetched by a rerun; make "
                  f"room and rerun the same command.")
            return exit_now(STORAGE_EXIT, shared.owns_process)

    running = RunningScores()

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

    every = args.progress_every or (0 if sys.stderr.isatty() else max(1, n_selected // 20))
    progress = ProgressLog(n_selected, every, f"{model.name} [{args.setting}]", workers=args.n_workers,
                           heartbeat_s=None if sys.stderr.isatty() else 60.0) if every else None

    outcomes: dict[str, InstanceOutcome] = {}
    busy: list = []
    try:
        # After a stop in the batch rounds nothing more is run: only the files are written.
        for instance, outcome in iter_with_progress(evaluate, instances if stop_code is None else [],
                                                    n_workers=args.n_workers,
                                                    desc=f"{model.name} [{args.setting}]",
                                                    postfix=running.postfix):
            outcomes[instance.instance_id] = outcome
            if outcome.status == "busy":
                busy.append(instance)
        # Instances another process held: taken up again once it lets go (their finished
        # steps are then read back, not asked again), for at most config.LOCK_WAIT_S.
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
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (utils/stop_signals.py)
        shared.signals.second_ends_process()
        print(f"\n{stop_cause(exc)}: stopping (a second signal ends the process at once)",
              file=sys.stderr)
        stop_workers(evaluation, grace=3.0)
        stop_code = stop_status(exc)
        stop_message = (f"{stop_cause(exc)}: {sum(o.status != 'busy' for o in outcomes.values())} of "
                        f"{n_selected} instances finished in this invocation; every finished step "
                        f"is saved in {run_dir}. Rerun the same command to resume.")
    except ModelConfigurationError as exc:
        stop_workers(evaluation, grace=3.0)
        stop_code, stop_message = 2, f"error: {exc}"
    except StorageError as exc:
        # The disk refused a write: every step saved before it is safe; stop rather than
        # pay for answers that cannot be kept.
        stop_workers(evaluation, grace=3.0)
        stop_code = STORAGE_EXIT
        stop_message = (f"error: {exc}\n{storage_safe_note(outcomes, n_selected, run_dir)}")
    else:
        evaluation.close()
    if progress is not None:
        progress.close()
    wall = round(time.perf_counter() - started, 2)

    this_invocation = {
        "task": args.task, "started": started_at, "wall_time_s": wall,
        **invocation_counts(n_selected, survey.done, outcomes, ran_by_batch=batched),
        "interrupted": stop_code in STOP_CODES,
        # Which server answered each role: the cache keys on it, and a reader of run.json
        # can tell two checkpoints served under one name apart.
        "endpoints": {role: {"model": m.name, "provider": m.provider, "endpoint": m.endpoint()}
                      for role, m in (("model", model), ("evaluator", evaluator),
                                      ("matcher", matcher)) if m is not None},
    }
    if runner is not None:
        this_invocation["batch"] = runner.counts()
    adapted = parameter_adaptations(models)
    if adapted:  # what the providers refused and how the requests were sent instead
        this_invocation["parameter_adaptations"] = adapted
    if stop_code is None:
        shared.signals.deferring()  # a signal now waits for the files below to be written
    try:
        results = write_results(store, evaluation, args, data_source, manifest, this_invocation,
                                models=(("model", model), ("evaluator", evaluator), ("matcher", matcher)))
    except KeyboardInterrupt as exc:
        return exit_now(stop_status(exc), shared.owns_process)
    except StorageError as exc:
        if stop_code == STORAGE_EXIT:
            print(redact(stop_message), file=sys.stderr)
        else:
            error(f"{exc}\n{storage_safe_note(outcomes, n_selected, run_dir)}")
        return exit_now(STORAGE_EXIT, shared.owns_process)
    shared.last_results = results
    if stop_code is None and shared.signals.received is not None:
        stop_code = 128 + shared.signals.received
        stop_message = (f"{stop_cause(shared.signals.received)} after the work was done: "
                        f"the results are written")
    if stop_code is not None:
        if stop_code in STOP_CODES:
            print_summary(results, store.run_dir / "results.json")
        print(redact(stop_message), file=sys.stderr)
        return exit_now(stop_code, shared.owns_process)
    print_summary(results, store.run_dir / "results.json")
    return 1 if this_invocation["ran_failed"] else 0


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


def storage_safe_note(outcomes: dict, n_selected: int, run_dir: Path) -> str:
    """What a run stopped by the file system leaves: what is saved, how to go on."""
    finished = sum(o.status in ("done", "failed", "skipped") for o in outcomes.values())
    return (f"safe: {finished} of {n_selected} instances finished in this invocation, and every "
            f"step saved before the failure, are in {run_dir}; make room (or make the directory "
            f"writable) and rerun the same command to resume without asking finished steps again.")


def parameter_adaptations(models) -> dict:
    """{model name: adaptations learned} for this run's models (utils/models/adaptations.py)."""
    from utils.models.adaptations import ADAPTATIONS

    names = {m.name for m in models if m is not None}
    return {name: items for name, items in ADAPTATIONS.snapshot().items() if name in names}


def write_results(store: RunStore, evaluation: Evaluation, args, data_source: str, manifest: dict,
                  this_invocation: dict, models) -> dict:
    """results.json: the aggregate of every instance file in the run directory (whatever
    this invocation's task), its usage, and the timings of every invocation so far."""
    totals = store.record_invocation(this_invocation)
    results = aggregate_records(store.iter_records(), evaluation.scorer, args.task)
    results["usage"] = {
        "this_invocation": {role: {"model": m.name, **m.usage.snapshot(m.name)}
                            for role, m in models if m is not None},
        "recorded": recorded_usage(store.iter_records()),
    }
    results["this_invocation"] = this_invocation
    results["settings"] = {
        "model": evaluation.model.label, "setting": args.setting, "task": results.pop("tasks"),
        "invocation_task": args.task,
        "evaluator": evaluation.evaluator.label, "matcher": evaluation.matcher.label,
        "generation_overrides": {role: dict(m.overrides) for role, m in models
                                 if m is not None and m.overrides},
        "scorer": evaluation.scorer, "data_source": data_source,
        "data": store.manifest.get("data"),
        "prompt_versions": store.manifest.get("prompt_versions", manifest["prompt_versions"]),
        "wall_time_s": totals["wall_time_s"], "invocations": totals["invocations"],
    }
    # The released layout keeps results.json; a copy per scorer beside it keeps a
    # PrefMatcher run from hiding the GPT-4o one.
    with store.run_lock():
        store.write_results(results, evaluation.scorer)
    return results


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as exc:  # during setup, before any instance started
        print(f"\n{stop_cause(exc)} before any work; nothing to resume", file=sys.stderr)
        sys.exit(stop_status(exc))
