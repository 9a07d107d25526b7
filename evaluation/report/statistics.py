"""Statistics over per-instance results: bootstrap CIs, paired bootstrap, Pearson
correlation, binning (Figures 3 and 9).

Bootstrap: resample clusters with replacement (numpy, seeded) and recompute the statistic on
each resample; the 95% interval is the 2.5th-97.5th percentile of the resampled values. The
report's clusters are personas: a persona's three instances share its sessions, so they are
not independent draws, and resampling instances would make the intervals too narrow (by up
to √3 when a persona's instances agree). Without clusters each item is its own cluster, the
ordinary bootstrap. Every statistic is a ratio of column sums (a mean is Σ value / Σ 1, a
micro precision Σ matched / Σ predicted), so a resample is a vector of draw counts over the
clusters applied to each cluster's column sums, and a paired comparison applies the same
counts to both sides, matched by instance_id.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from ..metrics import InferenceCounts, f1_score

DEFAULT_N_BOOTSTRAP = 1000

INFERENCE_METRICS = ("precision", "recall", "f1")


def one_blas_thread() -> threadpool_limits:
    """A context in which numpy's BLAS runs on one thread. The report's products are small
    (1000 resamples x ~756 instances x a few columns): a BLAS thread pool only adds waiting,
    tens of times the work itself on a busy machine."""
    return threadpool_limits(limits=1, user_api="blas")


# =======================================================================================
# Estimates
# =======================================================================================
@dataclass(frozen=True)
class Estimate:
    """A point estimate over ``n`` instances with its bootstrap interval."""
    value: float | None
    low: float | None
    high: float | None
    n: int


@dataclass(frozen=True)
class PairedDifference:
    """statistic(a) - statistic(b) on the instances both have, with a paired bootstrap CI.

    ``p_value`` is the two-sided bootstrap p-value of "no difference": twice the share of
    resamples on the far side of zero (capped at 1); 0 means fewer than 1 in n_bootstrap.
    """
    difference: float | None
    low: float | None
    high: float | None
    p_value: float | None
    n: int
    value_a: float | None
    value_b: float | None


# =======================================================================================
# Statistics as functions of weighted sums
# =======================================================================================
def instance_prf(counts: InferenceCounts) -> tuple[float, float, float]:
    """One instance's precision, recall and F1, with the convention of
    ``metrics.macro_inference``: an empty checklist scores 0 rather than being skipped."""
    precision = counts.precision if counts.precision is not None else 0.0
    recall = counts.recall if counts.recall is not None else 0.0
    return precision, recall, f1_score(precision, recall) or 0.0


def _safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _f1(precision: np.ndarray, recall: np.ndarray) -> np.ndarray:
    total = precision + recall
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = np.where(total > 0, 2 * precision * recall / np.where(total > 0, total, 1), 0.0)
    return np.where(np.isnan(precision) | np.isnan(recall), np.nan, f1)


def _micro_from_sums(sums: np.ndarray) -> dict[str, np.ndarray]:
    """sums[..., :] = (Σ n_predicted_matched, Σ n_predicted, Σ n_true_matched, Σ n_true)."""
    precision = _safe_ratio(sums[..., 0], sums[..., 1])
    recall = _safe_ratio(sums[..., 2], sums[..., 3])
    return {"precision": precision, "recall": recall, "f1": _f1(precision, recall)}


def _counts_matrix(counts: Sequence[InferenceCounts]) -> np.ndarray:
    return np.array([[c.n_predicted_matched, c.n_predicted, c.n_true_matched, c.n_true]
                     for c in counts], dtype=float).reshape(len(counts), 4)


def _prf_matrix(counts: Sequence[InferenceCounts]) -> np.ndarray:
    """Per-instance precision, recall, F1 and a 1 (the instance count a mean divides by)."""
    return np.array([(*instance_prf(c), 1.0) for c in counts], dtype=float).reshape(len(counts), 4)


def _values_matrix(values: Sequence[float]) -> np.ndarray:
    return np.column_stack([np.asarray(values, dtype=float), np.ones(len(values))])


# Each metric: (how to turn the per-instance items into a data matrix, how to turn column
# sums of it, over any set of instances, into the statistic). Means divide by the summed
# count column, since a resample of clusters holds a varying number of instances.
def _metric_spec(metric: str):
    if metric == "mean":
        return _values_matrix, lambda sums: sums[..., 0] / sums[..., 1]
    kind, _, name = metric.partition("_")
    if name not in INFERENCE_METRICS or kind not in ("micro", "macro"):
        raise ValueError(f"unknown metric {metric!r}: use 'mean', 'micro_<p|r|f1>' or 'macro_<p|r|f1>'")
    if kind == "micro":
        return _counts_matrix, lambda sums: _micro_from_sums(sums)[name]
    column = INFERENCE_METRICS.index(name)
    return _prf_matrix, lambda sums: sums[..., column] / sums[..., 3]


def cluster_sums(data: np.ndarray, clusters: Sequence[Hashable] | None) -> np.ndarray:
    """The data's rows summed per cluster (``clusters[i]`` is row i's), clusters in order of
    first appearance, so that with one row per cluster the result is the data itself. None:
    each row is its own cluster."""
    if clusters is None:
        return data
    if len(clusters) != len(data):
        raise ValueError(f"{len(clusters)} cluster labels for {len(data)} items")
    index: dict[Hashable, int] = {}
    rows = [index.setdefault(c, len(index)) for c in clusters]
    sums = np.zeros((len(index), data.shape[1]))
    np.add.at(sums, rows, data)
    return sums


@lru_cache(maxsize=8)
def bootstrap_weights(n: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """(n_bootstrap, n) resampling counts: row b says how often each of the n clusters is
    drawn in resample b (n draws with replacement). Same (n, n_bootstrap, seed), same
    weights, so every statistic over the same clusters shares its resamples."""
    draws = np.random.default_rng(seed).integers(0, n, size=(n_bootstrap, n))
    offsets = (np.arange(n_bootstrap) * n)[:, None]
    weights = np.bincount((draws + offsets).ravel(), minlength=n_bootstrap * n).reshape(n_bootstrap, n).astype(float)
    weights.setflags(write=False)
    return weights


def _percentile_interval(samples: np.ndarray) -> tuple[float | None, float | None]:
    """The 95% percentile interval of the finite samples."""
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return None, None
    low, high = np.percentile(finite, [2.5, 97.5])
    return float(low), float(high)


def _as_float(value: Any) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


def _bootstrap_many(items: Sequence[Any], metrics: Sequence[str], clusters: Sequence[Hashable] | None,
                    n_bootstrap: int, seed: int) -> dict[str, Estimate]:
    """Several statistics of the same data matrix from one set of resampled sums."""
    specs = [_metric_spec(m) for m in metrics]
    n = len(items)
    if n == 0:
        return {m: Estimate(None, None, None, 0) for m in metrics}
    data = specs[0][0](list(items))
    totals = data.sum(axis=0)
    sums = cluster_sums(data, clusters)
    resampled = bootstrap_weights(len(sums), n_bootstrap, seed) @ sums
    out = {}
    for metric, (_, statistic) in zip(metrics, specs):
        low, high = _percentile_interval(statistic(resampled))
        out[metric] = Estimate(_as_float(statistic(totals)), low, high, n)
    return out


def bootstrap(items: Sequence[Any], metric: str = "mean", *, clusters: Sequence[Hashable] | None = None,
              n_bootstrap: int = DEFAULT_N_BOOTSTRAP, seed: int = 0) -> Estimate:
    """The statistic over all items and its 95% percentile bootstrap interval.

    ``metric`` is ``"mean"`` (items are numbers, e.g. judge scores) or ``"micro_f1"``,
    ``"micro_precision"``, ``"micro_recall"``, ``"macro_f1"``, ... (items are InferenceCounts).
    ``clusters`` names each item's cluster (the report: its persona); resamples draw whole
    clusters. None: each item is its own cluster.
    """
    return _bootstrap_many(items, [metric], clusters, n_bootstrap, seed)[metric]


def bootstrap_inference(counts: Sequence[InferenceCounts], kind: str = "micro", *,
                        clusters: Sequence[Hashable] | None = None, n_bootstrap: int = DEFAULT_N_BOOTSTRAP,
                        seed: int = 0) -> dict[str, Estimate]:
    """Precision, recall and F1 (micro: pooled counts; macro: per-instance mean) with CIs.
    The three share one set of resamples."""
    metrics = [f"{kind}_{name}" for name in INFERENCE_METRICS]
    estimates = _bootstrap_many(list(counts), metrics, clusters, n_bootstrap, seed)
    return {name: estimates[f"{kind}_{name}"] for name in INFERENCE_METRICS}


def paired_bootstrap(a: Mapping[Hashable, Any], b: Mapping[Hashable, Any], metric: str = "mean", *,
                     clusters: Mapping[Hashable, Hashable] | None = None,
                     n_bootstrap: int = DEFAULT_N_BOOTSTRAP, seed: int = 0) -> PairedDifference:
    """statistic(a) - statistic(b), paired by key (instance_id): only keys in both count,
    and each resample draws the same clusters for both sides. ``clusters`` maps each key to
    its cluster (the report: its persona); None: each key is its own cluster."""
    keys = sorted(set(a) & set(b), key=str)
    n = len(keys)
    if n == 0:
        return PairedDifference(None, None, None, None, 0, None, None)
    to_matrix, statistic = _metric_spec(metric)
    data_a = to_matrix([a[k] for k in keys])
    data_b = to_matrix([b[k] for k in keys])
    value_a = _as_float(statistic(data_a.sum(axis=0)))
    value_b = _as_float(statistic(data_b.sum(axis=0)))
    difference = None if value_a is None or value_b is None else value_a - value_b
    labels = None if clusters is None else [clusters[k] for k in keys]
    sums_a, sums_b = cluster_sums(data_a, labels), cluster_sums(data_b, labels)
    weights = bootstrap_weights(len(sums_a), n_bootstrap, seed)
    diffs = statistic(weights @ sums_a) - statistic(weights @ sums_b)
    low, high = _percentile_interval(diffs)
    finite = diffs[np.isfinite(diffs)]
    p_value = None
    if finite.size:
        p_value = float(min(1.0, 2 * min(np.mean(finite <= 0), np.mean(finite >= 0))))
    return PairedDifference(difference, low, high, p_value, n, value_a, value_b)


# =======================================================================================
# Correlation
# =======================================================================================
@dataclass(frozen=True)
class Correlation:
    r: float | None
    p_value: float | None
    n: int
    note: str = ""


def pearson(x: Sequence[float], y: Sequence[float]) -> Correlation:
    """Pearson's r and its two-sided p-value (the t test of r = 0 with n - 2 degrees of
    freedom, as scipy.stats.pearsonr gives it). Fewer than 3 points or a constant variable
    give r=None with a note saying why."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = int(x.size)
    if n < 3:
        return Correlation(None, None, n, "needs at least 3 points")
    dx, dy = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float(dx @ dx) * float(dy @ dy))
    if denominator == 0:
        return Correlation(None, None, n, "a variable is constant")
    r = max(-1.0, min(1.0, float(dx @ dy) / denominator))
    return Correlation(r, pearson_p_value(r, n), n)


