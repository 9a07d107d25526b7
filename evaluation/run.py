"""Evaluate a model on CUPID.

    python -m evaluation.run --model gpt-4.1-nano-2025-04-14 --evaluator gpt-4o-2024-11-20 --n_workers 4
    python -m evaluation.run --model smollm2-135m --evaluator smollm2-135m --data_dir data/sample

Exit status: 0 when every instance was evaluated, 1 when any instance failed (the summary
and results.json say which step failed and why), 2 for bad input or setup (nothing run and
nothing written) or a key the server refused mid-run, 130 when interrupted (rerun the same
command to resume).

Several invocations may share a run directory at once (other tasks, shards, machines on a
shared disk): each instance is worked on by one process at a time, and results.json is the
aggregate of every instance file in the directory.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

import config
from evaluation.data import DATASET_PRIOR_SESSIONS, DataValidationError, InstanceSource
from utils.models.cache import ResponseCache
from utils.models.errors import ModelConfigurationError, ModelError, RunCancelled
from utils.models.registry import check_models, resolve_model
from utils.models.retry import cancel_all, reset_cancel
from utils.models.usage import UsageTracker
from evaluation.batch_rounds import run_batch_rounds
from utils.models.batch import BatchRunner
from utils.models.limits import parse_rate_limit, set_user_limits
from evaluation.pipeline import TASKS, Evaluation, InstanceOutcome, RunningScores, aggregate_records
from evaluation.steps import PROMPTS, prompt_version
from evaluation.store import (
    BATCHES,
    SETTINGS,
    CorruptRunFile,
    RunConflictError,
    RunStore,
    now,
    run_dir_for,
)
from evaluation.sweep import ProgressLog, ShardedInstances, parse_shard, print_sweep_table, sweep_runs
from utils.cli import Parser, generation_params, non_negative_int, positive_float, positive_int
from utils.executor import iter_with_progress
from utils.io import clean_orphan_tmp
from utils.redact import RedactingFormatter, redact

log = logging.getLogger("cupid.evaluation")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m evaluation.run",
        description="Evaluate a model on CUPID: infer the user's contextual preference from "
                    "prior sessions (precision/recall/F1) and/or answer the request (judge score 1-10).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", nargs="+",
                   help="model(s) to evaluate, several for a sweep in one process (one run directory "
                        "each, one summary table at the end): a registered model_name (see utils/models/), a hosted "
                        "name (gpt-*/o1*/o3*/o4* → OpenAI, claude-* → Anthropic, gemini-* → Google, "
                        "org/name → Together), a prefixed name (openai:, anthropic:, together:, google:, "
                        "vllm:NAME[@URL], local-server:NAME[@URL]), or smollm2-135m (embedded, offline)")
    p.add_argument("--evaluator", default=config.DEFAULT_EVALUATOR,
                   help="model that decomposes the inferred preference, matches checklists (unless "
                        "--use_matcher) and judges responses; temperature 0")
    p.add_argument("--use_matcher", action="store_true",
                   help=f"match checklists with PrefMatcher-7B ({config.PREFMATCHER_MODEL}) served by an "
                        "OpenAI-compatible server (vLLM) instead of the evaluator")
    p.add_argument("--matcher_url", default=config.PREFMATCHER_BASE_URL,
                   help="base URL of the PrefMatcher server (also CUPID_PREFMATCHER_URL)")
    p.add_argument("--task", choices=TASKS, default="inference",
                   help="inference: infer the preference; generation: answer the request; both")
    p.add_argument("--setting", choices=SETTINGS, default="default",
                   help="default: all 8 prior sessions; oracle: only the sessions with the current "
                        "preference; summary: summarize each session first (Figure 23) and work from the "
                        "summaries; oracle_preference: generation given the true preference. Each "
                        "setting has its own results directory")
    p.add_argument("--results_dir", default="results",
                   help="results go to RESULTS_DIR/<model>/ (and /<setting>/ for other settings)")
    source = p.add_argument_group("data (default: the Hugging Face dataset)")
    source.add_argument("--data_dir", help="a directory of instance files (.json/.jsonl/.parquet), e.g. "
                                           "data/sample or the output directory of synthesis.run")
    source.add_argument("--data", help="one data file: .jsonl, .json or .parquet in the dataset's schema")
    source.add_argument("--dataset", default=config.HF_DATASET, help="Hugging Face dataset name")
    source.add_argument("--split", default=config.HF_SPLIT, help="dataset split")
    source.add_argument("--limit", type=positive_int,
                        help="evaluate only the first N instances (every row is still validated)")
    p.add_argument("--n_workers", type=positive_int, default=4, help="instances evaluated at once (threads)")
    p.add_argument("--timeout", type=positive_float, default=config.REQUEST_TIMEOUT,
                   help="seconds one request may take before it is retried")
    p.add_argument("--max_retries", type=non_negative_int, default=config.MAX_RETRIES,
                   help="retries of a request after 429/5xx/timeouts/connection errors (0: none)")
    gen = p.add_argument_group(
        "generation overrides (the run is then not the benchmark's default: its directory and "
        "scorer are named after them, e.g. results/M[temperature=0.2]/, and run.json records them)")
    gen.add_argument("--seed", type=non_negative_int, default=None,
                     help="sent with every request of every role to providers that take a seed "
                          "(OpenAI, Together, Google, vLLM, the embedded model; not Anthropic)")
    gen.add_argument("--model_args", type=generation_params, default=None, metavar="K=V,...",
                     help="the evaluated model's temperature, max_tokens or seed, replacing what "
                          "each step asks for, e.g. temperature=0.2,max_tokens=1024")
    gen.add_argument("--evaluator_args", type=generation_params, default=None, metavar="K=V,...",
                     help="the same for the evaluator (decompose, match, judge)")
    gen.add_argument("--matcher_args", type=generation_params, default=None, metavar="K=V,...",
                     help="the same for PrefMatcher (with --use_matcher)")
    p.add_argument("--no_cache", action="store_true",
                   help="do not keep LLM answers in RESULTS_DIR/.llm_cache.sqlite (the cache lets a "
                        "rerun replay calls that finished, and lets settings share identical calls)")
    p.add_argument("--batch", action="store_true",
                   help="send the OpenAI, Anthropic, Together and Gemini models' calls (evaluated model and evaluator) "
                        "through the providers' batch APIs at half price, in rounds; batch ids are kept "
                        "in the run directory's batches.json, so a rerun resumes them")
    p.add_argument("--rate_limit", action="append", default=[], metavar="[MODEL=]tpm=N,rpm=N,in_flight=N",
                   help="limits to keep on an endpoint (all endpoints, or MODEL's) besides those the "
                        "provider states in its rate-limit headers; repeatable")
    p.add_argument("--sweep", metavar="FILE.yaml",
                   help="a YAML file listing the runs of a sweep (models, settings, options); see "
                        "evaluation/sweep.py")
    p.add_argument("--shard", metavar="I/N",
                   help="evaluate only shard I of N (1 <= I <= N): the instances whose id hashes to I, "
                        "the same split on every machine; shards may share one results directory")
    p.add_argument("--progress_every", type=int, default=0, metavar="K",
                   help="log a progress line (counts, rate, ETA) every K instances; by default every "
                        "~5%% when stderr is not a terminal (nohup, SLURM, CI), never when it is")
    p.add_argument("--log_file", help="also write a detailed log here")
    return p


def setup_logging(log_file: str | None) -> None:
    root = logging.getLogger("cupid")
    root.setLevel(logging.INFO)
    root.handlers.clear()
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.ERROR)
    console.setFormatter(RedactingFormatter("%(levelname)s %(message)s"))
    root.addHandler(console)
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file, encoding="utf-8")
        handler.setLevel(logging.INFO)
        handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        root.addHandler(handler)


def _fmt(value, digits: int = 3) -> str:
    return "  -  " if value is None else f"{value:.{digits}f}"


def print_summary(results: dict, path: Path, out=None) -> None:
    out = out or sys.stdout
    s = results["settings"]
    print(f"\nCUPID · model {s['model']} · setting {s['setting']} · task {s['task']} · "
          f"scorer {s['scorer']}", file=out)
    rows = [("all instances", results)] + list(results["by_instance_type"].items())
    print(f"{'':18}{'P':>7}{'R':>7}{'F1':>7}{'judge':>8}{'n_inf':>7}{'n_gen':>7}", file=out)
    for name, block in rows:
        inf = block.get("inference") or {}
        gen = block.get("generation") or {}
        print(f"{name:18}{_fmt(inf.get('precision')):>7}{_fmt(inf.get('recall')):>7}"
              f"{_fmt(inf.get('f1')):>7}{_fmt(gen.get('average_score'), 2):>8}"
              f"{block.get('inference_n_instances', 0) if inf else '-':>7}"
              f"{gen.get('n_instances', '-') if gen else '-':>7}", file=out)
    if results.get("inference_macro"):
        m = results["inference_macro"]
        print(f"macro (per-instance mean): P {_fmt(m['precision'])}  R {_fmt(m['recall'])}  "
              f"F1 {_fmt(m['f1'])}", file=out)
    c = results["counts"]
    print(f"instances in the run directory: {c['instances']} · evaluated {c['evaluated']} · "
          f"FAILED {c['failed']} · skipped {c['skipped']}"
          + (f" · unfinished {c['unfinished']}" if c.get("unfinished") else ""), file=out)
    this = results.get("this_invocation")
    if this:
        print(f"this invocation: found done {this['found_done']} · ran {this['ran']} "
              f"({this['ran_failed']} failed) · remaining {this['remaining']}"
              + (f" ({this['in_progress_elsewhere']} in progress elsewhere)"
                 if this["in_progress_elsewhere"] else "")
              + f" · {this['wall_time_s']:.1f} s (all invocations {s['wall_time_s']:.1f} s)", file=out)
    for step, reasons in c["failures_by_step"].items():
        for reason, n in reasons.items():
            print(f"  failed at {step} ×{n}: {reason}", file=out)
    for role, usage in results["usage"]["this_invocation"].items():
        cost = usage.get("estimated_cost_usd")
        print(f"{role}: {usage['model']} · {usage['calls']} calls ({usage['batch_calls']} in batches, "
              f"{usage['cache_hits']} cached, "
              f"{usage['retries']} retries, {usage['failed_calls']} failed) · "
              f"{usage['prompt_tokens']}+{usage['completion_tokens']} tokens"
              + (f" · ~${cost:.4f}" if cost is not None else ""), file=out)
    print(f"results: {path}", file=out)


def bundled_path(path: str | None) -> str | None:
    """A relative data path that does not exist here but names a file shipped with the
    project (``data/sample``) resolves to the installed copy, so the README's commands work
    from any directory."""
    if path is None or Path(path).is_absolute() or Path(path).exists():
        return path
    shipped = config.ROOT / path
    return str(shipped) if shipped.exists() else path


def role_overrides(args: argparse.Namespace) -> dict[str, dict]:
    """Each role's generation overrides: --seed for every role, then the role's own
    --*_args (which win). Empty when the user chose none: the benchmark's parameters."""
    seed = {} if args.seed is None else {"seed": args.seed}
    return {"evaluated": {**seed, **(args.model_args or {})},
            "evaluator": {**seed, **(args.evaluator_args or {})},
            "matcher": {**seed, **(args.matcher_args or {})}}


