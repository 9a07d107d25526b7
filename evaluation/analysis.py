"""Statistics over evaluation results: bootstrap CIs, paired bootstrap, Pearson correlation,
binning (Figures 3 and 9), and reading run directories (docs/results_format.md).

Every per-instance number is recomputed from the instance files (the `inference` counts and
`generation.score` of each scorer), never read from results.json, so a partial run can be
analysed: instances whose steps failed or have not run yet are counted and left out.

Bootstrap: resample instances with replacement (numpy, seeded) and recompute the statistic
on each resample; the 95% interval is the 2.5th-97.5th percentile of the resampled values.
A resample is held as a vector of draw counts over instances, so the pooled (micro)
metrics are ratios of weighted sums and a paired comparison applies the same weights to
both sides, matched by instance_id.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np

from evaluation.metrics import InferenceCounts, f1_score
from utils.io import read_json

SETTINGS = ("default", "oracle", "summary", "oracle_preference")
DEFAULT_N_BOOTSTRAP = 1000
DEFAULT_CONFIDENCE = 0.95

# Which steps each task's result depends on: (instance-level steps, scorer-level steps).
TASK_STEPS = {
    "inference": (("summarize", "infer"), ("decompose", "match_precision", "match_recall")),
    "generation": (("summarize", "generate"), ("judge",)),
}

INFERENCE_METRICS = ("precision", "recall", "f1")


# =======================================================================================
# Estimates
# =======================================================================================
@dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap interval over ``n`` instances."""
    value: float | None
    low: float | None
    high: float | None
    n: int

    @property
    def width(self) -> float | None:
        return None if self.low is None or self.high is None else self.high - self.low

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


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

    def as_dict(self) -> dict:
        return {"difference": self.difference, "low": self.low, "high": self.high,
                "p_value": self.p_value, "n": self.n, "value_a": self.value_a, "value_b": self.value_b}


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
    return np.array([instance_prf(c) for c in counts], dtype=float).reshape(len(counts), 3)


# Each metric: (how to turn the per-instance items into a data matrix, how to turn the
# weighted column sums (and the number of instances) into the statistic).
def _metric_spec(metric: str):
    if metric == "mean":
        return (lambda items: np.asarray(items, dtype=float).reshape(len(items), 1),
                lambda sums, n: sums[..., 0] / n)
    kind, _, name = metric.partition("_")
    if name not in INFERENCE_METRICS or kind not in ("micro", "macro"):
        raise ValueError(f"unknown metric {metric!r}: use 'mean', 'micro_<p|r|f1>' or 'macro_<p|r|f1>'")
    if kind == "micro":
        return _counts_matrix, lambda sums, n: _micro_from_sums(sums)[name]
    column = INFERENCE_METRICS.index(name)
    return _prf_matrix, lambda sums, n: sums[..., column] / n


def bootstrap_weights(n: int, n_bootstrap: int, seed: int | None) -> np.ndarray:
    """(n_bootstrap, n) resampling counts: row b says how often each of the n instances is
    drawn in resample b (n draws with replacement). Same (n, n_bootstrap, seed), same
    weights, so every statistic over the same instances shares its resamples."""
    if n_bootstrap < 1:
        raise ValueError("n_bootstrap must be at least 1")
    if n < 1:
        raise ValueError("n must be at least 1")
    if seed is None:
        return _draw_weights(n, n_bootstrap, None)
    return _cached_weights(n, n_bootstrap, seed)


def _draw_weights(n: int, n_bootstrap: int, seed: int | None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(n_bootstrap, n))
    offsets = (np.arange(n_bootstrap) * n)[:, None]
    weights = np.bincount((draws + offsets).ravel(), minlength=n_bootstrap * n)
    return weights.reshape(n_bootstrap, n).astype(float)


@lru_cache(maxsize=8)
def _cached_weights(n: int, n_bootstrap: int, seed: int) -> np.ndarray:
    weights = _draw_weights(n, n_bootstrap, seed)
    weights.setflags(write=False)
    return weights


