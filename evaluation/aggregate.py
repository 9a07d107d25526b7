"""A run's aggregate: each instance file's outcome for one scorer, and results.json's
metrics over them (the released micro-pooled schema, macro, per type, failures, how far the
run is from the release's scoring) and its recorded usage; the running scores of the
progress bar.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

from . import release as release_parsing, steps
from .session_recall import session_selection
from .store import step_record
from .metrics import (InferenceCounts, generation_problem, generation_summary, inference_problem,
                      macro_inference, mean, micro_inference, read_generation, read_inference)
from ..utils.dataset import INSTANCE_TYPES
from ..utils.models.endings import ENDINGS, WITHHOLDING
from ..utils.models.usage import TOKEN_FIELDS, cost_of


@dataclass
class InstanceOutcome:
    instance_id: str
    instance_type: str
    status: str  # "done" | "failed" | "skipped" | "busy" (locked by another process) | "unfinished"
    inference: InferenceCounts | None = None
    generation_score: float | None = None
    failures: list[tuple[str, str]] = field(default_factory=list)
    skip_reason: str | None = None
    # Per task, what the released harness would have done with this instance
    # (release_parsing.OUTCOMES: same / differs / zero / drop).
    release: dict = field(default_factory=dict)
    already_done: bool = False  # every step it needs was on disk when its lock was taken
    # Per task, the step whose value was read from a filtered or refused answer and how it
    # ended ("infer: filtered"): its scores are marked, and left out with exclude_filtered.
    flagged: dict = field(default_factory=dict)


def _short(reason: str, limit: int = 160) -> str:
    reason = " ".join(reason.split())
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


def aggregate(outcomes: Iterable[InstanceOutcome], task: str, exclude_filtered: bool = False) -> dict:
    """results.json's metrics: the released micro-pooled schema, then macro and per type.
    ``exclude_filtered``: a task's results read from a filtered or refused answer are left
    out of its numbers (they are counted under ``counts.flagged`` either way)."""
    outcomes = list(outcomes)

    def kept(o: InstanceOutcome, name: str) -> bool:
        return not (exclude_filtered and name in o.flagged)

    def block(group: Sequence[InstanceOutcome]) -> dict:
        counts = [o.inference for o in group if o.inference is not None and kept(o, "inference")]
        scores = [o.generation_score for o in group
                  if o.generation_score is not None and kept(o, "generation")]
        out: dict = {}
        if task in ("inference", "both"):
            out["inference"] = {k: v for k, v in micro_inference(counts).items() if k != "n_instances"}
            out["inference_macro"] = macro_inference(counts)
            out["inference_n_instances"] = len(counts)
        if task in ("generation", "both"):
            out["generation"] = generation_summary(scores)
        return out

    results = block(outcomes)
    results["by_instance_type"] = {
        t: block([o for o in outcomes if o.instance_type == t]) for t in INSTANCE_TYPES
        if any(o.instance_type == t for o in outcomes)}
    failures: dict[str, Counter] = defaultdict(Counter)
    for o in outcomes:
        for step, reason in o.failures:
            failures[step][_short(reason)] += 1
    # How far the run is from the release's scoring: per task, the instances that the
    # released harness would have scored 0, skipped, or read differently
    # (evaluation/release.py, docs/release_parsing.md).
    tasks = [t for t in ("inference", "generation") if task in (t, "both")]
    for key, kind in (("release_would_score_zero", "zero"), ("release_would_drop", "drop"),
                      ("release_would_differ", "differs")):
        results[key] = {t: sum(o.release.get(t) == kind for o in outcomes) for t in tasks}
    results["counts"] = {
        "instances": len(outcomes),
        "evaluated": sum(o.status == "done" for o in outcomes),
        "failed": sum(o.status == "failed" for o in outcomes),
        "skipped": sum(o.status == "skipped" for o in outcomes),
        "failures_by_step": {step: dict(c) for step, c in failures.items()},
        "skip_reasons": dict(Counter(o.skip_reason for o in outcomes if o.skip_reason)),
        # Per task, results read from a filtered or refused answer (endings.py), by step.
        "flagged": {t: dict(Counter(o.flagged[t] for o in outcomes if t in o.flagged)) for t in tasks},
        "exclude_filtered": exclude_filtered,
    }
    return results


def flagged_tasks(data: dict, scorer: str) -> dict[str, str]:
    """Per task, the first of its done steps whose value was read from a filtered or refused
    answer, as "step: ending" (the pipeline records ``flagged`` on such a step)."""
    out = {}
    for task in steps.TASKS:
        for step in steps.of_task(task):
            record = step_record(data, step, scorer)
            if record.get("status") == "done" and record.get("flagged"):
                out[task] = f"{step.name}: {record['flagged']}"
                break
    return out


def release_outcomes_of_record(data: dict, scorer: str) -> dict:
    """Per task, what the released harness would have done with this instance, from its
    steps' ``release`` views ({} outside the default setting, which the release lacks).
    Both tasks are judged together, as the release ran them: an instance it skips during
    inference never reaches generation."""
    if data.get("setting", "default") != "default":
        return {}
    outcomes = {task: release_parsing.worst([(step_record(data, s, scorer).get("release") or {}).get("outcome")
                                             for s in steps.of_task(task)]) for task in steps.TASKS}
    if outcomes["inference"] == "drop":  # the release runs inference first and returns
        outcomes["generation"] = "drop" if outcomes["generation"] is not None else None
    return {task: outcome for task, outcome in outcomes.items() if outcome is not None}


def recorded_steps(data: dict, scorer: str | None = None) -> Iterator[tuple[str, dict]]:
    """(name, record) of an instance file's steps: the evaluated model's, then ``scorer``'s
    (every scorer's when None)."""
    evaluations = data.get("evaluations") or {}
    for evaluation in (data, *(evaluations.values() if scorer is None else [evaluations.get(scorer) or {}])):
        for name, step in (evaluation.get("steps") or {}).items():
            if isinstance(step, dict):
                yield name, step


def outcome_from_record(data: dict, scorer: str) -> InstanceOutcome:
    """An instance file's outcome for one scorer, whichever invocation (or process) made it:
    its results, the steps that failed (and were not asked again since), or "unfinished"."""
    evaluation = (data.get("evaluations") or {}).get(scorer) or {}
    failures = [(name, step.get("error") or "failed") for name, step in recorded_steps(data, scorer)
                if step.get("status") == "failed"]
    if (data.get("shown") or {}).get("error"):  # the context strategy raised (pipeline.py)
        failures.append(("context", str(data["shown"]["error"])))
    # A value no parser could have produced (a hand-edited or damaged file) is a failure
    # of the instance, never a number in the aggregate.
    bad = problems_by_task(data, scorer)
    failures += [(f"stored {task} value", problem) for task in ("inference", "generation")
                 for problem in bad[task]]
    inference = evaluation.get("inference")
    generation = evaluation.get("generation")
    outcome = InstanceOutcome(
        instance_id=str(data.get("instance_id")), instance_type=str(data.get("instance_type")),
        status="done",
        inference=read_inference(inference) if inference and not bad["inference"] else None,
        generation_score=(read_generation(generation) if generation and not bad["generation"]
                          else None),
        failures=failures, release=release_outcomes_of_record(data, scorer),
        flagged=flagged_tasks(data, scorer))
    if data.get("skipped"):
        outcome.status, outcome.skip_reason = "skipped", data["skipped"]
    elif failures:
        outcome.status = "failed"
    elif outcome.inference is None and outcome.generation_score is None:
        outcome.status = "unfinished"
    return outcome


def problems_by_task(data: dict, scorer: str) -> dict[str, list[str]]:
    """Every unusable value of an instance file, by the task whose result it would enter
    ("inference", "generation"): its done steps' outputs (the model's and ``scorer``'s) and
    the scorer's results. The file's structure was checked when it was read (store.py)."""
    found: dict[str, list[str]] = {"inference": [], "generation": []}
    evaluation = (data.get("evaluations") or {}).get(scorer) or {}
    for task, check in (("inference", inference_problem), ("generation", generation_problem)):
        problem = check(evaluation[task]) if evaluation.get(task) is not None else None
        if problem:
            found[task].append(f"{scorer}: {problem}")
    for prefix, recorded in (("", data.get("steps") or {}), (f"{scorer}: ", evaluation.get("steps") or {})):
        for step_name, record in recorded.items():
            step = steps.BY_NAME.get(step_name)
            if step is not None and isinstance(record, dict) and record.get("status") == "done":
                problem = step.check(record.get("output"))
                if problem:
                    for task in step.tasks:
                        found[task].append(prefix + problem)
    return found


def record_problems(data: dict, scorer: str) -> list[str]:
    """``problems_by_task`` as one list, each problem once."""
    found = problems_by_task(data, scorer)
    return list(dict.fromkeys(found["inference"] + found["generation"]))


def aggregate_records(records: Iterable[dict], scorer: str, task: str, exclude_filtered: bool = False) -> dict:
    """results.json of a run directory: every finished instance file, for every task, for
    one scorer. Several invocations or processes writing one directory aggregate to the
    numbers one run would give. ``task`` adds a task's block even when it has no result;
    ``exclude_filtered``: see ``aggregate``."""
    records = list(records)
    outcomes = [outcome_from_record(d, scorer) for d in records]
    has_inference = task in ("inference", "both") or any(
        o.inference is not None or any(s in INFERENCE_STEPS for s, _ in o.failures) for o in outcomes)
    has_generation = task in ("generation", "both") or any(
        o.generation_score is not None or any(s in GENERATION_STEPS for s, _ in o.failures)
        for o in outcomes)
    tasks = "both" if has_inference and has_generation else \
        ("generation" if has_generation else "inference")
    # "evaluated" means every task of the directory has its result: a file missing one
    # (a chain that ended in an unexpected error, a task not run yet for it) is unfinished.
    for o in outcomes:
        if o.status == "done" and ((has_inference and o.inference is None)
                                   or (has_generation and o.generation_score is None)):
            o.status = "unfinished"
    results = aggregate(outcomes, tasks, exclude_filtered)
    results["counts"]["unfinished"] = sum(o.status == "unfinished" for o in outcomes)
    results["counts"]["by_task"] = {
        name: {"done": sum(getattr(o, attr) is not None for o in outcomes),
               "failed": sum(any(s in failing for s, _ in o.failures) for o in outcomes)}
        for name, attr, failing, present in (
            ("inference", "inference", INFERENCE_STEPS, has_inference),
            ("generation", "generation_score", GENERATION_STEPS, has_generation)) if present}
    results["tasks"] = tasks
    results["answer_endings"] = answer_endings(records, scorer)
    selection = session_selection(records)  # what the context strategy kept
    if selection is not None:
        results["session_selection"] = selection
    return results


def invocation_counts(n_selected: int, found_done: Iterable[str],
                      outcomes: dict[str, InstanceOutcome],
                      ran_by_batch: Iterable[str] = ()) -> dict:
    """What one invocation did, for run.json, results.json and the summary alike (every
    exit path counts through here): instances found done before it started (or finished
    by another process before their lock was taken), ran, ran and failed, left, and held
    by another process. ``outcomes`` holds the last outcome of each instance it reached;
    ``ran_by_batch`` the instances this invocation's batch rounds took on, which its final
    pass then finds done but which it ran."""
    batched = set(ran_by_batch)
    done = set(found_done) | {i for i, o in outcomes.items() if o.already_done and i not in batched}
    ran = [o for i, o in outcomes.items() if o.status != "busy" and i not in done]
    finished = {i for i, o in outcomes.items() if o.status in ("done", "skipped")}
    return {"instances": n_selected, "found_done": len(done), "ran": len(ran),
            "ran_failed": sum(o.status == "failed" for o in ran),
            "remaining": n_selected - len(finished | done),
            "in_progress_elsewhere": sum(o.status == "busy" for o in outcomes.values())}


def answer_endings(records: Iterable[dict], scorer: str) -> dict:
    """How the answers the run's steps received (the evaluated model's and this scorer's,
    re-asks and withheld ones included) ended (endings.py): how many were cut at the token
    limit, filtered, refused, blocked or empty, overall and per step. A share of cut answers
    above 0 means max_tokens was too small for the model (a reasoning model's thinking counts
    against it). A step recorded before endings were (``truncated``: N) counts N cut."""
    totals: Counter = Counter()
    by_step: dict[str, Counter] = defaultdict(Counter)
    answers = 0
    for record in records:
        for name, step in recorded_steps(record, scorer):
            # The report drops the raw answer of a step done at once: its attempts count it.
            answers += len(step.get("raw") or []) if "raw" in step else (step.get("attempts") or 0)
            endings = step.get("endings")
            if not isinstance(endings, list):
                cut = step.get("truncated")
                endings = ["length"] * cut if isinstance(cut, int) and cut > 0 else []
            for ending in endings:
                if ending in WITHHOLDING or ending == "length":
                    totals[ending] += 1
                    by_step[name][ending] += 1
    out = {"answers": answers, **{ending: totals[ending] for ending in ENDINGS if ending != "stop"}}
    return {**out, "by_step": {name: dict(c) for name, c in by_step.items()}}


# The failures that fail each task: its steps', and a stored value of its result no parser made.
INFERENCE_STEPS = {s.name for s in steps.of_task("inference")} | {"stored inference value"}
GENERATION_STEPS = {s.name for s in steps.of_task("generation")} | {"stored generation value"}


def progress_postfix(outcomes: Iterable[InstanceOutcome]) -> dict:
    """Micro P/R/F1, mean judge score and failures over the outcomes so far (the progress bar's)."""
    outcomes = list(outcomes)
    counts = [o.inference for o in outcomes if o.inference is not None]
    out = {}
    if counts:
        micro = micro_inference(counts)
        out.update(P=f"{micro['precision']:.3f}", R=f"{micro['recall']:.3f}", F1=f"{micro['f1']:.3f}")
    score = mean(o.generation_score for o in outcomes)
    if score is not None:
        out["score"] = f"{score:.2f}"
    failed = sum(o.status == "failed" for o in outcomes)
    if failed:
        out["failed"] = failed
    return out


def recorded_usage(records: Iterable[dict]) -> dict:
    """Tokens of every step in a run directory's instance files (a failed step's too: its
    answers were billed), summed per model that ran it: the run's cost so far, across
    resumed invocations."""
    totals: dict[str, dict] = {}
    for record in records:
        for _, step in recorded_steps(record):
            if not step.get("usage") or not step.get("model"):
                continue
            entry = totals.setdefault(step["model"], {"steps": 0, **dict.fromkeys(
                (*TOKEN_FIELDS, "batch_prompt_tokens", "batch_completion_tokens"), 0)})
            entry["steps"] += 1
            for k in entry:
                if k != "steps":
                    entry[k] += step["usage"].get(k, 0)
    for name, entry in totals.items():
        entry["estimated_cost_usd"] = cost_of(name, entry)
    return totals
