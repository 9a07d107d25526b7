"""Statistics of evaluation.report (statistics.py, results.py): bootstrap, paired bootstrap, correlation, binning,
and reading run directories."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cupid.evaluation.report import results
from cupid.evaluation.report import statistics as A
from cupid.evaluation.metrics import InferenceCounts, macro_inference, micro_inference
from fixtures_results import GPT4O, M, S, build_results_dir


def ic(pm, npred, tm, ntrue) -> InferenceCounts:
    return InferenceCounts(pm, npred, tm, ntrue)


# ---------------------------------------------------------------------------------------
# Bootstrap
# ---------------------------------------------------------------------------------------
def test_all_equal_values_give_a_zero_width_interval():
    est = A.bootstrap([7.0] * 20, n_bootstrap=500, seed=1)
    assert (est.value, est.low, est.high, est.n) == (7.0, 7.0, 7.0, 20)
    assert est.high - est.low == 0


def test_two_values_interval_is_the_whole_range():
    # Resampled means of {0, 1} are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4, so the
    # 2.5th and 97.5th percentiles of many resamples are 0 and 1.
    est = A.bootstrap([0.0, 1.0], n_bootstrap=4000, seed=3)
    assert est.value == 0.5
    assert (est.low, est.high) == (0.0, 1.0)


def test_bootstrap_is_seeded():
    values = [1, 5, 2, 8, 3, 9, 4, 4, 6]
    a = A.bootstrap(values, n_bootstrap=300, seed=11)
    b = A.bootstrap(values, n_bootstrap=300, seed=11)
    c = A.bootstrap(values, n_bootstrap=300, seed=12)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)
    assert a.low < a.value < a.high


def test_weights_are_draws_with_replacement():
    weights = A.bootstrap_weights(10, 50, seed=0)
    assert weights.shape == (50, 10)
    assert (weights.sum(axis=1) == 10).all()
    assert (weights >= 0).all()
    # The same (n, B, seed) gives the same resamples; another seed another.
    assert np.array_equal(weights, A.bootstrap_weights(10, 50, seed=0))
    assert not np.array_equal(weights, A.bootstrap_weights(10, 50, seed=1))


def test_empty_input_gives_no_estimate():
    assert A.bootstrap([]) == A.Estimate(None, None, None, 0)
    assert A.bootstrap_inference([])["f1"].value is None


def test_micro_point_estimates_match_metrics_micro_inference():
    counts = [ic(1, 2, 1, 2), ic(2, 2, 1, 2), ic(0, 2, 0, 3), ic(1.5, 3, 1, 2)]
    expected = micro_inference(counts)
    got = A.bootstrap_inference(counts, "micro", n_bootstrap=200, seed=0)
    for name in ("precision", "recall", "f1"):
        assert got[name].value == pytest.approx(expected[name])
        assert got[name].low <= got[name].value <= got[name].high
    # By hand: P = 4.5/9, R = 3/9, F1 = 2*4.5/(9+9)... = 2PR/(P+R)
    assert got["precision"].value == pytest.approx(0.5)
    assert got["recall"].value == pytest.approx(3 / 9)
    assert got["f1"].value == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))


def test_macro_point_estimates_match_metrics_macro_inference():
    counts = [ic(1, 2, 1, 2), ic(2, 2, 1, 2), ic(0, 2, 0, 3), ic(0, 0, 1, 2)]  # last: empty checklist
    expected = macro_inference(counts)
    got = A.bootstrap_inference(counts, "macro", n_bootstrap=200, seed=0)
    for name in ("precision", "recall", "f1"):
        assert got[name].value == pytest.approx(expected[name])
    # By hand: precisions .5, 1, 0, 0 -> .375; recalls .5, .5, 0, .5 -> .375
    assert got["precision"].value == pytest.approx(0.375)
    assert got["recall"].value == pytest.approx(0.375)


def test_micro_bootstrap_recomputes_the_pooled_ratio_not_a_mean_of_ratios():
    # One big instance and one small one: the pooled precision is dominated by the big one.
    counts = [ic(10, 10, 10, 10), ic(0, 1, 0, 1)]
    est = A.bootstrap(counts, "micro_precision", n_bootstrap=2000, seed=0)
    assert est.value == pytest.approx(10 / 11)
    # Resamples: both big (1.0), one of each (10/11), both small (0.0).
    assert est.low == 0.0 and est.high == 1.0
    macro = A.bootstrap(counts, "macro_precision", n_bootstrap=10, seed=0)
    assert macro.value == pytest.approx(0.5)


def test_single_instance_interval_has_zero_width():
    est = A.bootstrap_inference([ic(1, 2, 1.5, 2)], n_bootstrap=100, seed=0)
    assert est["f1"].value == pytest.approx(2 * 0.5 * 0.75 / 1.25)
    assert est["f1"].low == est["f1"].high == pytest.approx(est["f1"].value)


def test_unknown_metric_is_refused():
    with pytest.raises(ValueError):
        A.bootstrap([1.0], "median")


def test_bootstrap_interval_covers_the_true_mean_about_95_percent():
    rng = np.random.default_rng(2024)
    true_mean, covered, reps = 5.0, 0, 300
    for rep in range(reps):
        sample = rng.normal(true_mean, 2.0, size=60)
        est = A.bootstrap(sample.tolist(), n_bootstrap=400, seed=rep)
        covered += est.low <= true_mean <= est.high
    coverage = covered / reps
    assert 0.90 <= coverage <= 0.99, coverage


# ---------------------------------------------------------------------------------------
# Paired bootstrap
# ---------------------------------------------------------------------------------------
def test_constant_shift_shows_in_the_paired_bootstrap():
    rng = np.random.default_rng(0)
    b = {f"i{k}": float(v) for k, v in enumerate(rng.integers(1, 11, size=30))}
    a = {k: v + 2.0 for k, v in b.items()}
    d = A.paired_bootstrap(a, b, "mean", n_bootstrap=500, seed=0)
    assert d.n == 30
    assert d.difference == pytest.approx(2.0)
    assert d.low == pytest.approx(2.0) and d.high == pytest.approx(2.0)
    assert d.p_value == 0.0
    # Unpaired, the same shift is blurred by the spread of the scores.
    ua, ub = A.bootstrap(list(a.values()), seed=0), A.bootstrap(list(b.values()), seed=1)
    assert ua.high - ua.low > 0.5 and ub.high - ub.low > 0.5


def test_identical_sides_give_zero_difference_and_p_one():
    a = {"x": 3.0, "y": 5.0, "z": 9.0}
    d = A.paired_bootstrap(a, dict(a), "mean", n_bootstrap=200, seed=0)
    assert (d.difference, d.low, d.high, d.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_paired_bootstrap_uses_only_shared_instance_ids():
    a = {"x": 1.0, "y": 2.0, "only_a": 100.0}
    b = {"x": 0.0, "y": 0.0, "only_b": -100.0}
    d = A.paired_bootstrap(a, b, "mean", n_bootstrap=100, seed=0)
    assert d.n == 2
    assert (d.value_a, d.value_b, d.difference) == (1.5, 0.0, 1.5)
    assert A.paired_bootstrap({"p": 1.0}, {"q": 1.0}).n == 0


def test_paired_micro_f1_difference():
    a = {"i1": ic(2, 2, 2, 2), "i2": ic(1, 2, 1, 2)}
    b = {"i1": ic(1, 2, 1, 2), "i2": ic(1, 2, 1, 2)}
    d = A.paired_bootstrap(a, b, "micro_f1", n_bootstrap=2000, seed=0)
    # a pooled: P = R = 3/4 -> F1 .75; b: .5.  Resamples: (i1,i1) 1-.5, mixed .75-.5, (i2,i2) 0.
    assert d.difference == pytest.approx(0.25)
    assert d.low == pytest.approx(0.0) and d.high == pytest.approx(0.5)


def test_pairing_narrows_the_interval_for_correlated_sides():
    rng = np.random.default_rng(5)
    base = rng.normal(6, 2, size=80)
    a = {i: float(v + 0.3 + rng.normal(0, 0.1)) for i, v in enumerate(base)}
    b = {i: float(v) for i, v in enumerate(base)}
    paired = A.paired_bootstrap(a, b, "mean", n_bootstrap=500, seed=0)
    sep_a = A.bootstrap(list(a.values()), n_bootstrap=500, seed=1)
    sep_b = A.bootstrap(list(b.values()), n_bootstrap=500, seed=2)
    unpaired_width = math.hypot(sep_a.high - sep_a.low, sep_b.high - sep_b.low)
    assert paired.high - paired.low < unpaired_width / 5
    assert paired.low > 0


# ---------------------------------------------------------------------------------------
# Correlation
# ---------------------------------------------------------------------------------------
def test_pearson_matches_numpy_corrcoef():
    rng = np.random.default_rng(7)
    x = rng.normal(size=50)
    y = 0.6 * x + rng.normal(size=50)
    corr = A.pearson(x.tolist(), y.tolist())
    assert corr.r == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert corr.n == 50


def test_pearson_known_values():
    assert A.pearson([1, 2, 3, 4], [2, 4, 6, 8]).r == pytest.approx(1.0)
    assert A.pearson([1, 2, 3, 4], [8, 6, 4, 2]).r == pytest.approx(-1.0)
    # x = 1,2,3; y = 1,3,2: Σdxdy = 1, Σdx² = 2, Σdy² = 2 -> r = 1/2.
    corr = A.pearson([1, 2, 3], [1, 3, 2])
    assert corr.r == pytest.approx(0.5)
    # n = 3, r = 1/2: t = r·sqrt(1/(1-r²)) = 1/sqrt(3) with 1 df (Cauchy):
    # p = 1 - (2/π)·atan(1/sqrt(3)) = 1 - 1/3 = 2/3.
    assert corr.p_value == pytest.approx(2 / 3, rel=1e-12)


@pytest.mark.parametrize("r", [0.0, 0.1, 0.5, -0.73, 0.99, 0.999999])
def test_pearson_p_value_closed_forms(r):
    # 1 df (n = 3): p = 1 - (2/π)·atan(|t|); 2 df (n = 4): p = 1 - |t|/sqrt(2 + t²) = 1 - |r|.
    t = abs(r) / math.sqrt(1 - r * r)
    assert A.pearson_p_value(r, 3) == pytest.approx(1 - 2 / math.pi * math.atan(t), rel=1e-10, abs=1e-14)
    assert A.pearson_p_value(r, 4) == pytest.approx(1 - abs(r), rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("n, r_critical, p", [
    # Critical values of Pearson's r (two-sided), from the standard table (4 decimals).
    (10, 0.6319, 0.05), (10, 0.7646, 0.01), (30, 0.3610, 0.05), (102, 0.1946, 0.05), (22, 0.5368, 0.01),
    (11, 0.6021, 0.05), (13, 0.5529, 0.05), (25, 0.5052, 0.01)])  # odd df too
def test_pearson_p_value_matches_the_table_of_critical_values(n, r_critical, p):
    assert A.pearson_p_value(r_critical, n) == pytest.approx(p, rel=3e-3)
    assert A.pearson_p_value(-r_critical, n) == pytest.approx(p, rel=3e-3)


def test_pearson_degenerate_cases():
    assert A.pearson([1, 2], [3, 4]).r is None
    assert "3 points" in A.pearson([1, 2], [3, 4]).note
    assert A.pearson([1, 2, 3], [5, 5, 5]).r is None
    with pytest.raises(ValueError):
        A.pearson([1, 2, 3], [1, 2])


# ---------------------------------------------------------------------------------------
# Binning
# ---------------------------------------------------------------------------------------
def test_equal_size_bins_distinct_values():
    values = {f"i{k}": float(v) for k, v in enumerate([50, 10, 40, 20, 30, 100, 90, 60, 80, 70])}
    bins = A.equal_size_bins(values, 5)
    assert [b.n for b in bins] == [2, 2, 2, 2, 2]
    assert [(b.low, b.high) for b in bins] == [(10, 20), (30, 40), (50, 60), (70, 80), (90, 100)]
    for prev, nxt in zip(bins, bins[1:]):
        assert nxt.low > prev.high  # monotone, no overlap
    assert sorted(k for b in bins for k in b.keys) == sorted(values)
    # Hand-computed means of y = value / 10 per bin: 1.5, 3.5, 5.5, 7.5, 9.5
    ys = {k: v / 10 for k, v in values.items()}
    assert A.bin_means(bins, ys) == [(1.5, 2), (3.5, 2), (5.5, 2), (7.5, 2), (9.5, 2)]


def test_equal_size_bins_keep_ties_together():
    values = dict(enumerate([1, 2, 2, 2, 3, 4]))
    bins = A.equal_size_bins(values, 2)
    # The cut after 3 items would split the 2s; it moves after the last 2.
    assert [(b.low, b.high, b.n) for b in bins] == [(1, 2, 4), (3, 4, 2)]
    assert A.equal_size_bins(dict(enumerate([5, 5, 5, 5])), 3) == [A.Bin(5, 5, (0, 1, 2, 3))]


def test_equal_size_bins_uneven_and_small():
    bins = A.equal_size_bins(dict(enumerate([1, 2, 3, 4, 5, 6, 7])), 3)
    assert [b.n for b in bins] == [2, 3, 2]  # cuts at round(7/3)=2 and round(14/3)=5
    assert [b.n for b in A.equal_size_bins(dict(enumerate([3, 1, 2])), 5)] == [1, 1, 1]
    assert A.equal_size_bins({}, 3) == []
    with pytest.raises(ValueError):
        A.equal_size_bins({1: 1.0}, 0)


def test_bin_means_skip_missing_keys():
    bins = [A.Bin(0, 1, ("a", "b", "c")), A.Bin(2, 3, ("d",))]
    assert A.bin_means(bins, {"a": 1.0, "c": 0.0}) == [(0.5, 2), (None, 0)]


def test_group_by_value_and_mean_position():
    assert A.mean_position([3, 6]) == 4.5
    assert A.mean_position([]) is None and A.mean_position(None) is None
    groups = A.group_by_value({"a": 1.5, "b": 4.5, "c": 1.5, "d": 4.4, "e": 7.0}, 0.5)
    assert [(g.low, g.keys) for g in groups] == [(1.5, ("a", "c")), (4.5, ("b", "d")), (7.0, ("e",))]


# ---------------------------------------------------------------------------------------
# Reading results
# ---------------------------------------------------------------------------------------
@pytest.fixture()
def results_dir(tmp_path):
    return build_results_dir(tmp_path / "results")


def test_load_runs_groups_by_model_and_setting(results_dir):
    runs = results.load_runs(results_dir)
    keys = {r.key for r in runs}
    assert (GPT4O, "default") in keys and (GPT4O, "oracle_preference") in keys
    assert len(runs) == 6
    run = next(r for r in runs if r.key == (GPT4O, "default"))
    assert len(run.instances) == 9
    assert run.scorers == [S, M]
    assert run.tasks == {"inference", "generation"}
    assert run.expected_instances == 9
    assert len(run.results) == 2  # results.json and results.<scorer>.json, not instance files
    assert run.warnings == []
    op = next(r for r in runs if r.key == (GPT4O, "oracle_preference"))
    assert op.tasks == {"generation"}


def test_outcomes_count_failed_and_missing(results_dir):
    run = next(r for r in results.load_runs(results_dir) if r.key == (GPT4O, "default"))
    inf = results.outcome(run, S, "inference")
    assert inf.n == 7
    assert inf.failed == {"p3__consistent": ("infer", "ModelCallFailed: 500")}
    assert inf.missing == ["p3__changing"]
    gen = results.outcome(run, S, "generation")
    assert gen.n == 8 and list(gen.failed) == ["p3__changing"] and gen.missing == []
    assert gen.failed_by_step() == {"generate": 1}
    assert gen.values["p1__changing"] == 10.0
    consistent = inf.restrict(run.ids("consistent"))
    assert (consistent.n, len(consistent.failed), len(consistent.missing)) == (2, 1, 0)
    # The matcher scorer holds no judge results: generation is not reported under it.
    assert run.has_task("inference", M) and not run.has_task("generation", M)


def test_unreadable_and_foreign_files_are_warned_about(results_dir):
    run_dir = results_dir / "claude-3-7-sonnet-20250219"
    (run_dir / "p1__consistent.json").write_text("{ truncated", encoding="utf-8")
    (run_dir / "notes.json").write_text(json.dumps({"hello": 1}), encoding="utf-8")
    run = next(r for r in results.load_runs(results_dir) if r.model == "claude-3-7-sonnet-20250219")
    assert len(run.instances) == 8
    assert any("p1__consistent.json" in w and "unreadable" in w for w in run.warnings)
    assert any("notes.json" in w for w in run.warnings)


def test_malformed_result_counts_as_failed(results_dir):
    path = results_dir / "claude-3-7-sonnet-20250219" / "p1__consistent.json"
    data = json.loads(path.read_text())
    data["evaluations"][S]["generation"] = {"score": "high"}
    del data["evaluations"][S]["inference"]["n_true"]
    path.write_text(json.dumps(data))
    run = next(r for r in results.load_runs(results_dir) if r.model == "claude-3-7-sonnet-20250219")
    assert results.outcome(run, S, "inference").failed["p1__consistent"][0] == "inference result"
    assert results.outcome(run, S, "generation").failed["p1__consistent"][0] == "generation result"


def test_runs_of_the_same_model_and_setting_merge(tmp_path):
    from fixtures_results import instance_file, write_run
    first = write_run(tmp_path / "a", "m", "default",
                      [instance_file("m", "default", "p1", "consistent", s_counts=(1, 2, 1, 2), score=5)])
    write_run(tmp_path / "b", "m", "default",
              [instance_file("m", "default", "p2", "consistent", s_counts=(2, 2, 2, 2), score=9),
               instance_file("m", "default", "p1", "consistent", s_counts=(0, 2, 0, 2), score=1)])
    runs = results.load_runs(tmp_path)
    assert len(runs) == 1 and len(runs[0].directories) == 2
    assert sorted(runs[0].instances) == ["p1__consistent", "p2__consistent"]
    assert runs[0].instances["p1__consistent"]["evaluations"][S]["generation"]["score"] == 5
    assert any("already read" in w for w in runs[0].warnings)
    assert first.name == "m"


def test_oracle_instance_without_relevant_session_is_skipped(results_dir):
    run = next(r for r in results.load_runs(results_dir) if r.key == (GPT4O, "oracle"))
    inf = results.outcome(run, S, "inference")
    assert inf.skipped == ["p3__contrastive"] and inf.missing == [] and inf.failed == {}
    assert (inf.n, inf.n_applicable) == (8, 8)
    # In the default setting the same kind of instance is simply missing until evaluated.
    default = next(r for r in results.load_runs(results_dir) if r.key == (GPT4O, "default"))
    assert results.outcome(default, S, "inference").skipped == []


def test_pearson_p_value_is_scipy_pearsonr():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for n in (3, 5, 12, 80):
        x = rng.normal(size=n)
        y = 0.4 * x + rng.normal(size=n)
        assert A.pearson(x.tolist(), y.tolist()).p_value == pytest.approx(stats.pearsonr(x, y)[1], rel=1e-9, abs=1e-15)
