"""Per-sample rows of a results directory: one flat row per (model, setting, scorer,
instance), for sharing and for analysis in pandas or ``datasets`` (docs/results_format.md,
"Per-sample export").

The rows are read the way the report reads a results directory (evaluation/report/results.py:
run directories found by their run.json, runs of the same model and setting merged, each
task's per-instance outcome under each scorer), so the export and the report never disagree
on what an instance's status is. A step that failed is a row whose ``*_status`` is
``"failed"`` with its ``*_error``; its metrics are null, never 0.

Instance files do not hold the request, context factor or ground truth; they come from the
data the runs name in run.json (or ``data_paths``), else from what the steps sent.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from . import steps
from .aggregate import flagged_tasks
from .report.results import Run, load_runs, outcome
from ..utils.models.usage import cost_of

# Instance-level steps (shared by every scorer of the instance), then the scorer's steps: those
# that enter a task's result (the error type has its own file, report/error_table.py).
INSTANCE_STEPS = tuple(s.name for s in steps.STEPS if not s.per_scorer and s.tasks)
SCORER_STEPS = tuple(s.name for s in steps.STEPS if s.per_scorer and s.tasks)
STEPS = INSTANCE_STEPS + SCORER_STEPS
STEP_FIELDS = ("status", "error", "model", "prompt_tokens", "completion_tokens", "cost_usd")


def sample_rows(results_dir: str | Path, *, data_paths: Iterable[str | Path] | None = None,
                notes: list[str] | None = None) -> list[dict]:
    """One dict per (model, setting, scorer, instance) under ``results_dir`` (a results
    directory or one run directory). ``data_paths``: the instances' data, for the request,
    context factor and ground truth (default: each run.json's data source). ``notes``
    collects what could not be read (directories left out, data not found)."""
    from .report.instance_data import load_instance_data

    notes = [] if notes is None else notes
    runs = load_runs(results_dir, notes)
    instances, data_notes = load_instance_data(runs, Path(results_dir), data_paths)
    notes.extend(data_notes)
    rows = []
    for run in runs:
        notes.extend(run.warnings)
        scorers = run.scorers or [None]
        for scorer in scorers:
            statuses = {task: _task_statuses(run, scorer, task) for task in ("inference", "generation")}
            for instance_id in run.ids():
                rows.append(_row(run, scorer, instance_id, instances.get(instance_id), statuses))
    return rows


def _task_statuses(run: Run, scorer: str | None, task: str) -> dict[str, tuple[str, str | None]]:
    """instance id -> (status, error) of ``task`` under ``scorer``; empty when the run did
    not perform the task for this scorer."""
    if scorer is None or not run.has_task(task, scorer):
        return {}
    result = outcome(run, scorer, task)
    statuses: dict[str, tuple[str, str | None]] = {i: ("done", None) for i in result.values}
    statuses.update({i: ("failed", f"{step}: {error}") for i, (step, error) in result.failed.items()})
    statuses.update({i: ("unfinished", None) for i in result.missing})
    statuses.update({i: ("skipped", None) for i in result.skipped})
    return statuses


def _row(run: Run, scorer: str | None, instance_id: str, instance, statuses: dict) -> dict:
    data = run.instances[instance_id]
    model_steps = _dict(data.get("steps"))
    evaluation = _dict(_dict(data.get("evaluations")).get(scorer)) if scorer else {}
    scorer_steps = _dict(evaluation.get("steps"))
    all_steps = {name: _dict(model_steps.get(name)) for name in INSTANCE_STEPS}
    all_steps.update({name: _dict(scorer_steps.get(name)) for name in SCORER_STEPS})

    row: dict[str, Any] = {
        "model": run.model, "setting": run.setting, "scorer": scorer,
        "evaluator": evaluation.get("evaluator"), "matcher": evaluation.get("matcher"),
        "instance_id": instance_id, "persona_id": data.get("persona_id"),
        "instance_type": run.instance_type(instance_id),
    }
    row.update(_ground_truth(instance, all_steps))
    infer_out = _output(all_steps[steps.INFER.name])
    row["inferred_analysis"] = infer_out.get("analysis")
    row["inferred_preference"] = infer_out.get("preference")
    row["inferred_checklist"] = _list(_output(all_steps[steps.DECOMPOSE.name]).get("checklist"))
    row["precision_labels"] = _labels(all_steps[steps.MATCH_PRECISION.name])
    row["recall_labels"] = _labels(all_steps[steps.MATCH_RECALL.name])

    flagged = flagged_tasks(data, scorer) if scorer else {}
    for task in ("inference", "generation"):
        status, error = statuses[task].get(instance_id, (None, None))
        row[f"{task}_status"], row[f"{task}_error"] = status, error
        # "infer: filtered": the result was read from an answer the provider filtered or the
        # model refused (null otherwise).
        row[f"{task}_flagged"] = flagged.get(task) if status == "done" else None
    counts = _dict(evaluation.get("inference")) if row["inference_status"] == "done" else {}
    for key in ("precision", "recall", "f1", "n_predicted_matched", "n_true_matched"):
        row[key] = _number(counts.get(key))
    for key in ("n_predicted", "n_true"):
        row[key] = _number(counts.get(key), int)
    row["response"] = _output(all_steps[steps.GENERATE.name]).get("response")
    judge = _output(all_steps[steps.JUDGE.name])
    row["judge_score"] = _number(_dict(evaluation.get("generation")).get("score")) \
        if row["generation_status"] == "done" else None
    row["judge_analysis"] = judge.get("analysis")

    recorded = []
    for name in STEPS:
        fields = _step_fields(all_steps[name])
        row.update({f"{name}_{key}": fields[key] for key in STEP_FIELDS})
        if fields["status"] is not None:
            recorded.append(fields)
    row["prompt_tokens"] = sum(f["prompt_tokens"] or 0 for f in recorded)
    row["completion_tokens"] = sum(f["completion_tokens"] or 0 for f in recorded)
    # A row with a step of an unpriced model has no total cost rather than an understated one.
    unpriced = any(f["cost_usd"] is None and (f["prompt_tokens"] or f["completion_tokens"]) for f in recorded)
    row["cost_usd"] = None if unpriced else round(sum(f["cost_usd"] or 0 for f in recorded), 6)
    return row


def _ground_truth(instance, recorded: dict[str, dict]) -> dict:
    """Request, context factor, preference and checklist: from the data when it was found,
    else what the steps sent (the request and preference travel in their values)."""
    if instance is not None:
        return {"request": instance.current_request,
                "context_factor": instance.current_context_factor,
                "preference": instance.current_contextual_preference,
                "checklist": list(instance.current_checklist)}
    values = {name: _dict(_dict(step.get("sent")).get("values")) for name, step in recorded.items()}
    request = next((v for v in (values[steps.INFER.name].get("curr_request"),
                                values[steps.GENERATE.name].get("curr_request"),
                                values[steps.JUDGE.name].get("user_request")) if isinstance(v, str)), None)
    preference = next((v for v in (values[steps.MATCH_PRECISION.name].get("preference"),
                                   values[steps.JUDGE.name].get("preference")) if isinstance(v, str)), None)
    checklist = [r.get("entry") for r in _list(_output(recorded[steps.MATCH_RECALL.name]).get("results")) or []
                 if isinstance(r, dict)] or None
    return {"request": request, "context_factor": None, "preference": preference, "checklist": checklist}


def _step_fields(step: dict) -> dict:
    if not step:
        return dict.fromkeys(STEP_FIELDS)
    usage = _dict(step.get("usage"))
    prompt, completion = _number(usage.get("prompt_tokens"), int), _number(usage.get("completion_tokens"), int)
    # A hand-edited file may hold anything: only whole numbers are priced.
    cost = cost_of(step.get("model"), {k: _number(v, int) or 0 for k, v in usage.items()}) if usage else None
    return {"status": step.get("status"), "error": step.get("error"), "model": step.get("model"),
            "prompt_tokens": prompt, "completion_tokens": completion, "cost_usd": cost}


def _labels(step: dict) -> list[str] | None:
    results = _list(_output(step).get("results"))
    return [str(r.get("label")) for r in results if isinstance(r, dict)] if results is not None else None


def _output(step: dict) -> dict:
    return _dict(step.get("output")) if step.get("status") == "done" else {}


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list | None:
    return list(value) if isinstance(value, (list, tuple)) else None


def _number(value: Any, kind: type = float) -> float | int | None:
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else kind(value)