def recorded_usage(store: RunStore) -> dict:
    """Tokens of every finished step in the run directory, summed per model that ran it:
    the run's cost so far, across resumed invocations."""
    from utils.models.usage import estimate_cost
    totals: dict[str, dict] = {}

    def add(step: dict | None) -> None:
        if not step or not step.get("usage") or not step.get("model"):
            return
        entry = totals.setdefault(step["model"], {"steps": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                  "batch_prompt_tokens": 0, "batch_completion_tokens": 0})
        entry["steps"] += 1
        for k in ("prompt_tokens", "completion_tokens", "batch_prompt_tokens", "batch_completion_tokens"):
            entry[k] += step["usage"].get(k, 0)

    for record in store.iter_records():
        for step in record.get("steps", {}).values():
            add(step)
        for evaluation in record.get("evaluations", {}).values():
            for step in evaluation.get("steps", {}).values():
                add(step)
    for name, entry in totals.items():
        entry["estimated_cost_usd"] = estimate_cost(name, entry["prompt_tokens"], entry["completion_tokens"],
                                                    entry["batch_prompt_tokens"],
                                                    entry["batch_completion_tokens"])
    return totals


def error(message: str) -> None:
    """One line on stderr, with every known key redacted."""
    print(redact(f"error: {message}"), file=sys.stderr)


