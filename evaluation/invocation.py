"""One invocation of one model and setting on its run directory: the engine behind
``evaluate()`` (api.py), in the order it runs: the data, the models, the run directory, the
batch rounds (``batch``), the instances on worker threads, results.json.

Nothing is written before the data, the models and the run directory have been checked. What
cannot go on raises from utils/errors.py's hierarchy; a stop (Ctrl-C, SIGTERM, SIGHUP, a full
disk, a key refused mid-run) is carried to the end, so that results.json still holds what was
done, and raised then.
"""
from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from .. import config
from . import steps
from .aggregate import (InstanceOutcome, aggregate_records, invocation_counts, progress_postfix,
                        record_problems, recorded_usage)
from ..utils.progress import HEARTBEAT_S, ProgressLog
from .context_check import check_context
from .pipeline import Pipeline, run_batch_rounds
from .run_dir_reading import endpoint_change, other_identities, recorded_shown, warn_about_run_dir
from .run_spec import RunSpec
from .store import BATCHES, RunConflictError, RunStore, Survey, now, run_dir_for
from .strategy_model import StrategyModel, memory_cost
from ..utils import events
from ..utils.dataset import DATASET_PRIOR_SESSIONS, DataValidationError
from ..utils.errors import Interrupted
from ..utils.executor import iter_with_progress, stop_workers, worker_threads
from ..utils.io import StorageError, clean_orphan_tmp
from ..utils.models.adaptations import ADAPTATIONS
from ..utils.models.batch import BatchRunner
from ..utils.models.cache import CACHE_DIR, ResponseCache
from ..utils.models.call_errors import ModelConfigurationError
from ..utils.models.pacing import parse_rate_limit, set_user_limits
from ..utils.models.registry import check_models, portable_spec
from ..utils.models.usage import UsageTracker
from ..utils.prompts import load_prompt
from ..utils.redact import redact
from ..utils.stop_signals import SignalGuard, stop_cause, stop_status

log = logging.getLogger("cupid.evaluation")