def _percentile_interval(samples: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return None, None
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def _as_float(value: Any) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


def _bootstrap_many(items: Sequence[Any], metrics: Sequence[str], n_bootstrap: int, seed: int | None,
                    confidence: float) -> dict[str, Estimate]:
    """Several statistics of the same data matrix from one set of resampled sums."""
    specs = [_metric_spec(m) for m in metrics]
    n = len(items)
    if n == 0:
        return {m: Estimate(None, None, None, 0) for m in metrics}
    data = specs[0][0](list(items))
    totals = data.sum(axis=0)
    resampled = bootstrap_weights(n, n_bootstrap, seed) @ data
    out = {}
    for metric, (_, statistic) in zip(metrics, specs):
        low, high = _percentile_interval(statistic(resampled, n), confidence)
        out[metric] = Estimate(_as_float(statistic(totals, n)), low, high, n)
    return out


def bootstrap(items: Sequence[Any], metric: str = "mean", *, n_bootstrap: int = DEFAULT_N_BOOTSTRAP,
              seed: int | None = 0, confidence: float = DEFAULT_CONFIDENCE) -> Estimate:
    """The statistic over all items and its percentile bootstrap interval.

    ``metric`` is ``"mean"`` (items are numbers, e.g. judge scores) or ``"micro_f1"``,
    ``"micro_precision"``, ``"micro_recall"``, ``"macro_f1"``, ... (items are InferenceCounts).
    """
    return _bootstrap_many(items, [metric], n_bootstrap, seed, confidence)[metric]


def bootstrap_mean(values: Sequence[float], **kwargs) -> Estimate:
    return bootstrap(list(values), "mean", **kwargs)


def bootstrap_inference(counts: Sequence[InferenceCounts], kind: str = "micro", *,
                        n_bootstrap: int = DEFAULT_N_BOOTSTRAP, seed: int | None = 0,
                        confidence: float = DEFAULT_CONFIDENCE) -> dict[str, Estimate]:
    """Precision, recall and F1 (micro: pooled counts; macro: per-instance mean) with CIs.
    The three share one set of resamples."""
    metrics = [f"{kind}_{name}" for name in INFERENCE_METRICS]
    estimates = _bootstrap_many(list(counts), metrics, n_bootstrap, seed, confidence)
    return {name: estimates[f"{kind}_{name}"] for name in INFERENCE_METRICS}


def paired_bootstrap(a: Mapping[Hashable, Any], b: Mapping[Hashable, Any], metric: str = "mean", *,
                     n_bootstrap: int = DEFAULT_N_BOOTSTRAP, seed: int | None = 0,
                     confidence: float = DEFAULT_CONFIDENCE) -> PairedDifference:
    """statistic(a) - statistic(b), paired by key (instance_id): only keys in both count,
    and each resample draws the same instances for both sides."""
    keys = sorted(set(a) & set(b), key=str)
    n = len(keys)
    if n == 0:
        return PairedDifference(None, None, None, None, 0, None, None)
    to_matrix, statistic = _metric_spec(metric)
    data_a = to_matrix([a[k] for k in keys])
    data_b = to_matrix([b[k] for k in keys])
    value_a = _as_float(statistic(data_a.sum(axis=0), n))
    value_b = _as_float(statistic(data_b.sum(axis=0), n))
    difference = None if value_a is None or value_b is None else value_a - value_b
    weights = bootstrap_weights(n, n_bootstrap, seed)
    diffs = statistic(weights @ data_a, n) - statistic(weights @ data_b, n)
    low, high = _percentile_interval(diffs, confidence)
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
    """Pearson's r (numpy) and its two-sided p-value (scipy, when installed; else None).
    Fewer than 3 points or a constant variable give r=None with a note saying why."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("x and y must be 1-d sequences of the same length")
    n = int(x.size)
    if n < 3:
        return Correlation(None, None, n, "needs at least 3 points")
    dx, dy = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float(dx @ dx) * float(dy @ dy))
    if denominator == 0:
        return Correlation(None, None, n, "a variable is constant")
    r = max(-1.0, min(1.0, float(dx @ dy) / denominator))
    try:
        from scipy import stats
    except ImportError:
        return Correlation(r, None, n, "p-value needs scipy")
    return Correlation(r, float(stats.pearsonr(x, y)[1]), n)


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


# =======================================================================================
# Reading results
# =======================================================================================
@dataclass
class Run:
    """All instance files of one (model, setting), possibly from several run directories.
    ``scorers`` and ``tasks`` are computed once, when first asked (after loading)."""
    model: str
    setting: str
    directories: list[Path] = field(default_factory=list)
    manifests: list[dict] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)      # results.json files, if any
    instances: dict[str, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    _judged: dict[str, bool] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return self.model, self.setting

    def instance_type(self, instance_id: str) -> str:
        return str(self.instances[instance_id].get("instance_type") or "unknown")

    def ids(self, instance_type: str | None = None) -> list[str]:
        return sorted(i for i in self.instances
                      if instance_type in (None, "all") or self.instance_type(i) == instance_type)

    @cached_property
    def scorers(self) -> list[str]:
        found: dict[str, None] = {}
        for data in self.instances.values():
            for scorer in (data.get("evaluations") or {}):
                found[scorer] = None
        for results in self.results:
            scorer = (results.get("settings") or {}).get("scorer")
            if scorer:
                found[scorer] = None
        return sorted(found)

    @property
    def expected_instances(self) -> int | None:
        """How many instances results.json says the run has (None without results.json)."""
        totals = [(r.get("counts") or {}).get("instances") for r in self.results]
        totals = [t for t in totals if isinstance(t, int)]
        return max(totals) if totals else None

    @cached_property
    def tasks(self) -> set[str]:
        """The tasks this run performed: from its steps, or results.json's settings.task."""
        tasks: set[str] = set()
        for data in self.instances.values():
            steps = data.get("steps") or {}
            if "infer" in steps:
                tasks.add("inference")
            if "generate" in steps:
                tasks.add("generation")
            for evaluation in (data.get("evaluations") or {}).values():
                if not isinstance(evaluation, dict):
                    continue
                if evaluation.get("inference") is not None:
                    tasks.add("inference")
                if evaluation.get("generation") is not None:
                    tasks.add("generation")
        for results in self.results:
            task = (results.get("settings") or {}).get("task")
            if task in ("inference", "generation"):
                tasks.add(task)
            elif task == "both":
                tasks.update(("inference", "generation"))
        return tasks

    def has_task(self, task: str, scorer: str) -> bool:
        """Whether to report ``task`` under ``scorer``. A matcher scorer
        ("<evaluator>+<matcher>") reports generation only when it holds judge results."""
        if task not in self.tasks:
            return False
        if task == "generation" and "+" in scorer:
            if scorer not in self._judged:
                self._judged[scorer] = any(_scorer_has(data, scorer, "generation")
                                           for data in self.instances.values())
            return self._judged[scorer]
        return True


def _scorer_has(data: dict, scorer: str, task: str) -> bool:
    evaluation = (data.get("evaluations") or {}).get(scorer)
    if not isinstance(evaluation, dict):
        return False
    if evaluation.get(task) is not None:
        return True
    return any(step in (evaluation.get("steps") or {}) for step in TASK_STEPS[task][1])


def find_run_dirs(root: str | Path) -> list[Path]:
    """Every directory under ``root`` (itself included) that holds a run.json."""
    root = Path(root)
    return sorted(p.parent for p in root.rglob("run.json") if p.is_file())


def _is_instance_file(path: Path) -> bool:
    """run.json, results.json and results.<scorer>.json are not instance files."""
    return (path.is_file() and path.suffix == ".json" and not path.name.startswith(".")
            and path.name != "run.json" and not path.name.startswith("results."))


def _is_results_file(path: Path) -> bool:
    return path.is_file() and path.suffix == ".json" and (
        path.name == "results.json" or path.name.startswith("results."))


def not_a_run(manifest: Any) -> str | None:
    """Why a run.json is not an evaluation run's manifest, or None when it is one."""
    if not isinstance(manifest, dict):
        return "its run.json is not an object"
    if isinstance(manifest.get("settings"), dict) and "model" not in manifest:
        return "a synthesis output (its run.json holds synthesis settings)"
    if not isinstance(manifest.get("model"), str) or not manifest["model"]:
        return "its run.json names no model"
    return None


def load_runs(root: str | Path, ignored: list[str] | None = None) -> list[Run]:
    """Read every run directory under ``root``; runs of the same (model, setting) merge.

    Unreadable or foreign files are skipped with a warning on the run, never silently; a
    directory whose run.json is not an evaluation run's (a synthesis output, say) is left
    out with a note appended to ``ignored``.
    """
    runs: dict[tuple[str, str], Run] = {}
    ignored = [] if ignored is None else ignored
    for directory in find_run_dirs(root):
        try:
            manifest = read_json(directory / "run.json")
        except (OSError, ValueError) as exc:
            ignored.append(f"{directory}: left out, its run.json cannot be read ({exc})")
            continue
        reason = not_a_run(manifest)
        if reason:
            ignored.append(f"{directory}: left out, not an evaluation run: {reason}")
            continue
        model = str(manifest["model"])
        setting = str(manifest.get("setting") or "default")
        run = runs.setdefault((model, setting), Run(model, setting))
        run.directories.append(directory)
        run.manifests.append(manifest)
        for path in sorted(directory.iterdir()):
            if _is_results_file(path):
                # Aggregates are never used for numbers; only their settings and counts.
                try:
                    results = read_json(path)
                    if isinstance(results, dict):
                        run.results.append(results)
                except (OSError, ValueError) as exc:
                    run.warnings.append(f"{path}: unreadable ({exc}); not used")
                continue
            if not _is_instance_file(path):
                continue
            try:
                data = read_json(path)
            except (OSError, ValueError) as exc:
                run.warnings.append(f"{path}: unreadable, left out ({exc})")
                continue
            if not isinstance(data, dict) or not data.get("instance_id"):
                run.warnings.append(f"{path}: not an instance file (no instance_id), left out")
                continue
            instance_id = str(data["instance_id"])
            if instance_id in run.instances:
                run.warnings.append(f"{path}: instance {instance_id} already read from another "
                                    f"directory of the same model and setting; this copy is left out")
                continue
            run.instances[instance_id] = data
    return sorted(runs.values(), key=lambda r: (r.model, _setting_order(r.setting)))


def _setting_order(setting: str) -> tuple[int, str]:
    return (SETTINGS.index(setting) if setting in SETTINGS else len(SETTINGS), setting)


# =======================================================================================
# Per-instance outcomes
# =======================================================================================
@dataclass
class Outcome:
    """One task under one scorer in one run: the usable per-instance values, and the
    instances left out (failed: the first failed step and its error; missing: not done yet;
    skipped: the setting does not apply, i.e. oracle with no relevant prior session)."""
    values: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)   # id -> (step, error)
    missing: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def n_applicable(self) -> int:
        """Instances the task applies to: evaluated + failed + missing (not skipped)."""
        return len(self.values) + len(self.failed) + len(self.missing)

    def failed_by_step(self) -> Counter:
        return Counter(step for step, _ in self.failed.values())

    def errors(self) -> Counter:
        """(step, error text) -> how many instances."""
        return Counter(self.failed.values())

    def restrict(self, ids: Iterable[str]) -> "Outcome":
        ids = set(ids)
        return Outcome({k: v for k, v in self.values.items() if k in ids},
                       {k: v for k, v in self.failed.items() if k in ids},
                       [k for k in self.missing if k in ids],
                       [k for k in self.skipped if k in ids])