def _worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate()
            if t is not threading.current_thread() and not t.daemon and t.is_alive()]


def _stop_workers(evaluation: Evaluation, grace: float) -> bool:
    """Tell every call to stop and give worker threads ``grace`` seconds to return; True
    when they all did. Threads cannot be killed: one blocked in a hung request is left."""
    cancel_all()
    evaluation.close(wait=False)
    deadline = time.monotonic() + grace
    for thread in _worker_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    return not _worker_threads()


def _exit_now(code: int) -> int:
    """Return ``code``, or end the process at once when worker threads are still blocked
    (the interpreter would otherwise wait for them at exit)."""
    if _worker_threads():
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)
    return code


def _second_interrupt(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    os.write(2, b"\ninterrupted again: stopping at once\n")
    os._exit(130)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.log_file)
    reset_cancel()
    try:
        runs = sweep_runs(args, parser)
        if args.shard:
            parse_shard(args.shard)
    except ValueError as exc:
        error(str(exc))
        return 2
    shared = SharedResources()
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
            if code == 130:
                break
        print_sweep_table(rows)
        return max(code for _, _, code in rows)
    finally:
        shared.close()


class SharedResources:
    """What the runs of a sweep share: the response cache per results directory and the
    evaluator and matcher per (name, role, options); the rate limiters are shared by
    endpoint anyway."""

    def __init__(self) -> None:
        self.caches: dict[Path, ResponseCache] = {}
        self.models: dict[tuple, object] = {}
        self.last_results: dict | None = None

    def cache(self, results_dir: str) -> ResponseCache:
        path = Path(results_dir).resolve() / ".llm_cache.sqlite"
        if path not in self.caches:
            cache = self.caches[path] = ResponseCache(path)
            if cache.moved_aside:
                print(f"warning: {cache.path}: not a usable cache ({cache.moved_aside[1]}); moved "
                      f"to {cache.moved_aside[0].name} and started afresh", file=sys.stderr)
        return self.caches[path]

    def model(self, spec: str, role: str, **params):
        key = (spec, role, repr(sorted(params.items())))
        if key not in self.models:
            self.models[key] = resolve_model(spec, role=role, **params)
        return self.models[key]

    def close(self) -> None:
        if _worker_threads():  # threads still blocked after an interrupt may use a cache
            return
        for cache in self.caches.values():
            cache.close()
        self.caches.clear()