def pearson_p_value(r: float, n: int) -> float:
    """Two-sided p-value of Pearson's r from n points: P(|T| >= |t|) for Student's t with
    df = n - 2 and t = r·sqrt(df / (1 - r²)), by the finite series of Abramowitz & Stegun
    26.7.3-4 for whole df, with sin θ = |r| and cos² θ = 1 - r². Exact up to rounding, which
    leaves a p-value below ~1e-9 only a few digits; the report prints it as "p < 0.001"."""
    df, s, c2 = n - 2, abs(r), 1.0 - r * r
    if s >= 1.0:
        return 0.0
    odd = df % 2
    # P(|T| < t) = sin θ · Σ a_k cos^2k θ (even df) or (2/π)(θ + sin θ · Σ b_k cos^(2k+1) θ)
    # (odd df), a_0 = b_0 = 1, each term the last times cos² θ (2k + 1 + odd) / (2k + 2 + odd).
    term, total = math.sqrt(c2) if odd else 1.0, 0.0
    for k in range(df // 2):
        total += term
        term *= c2 * (2 * k + 1 + odd) / (2 * k + 2 + odd)
    inside = 2 / math.pi * (math.atan2(s, math.sqrt(c2)) + s * total) if odd else s * total
    return max(0.0, 1.0 - inside)


# =======================================================================================
# Binning (Figures 3 and 9)
# =======================================================================================
@dataclass(frozen=True)
class Bin:
    low: float          # smallest value in the bin
    high: float         # largest value in the bin
    keys: tuple         # the items (instance ids) in the bin

    @property
    def n(self) -> int:
        return len(self.keys)


def equal_size_bins(values: Mapping[Hashable, float], n_bins: int) -> list[Bin]:
    """Split items into ``n_bins`` groups of (nearly) equal size by value, as in Appendix F.4:
    every bin holds values larger than the previous bin's maximum, so equal values never
    straddle a boundary (ties can make bins unequal, or fewer than asked)."""
    if n_bins < 1:
        raise ValueError("n_bins must be at least 1")
    items = sorted(values.items(), key=lambda kv: (kv[1], str(kv[0])))
    n = len(items)
    if n == 0:
        return []
    cuts = [0]
    for i in range(1, n_bins):
        cut = max(round(i * n / n_bins), cuts[-1])
        while 0 < cut < n and items[cut][1] == items[cut - 1][1]:
            cut += 1
        cuts.append(cut)
    cuts.append(n)
    bins = []
    for start, end in zip(cuts, cuts[1:]):
        if end > start:
            chunk = items[start:end]
            bins.append(Bin(float(chunk[0][1]), float(chunk[-1][1]), tuple(k for k, _ in chunk)))
    return bins


def group_by_value(values: Mapping[Hashable, float], resolution: float = 0.5) -> list[Bin]:
    """Group items by their value rounded to a multiple of ``resolution`` (Figure 3:
    the mean position of relevant sessions), in increasing order."""
    groups: dict[float, list] = {}
    for key, value in values.items():
        rounded = round(round(value / resolution) * resolution, 10)
        groups.setdefault(rounded, []).append(key)
    return [Bin(v, v, tuple(sorted(groups[v], key=str))) for v in sorted(groups)]


def bin_means(bins: Sequence[Bin], ys: Mapping[Hashable, float]) -> list[tuple[float | None, int]]:
    """For each bin, the mean of ``ys`` over its keys that have a value, and how many."""
    out = []
    for b in bins:
        present = [ys[k] for k in b.keys if k in ys and ys[k] is not None]
        out.append((sum(present) / len(present) if present else None, len(present)))
    return out


def mean_position(positions: Iterable[int] | None) -> float | None:
    positions = list(positions or [])
    return sum(positions) / len(positions) if positions else None
