"""Scores and their aggregation.

Matching labels score 1 / 0.5 / 0 (§2.3). Per instance:
    precision = Σ MATCH(q̂, p) over the inferred checklist / |inferred checklist|
    recall    = Σ MATCH(q, p̂) over the ground-truth checklist / |ground-truth checklist|
The released harness pools the sums and counts over all instances (micro); the paper's
formula reads as a per-instance average (macro). Both are reported, micro first, so our
numbers line up with the released ``results.json``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Iterable, Sequence

from .steps.judge import score_problem


def f1_score(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class InferenceCounts:
    """The four numbers one instance contributes to the pooled (micro) metrics."""
    n_predicted_matched: float  # Σ scores of inferred-checklist entries against the truth
    n_predicted: int            # number of inferred-checklist entries
    n_true_matched: float       # Σ scores of ground-truth entries against the inference
    n_true: int                 # number of ground-truth entries

    @property
    def precision(self) -> float | None:
        return self.n_predicted_matched / self.n_predicted if self.n_predicted else None

    @property
    def recall(self) -> float | None:
        return self.n_true_matched / self.n_true if self.n_true else None

    @property
    def f1(self) -> float | None:
        return f1_score(self.precision, self.recall)

    def as_dict(self) -> dict:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                "n_true_matched": self.n_true_matched, "n_predicted_matched": self.n_predicted_matched,
                "n_true": self.n_true, "n_predicted": self.n_predicted}

    @classmethod
    def from_dict(cls, data: dict) -> "InferenceCounts":
        return cls(float(data["n_predicted_matched"]), int(data["n_predicted"]),
                   float(data["n_true_matched"]), int(data["n_true"]))

    @classmethod
    def from_scores(cls, precision_scores: Sequence[float], recall_scores: Sequence[float]) -> "InferenceCounts":
        return cls(float(sum(precision_scores)), len(precision_scores),
                   float(sum(recall_scores)), len(recall_scores))


def micro_inference(counts: Iterable[InferenceCounts]) -> dict:
    """Pooled over instances, exactly as the released results.json (fractions)."""
    counts = list(counts)
    pooled = InferenceCounts(*(sum(getattr(c, f.name) for c in counts) for f in fields(InferenceCounts)))
    return {**pooled.as_dict(), "n_instances": len(counts)}


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values present (None when there are none)."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def macro_inference(counts: Iterable[InferenceCounts]) -> dict:
    """Per-instance precision, recall and F1, then averaged over instances.

    An instance with an empty inferred checklist has no precision of its own; it counts
    as precision 0 (it inferred nothing that matches), so it cannot inflate the average.
    """
    counts = list(counts)
    precisions = [c.precision if c.precision is not None else 0.0 for c in counts]
    recalls = [c.recall if c.recall is not None else 0.0 for c in counts]
    f1s = [f1_score(p, r) or 0.0 for p, r in zip(precisions, recalls)]
    return {"precision": mean(precisions), "recall": mean(recalls), "f1": mean(f1s),
            "n_instances": len(counts)}


def generation_summary(scores: Iterable[float]) -> dict:
    scores = list(scores)
    return {"average_score": mean(scores), "n_instances": len(scores)}


# ---------------------------------------------------------------------------------------
# An instance's stored results, checked as strictly as an answer is: a hand-edited or damaged
# file's value is named and left out, never a number in the aggregate.
# ---------------------------------------------------------------------------------------
def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def inference_problem(data: Any) -> str | None:
    """What is wrong with an instance's stored ``inference`` block (counts, P/R/F1)."""
    if not isinstance(data, dict):
        return f"inference is {type(data).__name__}, not an object"
    for key in ("n_predicted", "n_true"):
        value = data.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"inference.{key} is {value!r}, not a non-negative integer"
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
    """What is wrong with an instance's stored ``generation`` block."""
    if not isinstance(data, dict):
        return f"generation is {type(data).__name__}, not an object"
    return score_problem(data.get("score"), "generation.score")


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