def evaluate_one(args: argparse.Namespace, shared: SharedResources) -> int:
    """One model and setting into its run directory; returns the exit status."""
    if args.setting == "oracle_preference" and args.task != "generation":
        error("--setting oracle_preference applies to --task generation only")
        return 2
    if args.matcher_args and not args.use_matcher:
        error("--matcher_args needs --use_matcher")
        return 2

    # 1. Data, validated in full before any model is touched.
    try:
        if args.data and args.data_dir:
            raise DataValidationError("give --data or --data_dir, not both")
        data_path = bundled_path(args.data or args.data_dir)
        instances = InstanceSource(data_path=data_path, dataset=None if data_path else args.dataset,
                                   split=args.split, limit=args.limit)
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
    if args.batch and args.no_cache:
        error("--batch keeps the batches' answers in the cache; drop --no_cache")
        return 2
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
        store.read_manifest()
        survey = store.survey(instances, evaluation.is_finished)
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
    for path, target, reason in survey.moved_aside:
        print(redact(f"warning: {path}: {reason}; moved to {target.name}, the instance is "
                     f"evaluated afresh"), file=sys.stderr)

    cache = None if args.no_cache else shared.cache(args.results_dir)
    for m in models:
        m.cache = cache
    store.open()
    clean_orphan_tmp(run_dir)
    n_selected = len(instances)
    print(f"{run_dir}: {len(survey.done)} of {n_selected} instances already done, "
          f"{len(survey.todo)} to run", file=sys.stderr)

    if args.batch:
        def make_evaluation() -> Evaluation:
            return Evaluation(model=model, evaluator=evaluator, matcher=matcher, store=store,
                              task=args.task, setting=args.setting, inner_workers=args.n_workers)

        todo = set(survey.todo)
        try:
            run_batch_rounds(make_evaluation, [i for i in instances if i.instance_id in todo],
                             BatchRunner(run_dir / BATCHES), models, n_workers=args.n_workers)
        except KeyboardInterrupt:
            evaluation.close()
            print(f"\ninterrupted: the submitted batches are listed in {run_dir / 'batches.json'}; "
                  f"rerun the same command to resume them.", file=sys.stderr)
            return _exit_now(130)
        except ModelError as exc:
            evaluation.close()
            error(str(exc))
            return 2

    running = RunningScores()

    def evaluate(instance) -> InstanceOutcome:
        try:
            outcome = evaluation.evaluate(instance)
        except (ModelConfigurationError, RunCancelled):
            raise
        except Exception as exc:  # recorded and counted as a failure, never dropped
            log.exception("%s: unexpected error", instance.instance_id)
            outcome = InstanceOutcome(instance.instance_id, instance.instance_type, "failed",
                                      failures=[("internal", redact(f"{type(exc).__name__}: {exc}"))])
        if outcome.status != "busy":
            running.add(outcome)
            if progress is not None:
                progress.add(outcome.status == "failed")
        return outcome

    every = args.progress_every or (0 if sys.stderr.isatty() else max(1, n_selected // 20))
    progress = ProgressLog(n_selected, every, f"{model.name} [{args.setting}]") if every else None

    started = time.perf_counter()
    started_at = now()
    outcomes: dict[str, InstanceOutcome] = {}
    busy: list = []
    stop_code, stop_message = None, None
    try:
        for instance, outcome in iter_with_progress(evaluate, instances, n_workers=args.n_workers,
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
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, _second_interrupt)
        print("\ninterrupted: stopping (press Ctrl-C again to end at once)", file=sys.stderr)
        _stop_workers(evaluation, grace=3.0)
        stop_code = 130
        stop_message = (f"interrupted: {sum(o.status != 'busy' for o in outcomes.values())} of "
                        f"{n_selected} instances finished in this invocation; every finished step "
                        f"is saved in {run_dir}. Rerun the same command to resume.")
    except ModelConfigurationError as exc:
        _stop_workers(evaluation, grace=3.0)
        stop_code, stop_message = 2, f"error: {exc}"
    else:
        evaluation.close()
    wall = round(time.perf_counter() - started, 2)

    found_done = set(survey.done) | {i for i, o in outcomes.items() if o.already_done}
    ran = [o for i, o in outcomes.items() if o.status != "busy" and i not in found_done]
    finished_now = {i for i, o in outcomes.items() if o.status in ("done", "skipped")}
    this_invocation = {
        "task": args.task, "started": started_at, "wall_time_s": wall,
        "instances": n_selected, "found_done": len(found_done), "ran": len(ran),
        "ran_failed": sum(o.status == "failed" for o in ran),
        "remaining": n_selected - len(finished_now | found_done),
        "in_progress_elsewhere": len(busy),
        "interrupted": stop_code == 130,
    }
    try:
        results = write_results(store, evaluation, args, data_source, manifest, this_invocation,
                                models=(("model", model), ("evaluator", evaluator), ("matcher", matcher)))
    except KeyboardInterrupt:
        return _exit_now(130)
    shared.last_results = results
    if stop_code is not None:
        print(redact(stop_message), file=sys.stderr)
        return _exit_now(stop_code)
    print_summary(results, store.run_dir / "results.json")
    return 1 if this_invocation["ran_failed"] else 0


def write_results(store: RunStore, evaluation: Evaluation, args, data_source: str, manifest: dict,
                  this_invocation: dict, models) -> dict:
    """results.json: the aggregate of every instance file in the run directory (whatever
    this invocation's task), its usage, and the timings of every invocation so far."""
    totals = store.record_invocation(this_invocation)
    results = aggregate_records(store.iter_records(), evaluation.scorer, args.task)
    results["usage"] = {
        "this_invocation": {role: {"model": m.name, **m.usage.snapshot(m.name)}
                            for role, m in models if m is not None},
        "recorded": recorded_usage(store),
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
    except KeyboardInterrupt:  # during setup, before any instance started
        print("\ninterrupted before any work; nothing to resume", file=sys.stderr)
        sys.exit(130)
