"""Evaluate a model on CUPID.

    python -m evaluation.run --model gpt-4.1-nano-2025-04-14 --evaluator gpt-4o-2024-11-20 --n_workers 4
    python -m evaluation.run --model smollm2-135m --evaluator smollm2-135m --data_dir data/sample

Exit status: 0 when every instance was evaluated, 1 when any instance failed (the summary
and results.json say which step failed and why), 2 for bad input or setup (nothing run),
130 when interrupted (rerun the same command to resume).
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import config
from evaluation.data import DataValidationError, InstanceSource
from evaluation.batch_rounds import run_batch_rounds
from evaluation.models.batch import BatchRunner
from evaluation.models.limits import parse_rate_limit, set_user_limits
from evaluation.models.model import (
    ModelConfigurationError,
    ModelError,
    ResponseCache,
    UsageTracker,
    resolve_model,
)
from evaluation.pipeline import TASKS, Evaluation, InstanceOutcome, RunningScores, aggregate
from evaluation.steps import PROMPTS, prompt_version
from evaluation.store import SETTINGS, RunConflictError, RunStore, run_dir_for
from evaluation.sweep import ProgressLog, ShardedInstances, parse_shard, print_sweep_table, sweep_runs
from utils.executor import iter_with_progress

log = logging.getLogger("cupid.evaluation")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m evaluation.run",
        description="Evaluate a model on CUPID: infer the user's contextual preference from "
                    "prior sessions (precision/recall/F1) and/or answer the request (judge score 1-10).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", nargs="+",
                   help="model(s) to evaluate, several for a sweep in one process (one run directory "
                        "each, one summary table at the end): a registered model_name (see evaluation/models/), a hosted "
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
    source.add_argument("--limit", type=int, help="evaluate only the first N instances")
    p.add_argument("--n_workers", type=int, default=4, help="instances evaluated at once (threads)")
    p.add_argument("--timeout", type=float, default=config.REQUEST_TIMEOUT,
                   help="seconds one request may take before it is retried")
    p.add_argument("--max_retries", type=int, default=config.MAX_RETRIES,
                   help="retries of a request after 429/5xx/timeouts/connection errors")
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
    console.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    root.addHandler(console)
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
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
    print(f"instances: {c['instances']} · evaluated {c['evaluated']} · FAILED {c['failed']} · "
          f"skipped {c['skipped']}", file=out)
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


def recorded_usage(store: RunStore) -> dict:
    """Tokens of every finished step in the run directory, summed per model that ran it:
    the run's cost so far, across resumed invocations."""
    from evaluation.models.model import estimate_cost
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.log_file)
    try:
        runs = sweep_runs(args, parser)
        if args.shard:
            parse_shard(args.shard)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
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
    models per (name, role, options); the rate limiters are shared by endpoint anyway."""

    def __init__(self) -> None:
        self.caches: dict[Path, ResponseCache] = {}
        self.models: dict[tuple, object] = {}
        self.last_results: dict | None = None

    def cache(self, results_dir: str) -> ResponseCache:
        path = Path(results_dir).resolve() / ".llm_cache.sqlite"
        if path not in self.caches:
            self.caches[path] = ResponseCache(path)
        return self.caches[path]

    def model(self, spec: str, role: str, **params):
        key = (spec, role, tuple(sorted((k, id(v) if k == "cache" else v) for k, v in params.items())))
        if key not in self.models:
            self.models[key] = resolve_model(spec, role=role, **params)
        return self.models[key]

    def close(self) -> None:
        for cache in self.caches.values():
            cache.close()
        self.caches.clear()


def evaluate_one(args: argparse.Namespace, shared: SharedResources) -> int:
    """One model and setting into its run directory; returns the exit status."""
    if args.setting == "oracle_preference" and args.task != "generation":
        print("error: --setting oracle_preference applies to --task generation only", file=sys.stderr)
        return 2
    if args.n_workers < 1:
        print("error: --n_workers must be at least 1", file=sys.stderr)
        return 2

    # 1. Data, validated in full before any model is touched.
    try:
        if args.data and args.data_dir:
            raise DataValidationError("give --data or --data_dir, not both")
        data_path = args.data or args.data_dir
        instances = InstanceSource(data_path=data_path, dataset=None if data_path else args.dataset,
                                   split=args.split, limit=args.limit)
        instances.validate()
    except DataValidationError as exc:
        print(f"error: bad data: {exc}", file=sys.stderr)
        return 2
    data_source = instances.name  # the same for every shard, so shards share a run directory
    if args.shard:
        instances = ShardedInstances(instances, *parse_shard(args.shard))

    # 2. Models, checked before any work (missing keys, unreachable servers).
    if args.batch and args.no_cache:
        print("error: --batch keeps the batches' answers in the cache; drop --no_cache", file=sys.stderr)
        return 2
    try:
        set_user_limits(dict(parse_rate_limit(spec) for spec in args.rate_limit))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cache = None if args.no_cache else shared.cache(args.results_dir)
    common = {"timeout": args.timeout, "max_retries": args.max_retries, "cache": cache}
    try:
        model = resolve_model(args.model, role="evaluated", **common)
        # The evaluator and matcher are one object for every run of a sweep.
        evaluator = shared.model(args.evaluator, "evaluator", **common)
        matcher = None
        if args.use_matcher:
            matcher = shared.model(f"vllm:{config.PREFMATCHER_MODEL}@{args.matcher_url}",
                                   "matcher", **common)
        for m in filter(None, (evaluator, matcher)):
            m.usage = UsageTracker()  # this run's calls only, in its results.json
        for m in filter(None, (model, evaluator, matcher)):
            m.check()
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    # 3. The run directory.
    needed = {"inference": ["infer", "decompose", "match_prefmatcher" if matcher else "match"],
              "generation": ["generate", "judge"]}
    keys = needed["inference"] * (args.task != "generation") + needed["generation"] * (args.task != "inference")
    if args.setting == "summary":
        keys = [{"infer": "infer_from_summaries", "generate": "generate_from_summaries"}.get(k, k)
                for k in keys] + ["summarize"]
    if args.setting == "oracle_preference":
        keys = [{"generate": "generate_oracle_preference"}.get(k, k) for k in keys]
    run_dir = run_dir_for(args.results_dir, model.name, args.setting)
    manifest = {"model": model.name, "setting": args.setting, "data_source": data_source,
                "prompt_versions": {PROMPTS[k]: prompt_version(k) for k in keys}}
    try:
        store = RunStore(run_dir, manifest).open()
    except (RunConflictError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def make_evaluation() -> Evaluation:
        return Evaluation(model=model, evaluator=evaluator, matcher=matcher, store=store,
                          task=args.task, setting=args.setting, inner_workers=args.n_workers)

    if args.batch:
        try:
            run_batch_rounds(make_evaluation, instances, BatchRunner(run_dir / "batches.json"),
                             [m for m in (model, evaluator, matcher) if m is not None],
                             n_workers=args.n_workers)
        except KeyboardInterrupt:
            print(f"\ninterrupted: the submitted batches are listed in {run_dir / 'batches.json'}; "
                  f"rerun the same command to resume them.", file=sys.stderr)
            return 130
        except ModelError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    evaluation = make_evaluation()
    running = RunningScores()

    def evaluate(instance) -> InstanceOutcome:
        try:
            outcome = evaluation.evaluate(instance)
        except ModelConfigurationError:
            raise
        except Exception as exc:  # recorded and counted as a failure, never dropped
            log.exception("%s: unexpected error", instance.instance_id)
            outcome = InstanceOutcome(instance.instance_id, instance.instance_type, "failed",
                                      failures=[("internal", f"{type(exc).__name__}: {exc}")])
        running.add(outcome)
        if progress is not None:
            progress.add(outcome.status == "failed")
        return outcome

    every = args.progress_every or (0 if sys.stderr.isatty() else max(1, len(instances) // 20))
    progress = ProgressLog(len(instances), every, f"{model.name} [{args.setting}]") if every else None
    started = time.perf_counter()
    outcomes: list[InstanceOutcome] = []
    try:
        for _, outcome in iter_with_progress(evaluate, instances, n_workers=args.n_workers,
                                             desc=f"{model.name} [{args.setting}]",
                                             postfix=running.postfix):
            outcomes.append(outcome)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {len(outcomes)} of {len(instances)} instances finished; every finished "
              f"step is saved in {run_dir}. Rerun the same command to resume.", file=sys.stderr)
        return 130
    except ModelConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        evaluation.close()

    results = aggregate(outcomes, args.task)
    results["usage"] = {
        "this_invocation": {role: {"model": m.name, **m.usage.snapshot(m.name)}
                            for role, m in (("model", model), ("evaluator", evaluator),
                                            ("matcher", matcher)) if m is not None},
        "recorded": recorded_usage(store),
    }
    results["settings"] = {
        "model": model.name, "setting": args.setting, "task": args.task,
        "evaluator": evaluator.name, "matcher": (matcher or evaluator).name,
        "scorer": evaluation.scorer, "data_source": data_source,
        "prompt_versions": manifest["prompt_versions"],
        "wall_time_s": round(time.perf_counter() - started, 2),
    }
    # The released layout keeps results.json (the latest invocation); a copy per scorer
    # beside it keeps a PrefMatcher run from hiding the GPT-4o one.
    path = store.write_results(results, evaluation.scorer)
    print_summary(results, path)
    shared.last_results = results
    return 1 if results["counts"]["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
