"""Values read back from an instance file, checked as strictly as a model's answer is.

An instance file is data on disk: hand-edited, written by another version, or damaged. Its
step outputs and results are only used when they are what the parsers could have produced
(a judge score in 1-10, match labels from the rubric with their scores, P/R/F1 in [0, 1],
non-negative counts); anything else is named and its steps run again (pipeline.py), or the
instance is counted as failed instead of aggregated (aggregate.py, the report).
Each check returns the problem in words, or None.
"""
from __future__ import annotations

import math
from typing import Any

from cupid.evaluation.metrics import InferenceCounts
from cupid.utils.benchmark.answers.release import LABEL_SCORES


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def judge_score_problem(score: Any, what: str = "judge score") -> str | None:
    if not _is_number(score) or not 1 <= score <= 10:
        return f"{what} {score!r} is not a number in 1-10"
    return None


def step_output_problem(name: str, output: Any) -> str | None:
    """What is wrong with a done step's stored output (None: usable)."""
    if not isinstance(output, dict):
        return f"{name}: output {type(output).__name__} is not an object"
    if name == "judge":
        return judge_score_problem(output.get("score"), "judge: score")
    if name.startswith("match"):
        results = output.get("results")
        if not isinstance(results, list):
            return f"{name}: no results list"
        for i, item in enumerate(results, start=1):
            label = item.get("label") if isinstance(item, dict) else None
            if label not in LABEL_SCORES:
                return f"{name}: result {i} has label {label!r}, not one of {sorted(LABEL_SCORES)}"
            if item.get("score") != LABEL_SCORES[label] or isinstance(item.get("score"), bool):
                return (f"{name}: result {i} has score {item.get('score')!r}, "
                        f"not {LABEL_SCORES[label]} for {label!r}")
        return None
    expected = {"decompose": ("checklist", list), "infer": ("preference", str),
                "generate": ("response", str), "summarize": ("summaries", list)}.get(name)
    if expected:
        key, kind = expected
        value = output.get(key)
        if not isinstance(value, kind):
            return f"{name}: {key} is {type(value).__name__}, not {kind.__name__}"
        if key == "checklist" and not all(isinstance(entry, str) for entry in value):
            return f"{name}: a checklist entry is not text"
    return None


def inference_problem(data: Any) -> str | None:
    """An instance's stored ``inference`` block (counts, P/R/F1)."""
    if not isinstance(data, dict):
        return f"inference is {type(data).__name__}, not an object"
    for key in ("n_predicted", "n_true"):
        if not _is_count(data.get(key)):
            return f"inference.{key} is {data.get(key)!r}, not a non-negative integer"
    for key, total in (("n_predicted_matched", "n_predicted"), ("n_true_matched", "n_true")):
        value = data.get(key)
        if not _is_number(value) or not 0 <= value <= data[total]:
            return f"inference.{key} is {value!r}, not a number in 0-{data[total]}"
    for key in ("precision", "recall", "f1"):
        value = data.get(key)
        if value is not None and (not _is_number(value) or not 0 <= value <= 1):
            return f"inference.{key} is {value!r}, not in [0, 1]"
    return None


def generation_problem(data: Any) -> str | None:
    """An instance's stored ``generation`` block."""
    if not isinstance(data, dict):
        return f"generation is {type(data).__name__}, not an object"
    return judge_score_problem(data.get("score"), "generation.score")


def read_inference(data: Any) -> InferenceCounts:
    """The stored counts, or ValueError naming what is wrong."""
    problem = inference_problem(data)
    if problem:
        raise ValueError(problem)
    return InferenceCounts.from_dict(data)


def read_generation(data: Any) -> float:
    """The stored judge score, or ValueError naming what is wrong."""
    problem = generation_problem(data)
    if problem:
        raise ValueError(problem)
    return float(data["score"])


_TASK_OF_STEP = {"infer": ("inference",), "decompose": ("inference",),
                 "match_precision": ("inference",), "match_recall": ("inference",),
                 "generate": ("generation",), "judge": ("generation",),
                 "summarize": ("inference", "generation")}


def problems_by_task(data: dict, scorer: str | None = None) -> dict[str, list[str]]:
    """Every unusable value of an instance file, by the task whose result it would enter
    ("inference", "generation"): its done steps' outputs (the model's and ``scorer``'s, or
    every scorer's when None) and the scorers' results."""
    found: dict[str, list[str]] = {"inference": [], "generation": []}
    evaluations = data.get("evaluations") or {}
    if not isinstance(evaluations, dict):
        message = "evaluations is not an object"
        return {"inference": [message], "generation": [message]}
    step_sets = [("", data.get("steps") or {})]
    chosen = evaluations if scorer is None else {scorer: evaluations.get(scorer)}
    for name, evaluation in chosen.items():
        if evaluation is None:
            continue
        if not isinstance(evaluation, dict):
            for task in found:
                found[task].append(f"evaluations[{name!r}] is not an object")
            continue
        step_sets.append((f"{name}: ", evaluation.get("steps") or {}))
        for task, check in (("inference", inference_problem), ("generation", generation_problem)):
            if evaluation.get(task) is not None:
                problem = check(evaluation[task])
                if problem:
                    found[task].append(f"{name}: {problem}")
    for prefix, steps in step_sets:
        if not isinstance(steps, dict):
            for task in found:
                found[task].append(f"{prefix}steps is not an object")
            continue
        for step_name, step in steps.items():
            if isinstance(step, dict) and step.get("status") == "done":
                problem = step_output_problem(step_name, step.get("output"))
                if problem:
                    for task in _TASK_OF_STEP.get(step_name, ("inference", "generation")):
                        found[task].append(prefix + problem)
    return found


def record_problems(data: dict, scorer: str | None = None) -> list[str]:
    """``problems_by_task`` as one list, each problem once."""
    found = problems_by_task(data, scorer)
    return list(dict.fromkeys(found["inference"] + found["generation"]))