@dataclass
class Invocation:
    spec: RunSpec
    signals: SignalGuard
    models: dict = field(default_factory=dict)    # role -> Model (the matcher only with use_matcher)
    instances: object = None
    data_source: str = ""
    store: RunStore | None = None
    survey: Survey | None = None
    started: float = field(default_factory=time.perf_counter)
    started_at: str = field(default_factory=now)

    @property
    def run_dir(self) -> Path:
        return self.store.run_dir

    def pipeline(self) -> Pipeline:
        return Pipeline(model=self.models["model"], evaluator=self.models["evaluator"],
                        matcher=self.models.get("matcher"), store=self.store, task=self.spec.task,
                        setting=self.spec.strategy, inner_workers=self.spec.n_workers)

    def run(self) -> dict:
        """results.json's content; raises what stopped the run after writing it."""
        self.load_data()
        self.resolve_models()
        pipeline = self.open_run_dir()
        cache = None if self.spec.no_cache else ResponseCache(Path(self.spec.results_dir).resolve() / CACHE_DIR)
        for model in self.models.values():
            model.cache = cache
        try:
            self.started, self.started_at = time.perf_counter(), now()
            runner, batched, stop = self.batch_rounds(pipeline) if self.spec.batch else (None, set(), None)
            outcomes, stop = self.run_instances(pipeline, stop)
            return self.finish(pipeline, outcomes, batched, stop, runner)
        finally:
            if cache is not None and not worker_threads():  # a blocked thread may still use it
                cache.close()

    # -- 1. the data, validated in full before any model is touched ----------------------
    def load_data(self) -> None:
        try:
            source, self.instances = self.spec.instances()
        except DataValidationError as exc:
            raise DataValidationError(f"bad data: {exc}") from None
        for warning in source.warnings:
            events.warning(f"{source.name}: {warning} (the dataset's instances have "
                           f"{DATASET_PRIOR_SESSIONS} prior sessions, each opened by the user)")
        # The data's name is the same for every shard, so shards share a run directory.
        self.data_source = source.name

    # -- 2. the models, each endpoint reached once before any work ------------------------
    def resolve_models(self) -> None:
        spec = self.spec
        set_user_limits(dict(parse_rate_limit(limit) for limit in spec.rate_limit))
        self.models = spec.resolve_models()
        for model in self.models.values():
            model.usage = UsageTracker()  # this run's calls only, in its results.json
        check_models(list(self.models.values()))
        # The servers' stated contexts against the longest requests, before any paid call.
        run_dir = run_dir_for(spec.results_dir, self.models["model"].label, spec.strategy.name)
        check_context({"evaluated": self.models["model"], "evaluator": self.models["evaluator"],
                       "matcher": self.models.get("matcher")}, self.instances, task=spec.task,
                      setting=spec.strategy, recorded=partial(recorded_shown, run_dir, spec.strategy))
        if spec.strategy.uses_model:
            spec.strategy.give_model(StrategyModel(self.models["strategy"]))

    # -- 3. the run directory: settings, data and every instance file checked first -------
    def manifest(self) -> dict:
        model, spec = self.models["model"], self.spec
        setting = spec.strategy
        prompts = steps.prompts_of(spec.task, summaries=setting.summaries,
                                   preference_given=setting.preference_given, prefmatcher=spec.use_matcher)
        if setting.identity is None:  # a built-in strategy's own prompts (memory)
            prompts = [*prompts, *getattr(setting.impl, "prompts", ())]
        manifest = {"model": model.label, "setting": setting.name, "data_source": self.data_source,
                    "data": self.instances.describe(),
                    "prompt_versions": {name: load_prompt(name).version for name in prompts}}
        if setting.spec:  # a user's strategy, loadable from any directory
            manifest["setting_spec"] = setting.spec
        if setting.identity:  # what a user's strategy is: its class, parameters, source's hash
            manifest["setting_identity"] = setting.identity
        # A strategy that reads the labels (the oracle's) is no blind strategy: marked apart.
        manifest["setting_uses_labels"] = setting.uses_labels
        if isinstance(spec.model, str) and spec.model != model.name:
            # How the user named it (a file, a module, a prefix), for commands that rerun it;
            # a server URL's password is masked, as everywhere else on disk.
            manifest["model_spec"] = redact(portable_spec(spec.model))
        if model.overrides:
            manifest["model_name"] = model.name
            manifest["generation_overrides"] = dict(model.overrides)
        return manifest

    def open_run_dir(self) -> Pipeline:
        # A run with generation overrides is another run: its own directory, named by its label.
        run_dir = run_dir_for(self.spec.results_dir, self.models["model"].label, self.spec.strategy.name)
        self.store = RunStore(run_dir, self.manifest())
        pipeline = self.pipeline()
        try:
            existing = self.store.read_manifest()
            self.survey = self.store.survey(self.instances, pipeline.is_finished,
                                            partial(record_problems, scorer=pipeline.scorer))
            changed = self.survey.changed
            if changed:
                names = ", ".join(i for i, _ in changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
                raise RunConflictError(
                    f"{run_dir} holds results of other content for {len(changed)} instance(s) with "
                    f"the same id: {names} (e.g. {changed[0][1]}). Use another --results_dir, or "
                    f"move those files away to evaluate them afresh.")
            self.store.open()  # refuses a directory made with other settings or data
        except BaseException as exc:
            pipeline.close()
            if isinstance(exc, StorageError):
                exc.add_note(f"nothing was run, nothing in {run_dir} was changed")
            raise
        warn_about_run_dir(run_dir, self.survey, endpoint_change(existing, self.models["model"]))
        if existing is None and self.spec.strategy.identity:
            note = other_identities(run_dir, self.spec.strategy)
            if note:
                events.note(note)
        clean_orphan_tmp(self.run_dir)
        events.note(f"{self.run_dir}: {len(self.survey.done)} of {len(self.instances)} instances already done, "
                    f"{len(self.instances) - len(self.survey.done)} to run")
        return pipeline

    # -- 4. batch: the instances to run go through the batch rounds first -----------------
    def batch_rounds(self, pipeline: Pipeline) -> tuple[BatchRunner, set[str], Interrupted | None]:
        done = set(self.survey.done)
        todo = [i for i in self.instances if i.instance_id not in done]
        batched = {i.instance_id for i in todo}
        runner = BatchRunner(self.run_dir / BATCHES)
        try:
            # An LLM-backed strategy's calls are asked online (its code waits for each answer).
            batched_models = [m for role, m in self.models.items() if role != "strategy"]
            run_batch_rounds(self.pipeline, todo, runner, batched_models, n_workers=self.spec.n_workers)
        except KeyboardInterrupt as exc:
            self.signals.second_ends_process()
            stop_workers(pipeline, grace=3.0)
            return runner, batched, Interrupted(
                f"{stop_cause(exc)}: the submitted batches are listed in {runner.state_path}; rerun the "
                f"same command to resume them.", stop_status(exc))
        except BaseException as exc:
            pipeline.close(wait=False)
            if isinstance(exc, StorageError):
                exc.add_note(f"safe: every batch submitted so far is listed in {self.run_dir / BATCHES} (as "
                             f"far as it could be written) and its answers are fetched by a rerun; make room "
                             f"and rerun the same command.")
            raise
        return runner, batched, None

    # -- 5. the instances, on n_workers threads -------------------------------------------
    def run_instances(self, pipeline: Pipeline, stop: BaseException | None) -> tuple[dict[str, InstanceOutcome],
                                                                                    BaseException | None]:
        """Every instance's outcome, and the error that stopped the run, raised once results.json
        is written (after a stop in the batch rounds nothing more is run)."""
        spec, n_selected = self.spec, len(self.instances)
        label = f"{self.models['model'].name} [{spec.strategy.name}]"
        every = spec.progress_every or (0 if sys.stderr.isatty() else max(1, n_selected // 20))
        progress = ProgressLog(n_selected, every, label, workers=spec.n_workers,
                               heartbeat_s=None if sys.stderr.isatty() else HEARTBEAT_S) if every else None
        outcomes: dict[str, InstanceOutcome] = {}

        def tally(instance, outcome: InstanceOutcome) -> None:
            outcomes[instance.instance_id] = outcome
            if outcome.status != "busy" and progress is not None:
                progress.add(outcome.status == "failed", found_done=outcome.already_done)

        try:
            busy = []
            for instance, outcome in iter_with_progress(pipeline.run, self.instances if stop is None else [],
                                                        n_workers=spec.n_workers, desc=label,
                                                        postfix=lambda: progress_postfix(outcomes.values())):
                tally(instance, outcome)
                if outcome.status == "busy":
                    busy.append(instance)
            # Instances another process held: taken up again once it lets go (their finished
            # steps are then read back), for at most config.LOCK_WAIT_S.
            deadline = time.monotonic() + config.LOCK_WAIT_S
            while busy and time.monotonic() < deadline:
                time.sleep(0.2)
                for instance in list(busy):
                    outcome = pipeline.run(instance)
                    tally(instance, outcome)
                    if outcome.status != "busy":
                        busy.remove(instance)
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (utils/stop_signals.py)
            self.signals.second_ends_process()
            events.note(f"\n{stop_cause(exc)}: stopping (a second signal ends the process at once)")
            stop_workers(pipeline, grace=3.0)
            stop = Interrupted(
                f"{stop_cause(exc)}: {sum(o.status != 'busy' for o in outcomes.values())} of {n_selected} "
                f"instances finished in this invocation; every finished step is saved in {self.run_dir}. "
                f"Rerun the same command to resume.", stop_status(exc))
        except ModelConfigurationError as exc:  # a key refused mid-run
            stop_workers(pipeline, grace=3.0)
            stop = exc
        except StorageError as exc:
            # The disk refused a write: every step saved before it is safe; stop rather than
            # pay for answers that cannot be kept.
            stop_workers(pipeline, grace=3.0)
            exc.add_note(self.storage_safe_note(outcomes))
            stop = exc
        else:
            pipeline.close()
        if progress is not None:
            progress.close()
        return outcomes, stop

    def storage_safe_note(self, outcomes: dict) -> str:
        finished = sum(o.status in ("done", "failed", "skipped") for o in outcomes.values())
        return (f"safe: {finished} of {len(self.instances)} instances finished in this invocation, and every "
                f"step saved before the failure, are in {self.run_dir}; make room (or make the directory "
                f"writable) and rerun the same command to resume without asking finished steps again.")

    # -- 6. results.json, and run.json's record of this invocation -------------------------
    def finish(self, pipeline: Pipeline, outcomes: dict, batched: set[str], stop: BaseException | None,
               runner: BatchRunner | None) -> dict:
        if stop is None:
            self.signals.deferring()  # a signal now waits until the results are written
        try:
            results = self.write_results(pipeline, self.invocation_record(outcomes, batched, stop, runner))
        except StorageError as exc:
            if isinstance(stop, StorageError):
                raise stop from None
            exc.add_note(self.storage_safe_note(outcomes))
            raise
        if stop is None and self.signals.received is not None:
            stop = Interrupted(f"{stop_cause(self.signals.received)} after the work was done: the "
                               f"results are written", 128 + self.signals.received)
        if isinstance(stop, Interrupted):
            stop.results, stop.results_path = results, self.run_dir / "results.json"
        if stop is not None:
            raise stop
        return results

    def invocation_record(self, outcomes: dict, batched: set[str], stop: BaseException | None,
                          runner: BatchRunner | None) -> dict:
        """run.json's entry for this invocation (results.json's "this_invocation")."""
        record = {
            "task": self.spec.task, "started": self.started_at,
            "wall_time_s": round(time.perf_counter() - self.started, 2),
            **invocation_counts(len(self.instances), self.survey.done, outcomes, ran_by_batch=batched),
            "interrupted": isinstance(stop, Interrupted),
            # Which server answered each role: the cache keys on it, and a reader of run.json
            # can tell two checkpoints served under one name apart.
            "endpoints": {role: {"model": m.name, "provider": m.provider, "endpoint": m.endpoint()}
                          for role, m in self.models.items()},
        }
        if runner is not None:
            record["batch"] = runner.counts()
        names = {m.name for m in self.models.values()}
        adapted = {name: items for name, items in ADAPTATIONS.snapshot().items() if name in names}
        if adapted:  # what the providers refused and how the requests were sent instead
            record["parameter_adaptations"] = adapted
        return record

    def write_results(self, pipeline: Pipeline, this_invocation: dict) -> dict:
        """results.json: the aggregate of every instance file in the run directory (whatever
        this invocation's task), its usage, and the timings of every invocation so far."""
        store, models = self.store, self.models
        totals = store.record_invocation(this_invocation)
        results = aggregate_records(store.iter_records(), pipeline.scorer, self.spec.task,
                                    self.spec.exclude_filtered)
        results["usage"] = {
            "this_invocation": {role: {"model": m.name, **m.usage.snapshot(m.name)} for role, m in models.items()},
            "recorded": recorded_usage(store.iter_records()),
        }
        results["this_invocation"] = this_invocation
        if "strategy" in models:  # an LLM-backed strategy's own calls, apart from the evaluated model's
            results["memory_cost"] = memory_cost(store.iter_records(), models["strategy"].name)
        matcher = models.get("matcher", models["evaluator"])
        results["settings"] = {
            "model": models["model"].label, "setting": self.spec.strategy.name, "task": results.pop("tasks"),
            "invocation_task": self.spec.task, "uses_labels": self.spec.strategy.uses_labels,
            **({"strategy_model": models["strategy"].label} if "strategy" in models else {}),
            "evaluator": models["evaluator"].label, "matcher": matcher.label,
            "generation_overrides": {role: dict(m.overrides) for role, m in models.items() if m.overrides},
            "scorer": pipeline.scorer, "data_source": self.data_source,
            "data": store.manifest.get("data"), "prompt_versions": store.manifest.get("prompt_versions"),
            "wall_time_s": totals["wall_time_s"], "invocations": totals["invocations"],
        }
        # The released layout keeps results.json; a copy per scorer beside it keeps a
        # PrefMatcher run from hiding the GPT-4o one.
        with store.run_lock():
            store.write_results(results, pipeline.scorer)
        return results
