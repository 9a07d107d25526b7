"""The report's statistics (evaluation/report/statistics.py) in process, on small hand-worked
data: point values, interval bounds around them, the resampling counts, clusters, paired
differences and their p-values, Pearson's r and p against scipy, and the binning of Figures
3 and 9 (tests/evaluation/report/test_clustered_intervals.py pins the intervals themselves)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cupid.evaluation.metrics import InferenceCounts as C
from cupid.evaluation.report import statistics as S


def test_an_instances_prf_scores_an_empty_side_zero():
    assert S.instance_prf(C(1, 2, 1, 4)) == (0.5, 0.25, pytest.approx(1 / 3))
    assert S.instance_prf(C(0, 0, 1, 2)) == (0.0, 0.5, 0.0)
    assert S.instance_prf(C(1, 1, 0, 0)) == (1.0, 0.0, 0.0)
    assert S.instance_prf(C(0, 2, 0, 2)) == (0.0, 0.0, 0.0)


def test_the_mean_and_its_interval():
    est = S.bootstrap([2, 4, 6, 8], "mean", n_bootstrap=400, seed=1)
    assert est.value == 5.0 and est.n == 4
    assert 2 <= est.low < 5 < est.high <= 8
    constant = S.bootstrap([3, 3, 3], n_bootstrap=50)
    assert (constant.value, constant.low, constant.high, constant.n) == (3.0, 3.0, 3.0, 3)
    assert S.bootstrap([], "mean") == S.Estimate(None, None, None, 0)
    assert S.DEFAULT_N_BOOTSTRAP == 1000


def test_micro_and_macro_inference_with_their_intervals():
    counts = [C(1, 2, 1, 4), C(3, 3, 2, 2), C(0, 1, 0, 2)]
    micro = S.bootstrap_inference(counts, "micro", n_bootstrap=300, seed=2)
    p, r = 4 / 6, 3 / 8
    assert micro["precision"].value == pytest.approx(p) and micro["recall"].value == pytest.approx(r)
    assert micro["f1"].value == pytest.approx(2 * p * r / (p + r))
    macro = S.bootstrap_inference(counts, "macro", n_bootstrap=300, seed=2)
    assert macro["precision"].value == pytest.approx((0.5 + 1 + 0) / 3)
    assert macro["recall"].value == pytest.approx((0.25 + 1 + 0) / 3)
    assert macro["f1"].value == pytest.approx((1 / 3 + 1 + 0) / 3)
    for est in (*micro.values(), *macro.values()):
        assert est.n == 3 and est.low <= est.value <= est.high
    assert S.bootstrap(counts, "micro_recall", n_bootstrap=300, seed=2) == micro["recall"]
    # nothing predicted anywhere: precision (hence F1) undefined, recall 0
    none = S.bootstrap_inference([C(0, 0, 0, 2)], "micro", n_bootstrap=20)
    assert none["precision"] == S.Estimate(None, None, None, 1)
    assert none["recall"].value == 0.0 and none["f1"].value is None


@pytest.mark.parametrize("metric", ["median", "micro_accuracy", "weighted_f1", "micro"])
def test_an_unknown_metric_is_named(metric):
    with pytest.raises(ValueError, match=f"^unknown metric '{metric}': use 'mean', 'micro_<p|r|f1>' or "
                                         f"'macro_<p|r|f1>'$"):
        S.bootstrap([C(1, 1, 1, 1)], metric)


def test_resampling_counts_draw_n_of_n_the_same_for_the_same_seed():
    w = S.bootstrap_weights(5, 200, 7)
    assert w.shape == (200, 5) and (w.sum(axis=1) == 5).all() and (w >= 0).all()
    assert not w.flags.writeable
    assert S.bootstrap_weights(5, 200, 7) is w
    assert not np.array_equal(S.bootstrap_weights(5, 200, 8), w)
    # every cluster is drawn about as often as any other
    assert np.allclose(w.mean(axis=0), 1.0, atol=0.2)
    draws = np.random.default_rng(7).integers(0, 5, size=(200, 5))
    assert np.array_equal(w[0], np.bincount(draws[0], minlength=5))


def test_clusters_are_summed_in_order_of_first_appearance():
    data = np.array([[1.0, 1], [2, 1], [4, 1], [8, 1]])
    assert np.array_equal(S.cluster_sums(data, ["b", "a", "b", "c"]), [[5, 2], [2, 1], [8, 1]])
    assert S.cluster_sums(data, None) is data
    assert np.array_equal(S.cluster_sums(data, [1, 2, 3, 4]), data)
    with pytest.raises(ValueError, match="^3 cluster labels for 4 items$"):
        S.cluster_sums(data, ["a", "b", "c"])


def test_a_cluster_is_drawn_whole():
    """Two personas, each with two equal instances: every resample's mean is the mean of
    whole personas (0, 5 or 10), never a mix of instances."""
    values, clusters = [0, 0, 10, 10], ["p1", "p1", "p2", "p2"]
    est = S.bootstrap(values, clusters=clusters, n_bootstrap=400, seed=3)
    assert est.value == 5.0 and (est.low, est.high) == (0.0, 10.0)
    weights = S.bootstrap_weights(2, 400, 3)
    means = (weights @ np.array([[0, 2], [20, 2]], dtype=float))
    assert set((means[:, 0] / means[:, 1]).tolist()) <= {0.0, 5.0, 10.0}


def test_a_paired_difference_on_the_shared_keys():
    a = {"i1": 8, "i2": 6, "i3": 7, "only_a": 1}
    b = {"i1": 5, "i2": 6, "i3": 4, "only_b": 9}
    d = S.paired_bootstrap(a, b, n_bootstrap=400, seed=4)
    assert (d.n, d.value_a, d.value_b) == (3, 7.0, 5.0) and d.difference == 2.0
    assert d.low == 0.0 and d.high == 3.0
    weights = S.bootstrap_weights(3, 400, 4)
    diffs = (weights @ [3.0, 0.0, 3.0]) / 3
    assert d.p_value == pytest.approx(2 * np.mean(diffs <= 0)) and 0 < d.p_value < 0.2
    same = S.paired_bootstrap({"x": 1, "y": 2}, {"x": 1, "y": 2}, n_bootstrap=100)
    assert same.difference == 0.0 and same.p_value == 1.0 and (same.low, same.high) == (0.0, 0.0)
    assert S.paired_bootstrap({"x": 1}, {"y": 1}) == S.PairedDifference(None, None, None, None, 0, None, None)
    mixed = S.paired_bootstrap({"x": 3, "y": 0}, {"x": 0, "y": 1}, n_bootstrap=400, seed=5)
    assert mixed.difference == 1.0 and 0 < mixed.p_value < 1
    weights = S.bootstrap_weights(2, 400, 5)
    diffs = (weights @ [3.0, 0.0]) / 2 - (weights @ [0.0, 1.0]) / 2
    assert mixed.p_value == pytest.approx(min(1.0, 2 * min(np.mean(diffs <= 0), np.mean(diffs >= 0))))


def test_a_paired_difference_by_clusters_and_of_counts():
    a = {"i1": C(1, 1, 1, 1), "i2": C(0, 1, 0, 1)}
    b = {"i1": C(0, 0, 0, 1), "i2": C(0, 0, 0, 1)}
    d = S.paired_bootstrap(a, b, "micro_f1", clusters={"i1": "p", "i2": "p"}, n_bootstrap=50)
    assert d.value_a == 0.5 and d.value_b is None and d.difference is None
    assert (d.low, d.high) == (None, None) and d.p_value is None   # b's F1 undefined in every resample
    e = S.paired_bootstrap(a, {"i1": C(1, 2, 1, 2), "i2": C(1, 2, 1, 2)}, "micro_f1", clusters={"i1": "p", "i2": "p"},
                           n_bootstrap=50)
    assert e.difference == 0.0 and (e.low, e.high) == (0.0, 0.0)   # one cluster: every resample is the data


@pytest.mark.parametrize("x, y", [
    ([1, 2, 3, 4, 5], [2, 1, 4, 3, 6]),
    ([1, 2, 3, 4, 5, 6], [6, 5, 5, 3, 2, 2]),
    ([0.5, 1.5, 2, 7], [1, 0, 3, 2]),
    ([1, 2, 3], [1, 3, 2]),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], [3, 1, 4, 1, 5, 9, 2, 6, 5]),
])
def test_pearson_is_scipys(x, y):
    from scipy import stats

    expected = stats.pearsonr(x, y)
    found = S.pearson(x, y)
    assert found.r == pytest.approx(expected[0]) and found.p_value == pytest.approx(expected[1], rel=1e-9, abs=1e-12)
    assert found.n == len(x) and found.note == ""


def test_pearson_where_it_is_undefined_or_perfect():
    assert S.pearson([1, 2], [2, 3]) == S.Correlation(None, None, 2, "needs at least 3 points")
    assert S.pearson([1, 1, 1], [1, 2, 3]) == S.Correlation(None, None, 3, "a variable is constant")
    assert S.pearson([1, 2, 3], [4, 4, 4]).note == "a variable is constant"
    perfect = S.pearson([1, 2, 3, 4], [2, 4, 6, 8])
    assert perfect.r == 1.0 and perfect.p_value == 0.0
    assert S.pearson([1, 2, 3, 4], [8, 6, 4, 2]).r == -1.0
    assert S.pearson_p_value(1.0, 10) == 0.0 and S.pearson_p_value(-1.0, 5) == 0.0
    assert S.pearson_p_value(0.0, 10) == pytest.approx(1.0)
    assert S.pearson_p_value(0.0, 3) == pytest.approx(1.0)


def test_equal_size_bins_never_split_equal_values():
    values = {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}
    bins = S.equal_size_bins(values, 3)
    assert [(b.low, b.high, b.keys, b.n) for b in bins] == [(1.0, 2.0, ("a", "b"), 2), (3.0, 4.0, ("c", "d"), 2),
                                                            (5.0, 6.0, ("e", "f"), 2)]
    tied = S.equal_size_bins({"a": 1, "b": 1, "c": 1, "d": 2}, 2)
    assert [b.keys for b in tied] == [("a", "b", "c"), ("d",)]
    all_tied = S.equal_size_bins({"x": 3, "y": 3}, 2)
    assert [b.keys for b in all_tied] == [("x", "y")]
    assert [b.keys for b in S.equal_size_bins({"q": 2, "p": 2, "r": 1}, 1)] == [("r", "p", "q")]
    assert [b.n for b in S.equal_size_bins({str(k): k for k in range(7)}, 3)] == [2, 3, 2]
    assert S.equal_size_bins({}, 3) == []
    with pytest.raises(ValueError, match="^n_bins must be at least 1$"):
        S.equal_size_bins(values, 0)


def test_group_by_value_rounds_to_the_resolution():
    groups = S.group_by_value({"b": 1.2, "a": 1.3, "c": 2.76, 10: 0.1, 9: 0.2})
    assert [(g.low, g.high, g.keys) for g in groups] == [(0.0, 0.0, (10, 9)), (1.0, 1.0, ("b",)),
                                                         (1.5, 1.5, ("a",)), (3.0, 3.0, ("c",))]
    assert [g.keys for g in S.group_by_value({"x": 1.24, "y": 1.26}, resolution=0.1)] == [("x",), ("y",)]
    assert S.group_by_value({}) == []


def test_bin_means_skip_missing_values():
    bins = [S.Bin(0, 1, ("a", "b", "c")), S.Bin(2, 3, ("d",))]
    assert S.bin_means(bins, {"a": 2.0, "b": None, "c": 4.0}) == [(3.0, 2), (None, 0)]
    assert S.mean_position([1, 2, 6]) == 3.0
    assert S.mean_position([]) is None and S.mean_position(None) is None


def test_one_blas_thread_limits_the_blas_pools():
    from threadpoolctl import threadpool_info

    with S.one_blas_thread():
        pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
        assert all(p["num_threads"] == 1 for p in pools)
    assert math.isclose(float(np.ones(3) @ np.ones(3)), 3.0)


def test_the_defaults_seed_0_and_micro():
    values, counts = [1, 5, 2, 8, 3], [C(1, 2, 1, 4), C(3, 3, 2, 2), C(0, 1, 0, 2)]
    assert S.bootstrap(values) == S.bootstrap(values, "mean", seed=0, n_bootstrap=1000)
    assert S.bootstrap_inference(counts) == S.bootstrap_inference(counts, "micro", seed=0, n_bootstrap=1000)
    a, b = dict(enumerate(values)), {k: v + 1 for k, v in enumerate(values)}
    assert S.paired_bootstrap(a, b) == S.paired_bootstrap(a, b, "mean", seed=0, n_bootstrap=1000)
    assert S.paired_bootstrap(a, b).low != S.paired_bootstrap(a, {k: v + (k % 2) for k, v in a.items()}).low


def test_keys_of_mixed_types_and_a_single_pair_or_item():
    d = S.paired_bootstrap({1: 3.0, "a": 1.0}, {1: 1.0, "a": 1.0}, n_bootstrap=50)
    assert d.n == 2 and d.difference == 1.0
    one = S.paired_bootstrap({"x": 4}, {"x": 1}, n_bootstrap=20)
    assert (one.n, one.difference, one.low, one.high, one.p_value) == (1, 3.0, 3.0, 3.0, 0.0)
    assert [(b.low, b.keys) for b in S.equal_size_bins({"only": 2.5}, 3)] == [(2.5, ("only",))]


def test_micro_f1_of_nothing_matched_is_zero_in_every_resample():
    """Pooled precision and recall both 0 (nothing matched, both sides non-empty): F1 is 0,
    not undefined and never 1."""
    est = S.bootstrap_inference([C(0, 2, 0, 3), C(0, 1, 0, 1)], "micro", n_bootstrap=50)
    assert est["f1"] == S.Estimate(0.0, 0.0, 0.0, 2)
    assert est["precision"].value == 0.0 and est["recall"].value == 0.0