def _first_failed_step(data: dict, scorer: str, task: str) -> tuple[str, str] | None:
    instance_steps, scorer_steps = TASK_STEPS[task]
    steps = data.get("steps") or {}
    evaluation = (data.get("evaluations") or {}).get(scorer)
    scorer_step_data = (evaluation.get("steps") or {}) if isinstance(evaluation, dict) else {}
    for name in instance_steps:
        step = steps.get(name)
        if isinstance(step, dict) and step.get("status") == "failed":
            return name, str(step.get("error") or "")
    for name in scorer_steps:
        step = scorer_step_data.get(name)
        if isinstance(step, dict) and step.get("status") == "failed":
            return name, str(step.get("error") or "")
    return None


def _inference_value(evaluation: dict) -> InferenceCounts | None:
    data = evaluation.get("inference")
    if data is None:
        return None
    return InferenceCounts.from_dict(data)


def _generation_value(evaluation: dict) -> float | None:
    data = evaluation.get("generation")
    if data is None:
        return None
    score = data.get("score") if isinstance(data, dict) else None
    if isinstance(score, bool) or not isinstance(score, (int, float)) or math.isnan(float(score)):
        raise ValueError(f"generation.score is {score!r}, not a number")
    return float(score)


def outcome(run: Run, scorer: str, task: str) -> Outcome:
    """Per-instance values of ``task`` ("inference": InferenceCounts, "generation": judge
    score) under ``scorer``, and which instances are left out and why."""
    if task not in TASK_STEPS:
        raise ValueError(f"unknown task {task!r}")
    read = _inference_value if task == "inference" else _generation_value
    result = Outcome()
    for instance_id in run.ids():
        data = run.instances[instance_id]
        evaluation = (data.get("evaluations") or {}).get(scorer)
        value = None
        if isinstance(evaluation, dict):
            try:
                value = read(evaluation)
            except (KeyError, TypeError, ValueError) as exc:
                result.failed[instance_id] = (f"{task} result", f"malformed: {exc}")
                continue
        if value is not None:
            result.values[instance_id] = value
            continue
        failure = _first_failed_step(data, scorer, task)
        if failure:
            result.failed[instance_id] = failure
        elif run.setting == "oracle" and history_of(data).get("relevant_positions") == []:
            result.skipped.append(instance_id)
        else:
            result.missing.append(instance_id)
    return result


def history_of(data: dict) -> dict:
    history = data.get("history")
    return history if isinstance(history, dict) else {}


def choose_scorer(run: Run, task: str) -> str | None:
    """The scorer a model-level figure uses for ``run``: a plain evaluator scorer (the
    paper's GPT-4o matcher) with the most results; a matcher scorer only if none exists."""
    candidates = [s for s in run.scorers if run.has_task(task, s)]
    if not candidates:
        return None
    return max(candidates, key=lambda s: ("+" not in s, outcome(run, s, task).n, s))
