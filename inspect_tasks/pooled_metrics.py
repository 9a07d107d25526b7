"""The inference task's metrics: the release's micro-pooled precision, recall and F1
(evaluation/metrics.py ``micro_inference``, the numbers of cupid-eval's results.json), the
per-instance average (``macro_inference``), and persona-clustered standard errors of the
pooled figures.

A pooled figure is a ratio (matched entries over entries), not a mean of per-sample values,
so inspect's clustered standard error (``stderr(cluster=...)``) is applied to its
linearization: each instance's value is the pooled figure plus its deviation
(matched - P * entries) / mean entries, whose mean is the pooled figure itself and whose
clustered standard error is the delta method's for a ratio; F1's deviation is P's and R's
weighted by F1's partial derivatives, 2R^2/(P+R)^2 and 2P^2/(P+R)^2. With every instance's
checklists of one length the linearization is the per-instance value itself.
"""
from __future__ import annotations

from inspect_ai.scorer import Metric, SampleScore, Score, metric, stderr

from ..evaluation.metrics import InferenceCounts, macro_inference, micro_inference

CLUSTER = "persona_id"  # a persona's three instances share most of their sessions
FIGURES = ("precision", "recall", "f1")


def counts_of(scores: list[SampleScore]) -> list[InferenceCounts]:
    return [InferenceCounts.from_dict(s.score.metadata["counts"]) for s in scores]


@metric
def micro() -> Metric:
    """Pooled over instances, as results.json's ``inference``."""

    def compute(scores: list[SampleScore]) -> dict:
        pooled = micro_inference(counts_of(scores))
        return {name: pooled[name] for name in FIGURES}

    return compute


@metric
def macro() -> Metric:
    """Per instance, then averaged, as results.json's ``inference_macro``."""

    def compute(scores: list[SampleScore]) -> dict:
        averaged = macro_inference(counts_of(scores))
        return {f"{name}_macro": averaged[name] for name in FIGURES}

    return compute


def deviations(counts: list[InferenceCounts]) -> dict[str, tuple[float, list[float]]]:
    """Each pooled figure and every instance's deviation from it (the linearization)."""
    if not counts:
        return {}
    pooled = micro_inference(counts)
    p, r, f1 = (pooled[name] or 0.0 for name in FIGURES)
    n = len(counts)
    predicted, true = pooled["n_predicted"] / n, pooled["n_true"] / n
    dp = [(c.n_predicted_matched - p * c.n_predicted) / predicted if predicted else 0.0 for c in counts]
    dr = [(c.n_true_matched - r * c.n_true) / true if true else 0.0 for c in counts]
    total = (p + r) ** 2
    gp, gr = (2 * r * r / total, 2 * p * p / total) if total else (0.0, 0.0)
    return {"precision": (p, dp), "recall": (r, dr), "f1": (f1, [gp * a + gr * b for a, b in zip(dp, dr)])}


@metric
def micro_stderr(cluster: str = CLUSTER) -> Metric:
    """The pooled figures' standard errors, clustered by ``cluster`` (inspect's own)."""
    clustered = stderr(cluster=cluster)

    def compute(scores: list[SampleScore]) -> dict:
        out = {}
        for name, (value, deviation) in deviations(counts_of(scores)).items():
            linearized = [SampleScore(score=Score(value=value + d), sample_id=s.sample_id,
                                      sample_metadata=s.sample_metadata) for s, d in zip(scores, deviation)]
            out[f"{name}_stderr"] = clustered(linearized)
        return out

    return compute
