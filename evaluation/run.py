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
import sys
import time
from pathlib import Path

from cupid.evaluation.data import download_dataset
from cupid.evaluation.flags import build_parser, error, flag_conflict, setup_logging
from cupid.evaluation.console import print_summary, print_sweep_table
from cupid.evaluation.invocation import (STORAGE_EXIT, Invocation, Refused, Stop, batch_rounds, check_run_dir,
                                   invocation_record, load_data, open_run_dir, resolve_models,
                                   run_instances)
from cupid.evaluation.results_file import storage_safe_note, write_results
from cupid.evaluation.shards import parse_shard
from cupid.evaluation.stopping import exit_now, worker_threads
from cupid.evaluation.store import now
from cupid.evaluation.sweep import sweep_runs
from cupid.utils.benchmark.dataset import DataValidationError
from cupid.utils.io import StorageError
from cupid.utils.models.cache import CACHE_DIR, ResponseCache
from cupid.utils.models.registry import resolve_model
from cupid.utils.models.retry import reset_cancel
from cupid.utils.redact import redact
from cupid.utils.stop_signals import STOP_CODES, SignalGuard, stop_cause, stop_status

def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        setup_logging(args.log_file)
    except StorageError as exc:
        error(str(exc))
        return STORAGE_EXIT
    reset_cancel()
    if args.download_only:
        return download_only(args)
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
        from cupid.evaluation import dry_run
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


def download_only(args: argparse.Namespace) -> int:
    """--download_only: store the hub split's copy for offline runs; no model is needed."""
    if args.data or args.data_dir:
        error("--download_only loads the hub dataset; --data and --data_dir are local already")
        return 2
    try:
        print(download_dataset(args.dataset, args.split, args.revision))
    except DataValidationError as exc:
        error(f"bad data: {exc}")
        return 2
    return 0


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
    """One model and setting into its run directory (evaluation/invocation.py's steps, in
    order); returns the exit status."""
    shared.signals.raising()
    conflict = flag_conflict(args)
    if conflict:
        error(conflict)
        return 2
    try:
        data_source, instances = load_data(args)
        models = resolve_models(args, shared, instances)
        run = check_run_dir(args, models, data_source, instances)
        cache = None if args.no_cache else shared.cache(args.results_dir)
        for m in models.all:
            m.cache = cache
        open_run_dir(run)
        run.started, run.started_at = time.perf_counter(), now()
        runner, batched, stop = batch_rounds(run, shared) if args.batch else (None, set(), None)
    except Refused as exc:
        error(exc.message)
        return exit_now(exc.code, shared.owns_process) if exc.end_process else exc.code
    outcomes, stop = run_instances(run, shared, stop)
    return finish(run, shared, invocation_record(run, outcomes, batched, stop, runner), outcomes, stop)


def finish(run: Invocation, shared: SharedResources, this_invocation: dict, outcomes: dict,
           stop: Stop | None) -> int:
    """results.json written (a signal now waits for it), the summary printed, the exit status."""
    if stop is None:
        shared.signals.deferring()
    try:
        results = write_results(run.store, run.evaluation, run.args, run.data_source, run.manifest,
                                this_invocation, run.models.roles)
    except KeyboardInterrupt as exc:
        return exit_now(stop_status(exc), shared.owns_process)
    except StorageError as exc:
        if stop is not None and stop.code == STORAGE_EXIT:
            print(redact(stop.message), file=sys.stderr)
        else:
            error(f"{exc}\n{storage_safe_note(outcomes, len(run.instances), run.run_dir)}")
        return exit_now(STORAGE_EXIT, shared.owns_process)
    shared.last_results = results
    if stop is None and shared.signals.received is not None:
        stop = Stop(128 + shared.signals.received, f"{stop_cause(shared.signals.received)} after "
                                                    f"the work was done: the results are written")
    if stop is not None:
        if stop.code in STOP_CODES:
            print_summary(results, run.run_dir / "results.json")
        print(redact(stop.message), file=sys.stderr)
        return exit_now(stop.code, shared.owns_process)
    print_summary(results, run.run_dir / "results.json")
    return 1 if this_invocation["ran_failed"] else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as exc:  # during setup, before any instance started
        print(f"\n{stop_cause(exc)} before any work; nothing to resume", file=sys.stderr)
        sys.exit(stop_status(exc))
