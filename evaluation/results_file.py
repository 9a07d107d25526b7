"""results.json of a run directory: the aggregate of every instance file (whatever this
invocation's task), its usage, the settings, and run.json's record of each invocation; and
what to tell the user when the file system refused a write."""
from __future__ import annotations

import argparse
from pathlib import Path

from cupid.evaluation.aggregate import aggregate_records, recorded_usage
from cupid.evaluation.pipeline import Evaluation
from cupid.evaluation.store import RunStore


def write_results(store: RunStore, evaluation: Evaluation, args: argparse.Namespace, data_source: str,
                  manifest: dict, this_invocation: dict, roles) -> dict:
    """results.json: the aggregate of every instance file in the run directory (whatever
    this invocation's task), its usage, and the timings of every invocation so far.
    ``roles``: (role, model or None) pairs."""
    totals = store.record_invocation(this_invocation)
    results = aggregate_records(store.iter_records(), evaluation.scorer, args.task)
    results["usage"] = {
        "this_invocation": {role: {"model": m.name, **m.usage.snapshot(m.name)}
                            for role, m in roles if m is not None},
        "recorded": recorded_usage(store.iter_records()),
    }
    results["this_invocation"] = this_invocation
    results["settings"] = {
        "model": evaluation.model.label, "setting": args.setting, "task": results.pop("tasks"),
        "invocation_task": args.task,
        "evaluator": evaluation.evaluator.label, "matcher": evaluation.matcher.label,
        "generation_overrides": {role: dict(m.overrides) for role, m in roles
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


def storage_safe_note(outcomes: dict, n_selected: int, run_dir: Path) -> str:
    """What a run stopped by the file system leaves: what is saved, how to go on."""
    finished = sum(o.status in ("done", "failed", "skipped") for o in outcomes.values())
    return (f"safe: {finished} of {n_selected} instances finished in this invocation, and every "
            f"step saved before the failure, are in {run_dir}; make room (or make the directory "
            f"writable) and rerun the same command to resume without asking finished steps again.")
