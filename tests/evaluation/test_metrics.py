import pytest

from cupid.evaluation.metrics import InferenceCounts, f1_score, generation_summary, macro_inference, micro_inference
from cupid.evaluation.aggregate import InstanceOutcome, aggregate


def test_micro_pools_counts_while_macro_averages_instances():
    # Instance 1: 4 inferred entries all fully covered (P=1), 1 truth entry not covered (R=0).
    # Instance 2: 1 inferred entry not covered (P=0), 3 truth entries fully covered (R=1).
    a = InferenceCounts.from_scores([1, 1, 1, 1], [0])
    b = InferenceCounts.from_scores([0], [1, 1, 1])
    micro = micro_inference([a, b])
    assert micro["precision"] == pytest.approx(4 / 5)
    assert micro["recall"] == pytest.approx(3 / 4)
    assert micro["f1"] == pytest.approx(2 * 0.8 * 0.75 / 1.55)
    assert (micro["n_predicted_matched"], micro["n_predicted"], micro["n_true_matched"], micro["n_true"]) == (4, 5, 3, 4)
    macro = macro_inference([a, b])
    assert macro["precision"] == pytest.approx(0.5)
    assert macro["recall"] == pytest.approx(0.5)
    assert macro["f1"] == pytest.approx(0.0)  # each instance has F1 0


def test_empty_inferred_checklist_counts_as_zero_precision_in_macro():
    empty = InferenceCounts.from_scores([], [1, 0.5])
    assert empty.precision is None and empty.recall == 0.75
    assert macro_inference([empty])["precision"] == 0.0
    micro = micro_inference([empty, InferenceCounts.from_scores([1], [1])])
    assert micro["precision"] == 1.0  # contributes nothing to the pooled precision


def test_f1_counts_and_instance_numbers():
    assert f1_score(0.5, 0.5) == 0.5 and f1_score(0.25, 0.75) == pytest.approx(0.375)
    a = InferenceCounts.from_scores([1, 0.5], [0])
    b = InferenceCounts.from_scores([0], [1, 1])
    assert InferenceCounts.from_dict(a.as_dict()) == a
    assert InferenceCounts.from_dict({"n_predicted_matched": 1, "n_predicted": "2",
                                      "n_true_matched": 0, "n_true": 1}) == InferenceCounts(1.0, 2, 0.0, 1)
    assert micro_inference([a, b])["n_instances"] == 2
    assert macro_inference([a, b])["n_instances"] == 2
    # An instance without a ground-truth checklist recalls nothing (not everything).
    assert macro_inference([InferenceCounts.from_scores([1], [])])["recall"] == 0.0


def test_no_instances_gives_none_not_zero():
    assert micro_inference([])["precision"] is None
    assert macro_inference([])["f1"] is None
    assert generation_summary([]) == {"average_score": None, "n_instances": 0}
    assert f1_score(0, 0) == 0.0 and f1_score(None, 1) is None


def test_aggregate_counts_failures_and_excludes_them_from_metrics():
    outcomes = [
        InstanceOutcome("a", "consistent", "done", InferenceCounts.from_scores([1], [1]), 9),
        InstanceOutcome("b", "changing", "failed", InferenceCounts.from_scores([0], [0.5, 0.5]), None,
                        failures=[("judge", "unparseable answer: no 'Evaluation Score' section")]),
        InstanceOutcome("c", "changing", "failed", None, None,
                        failures=[("infer", "ModelCallFailed: HTTP 500"), ("generate", "ModelCallFailed: HTTP 500")]),
        InstanceOutcome("d", "contrastive", "skipped", skip_reason="no prior session has the current preference"),
    ]
    results = aggregate(outcomes, "both")
    assert results["inference"]["precision"] == pytest.approx(0.5)
    assert results["inference"]["recall"] == pytest.approx(2 / 3)
    assert results["inference_n_instances"] == 2
    assert results["generation"] == {"average_score": 9, "n_instances": 1}
    counts = results["counts"]
    assert (counts["instances"], counts["evaluated"], counts["failed"], counts["skipped"]) == (4, 1, 2, 1)
    assert counts["failures_by_step"]["infer"] == {"ModelCallFailed: HTTP 500": 1}
    assert sum(counts["failures_by_step"]["judge"].values()) == 1
    assert results["by_instance_type"]["changing"]["inference"]["recall"] == pytest.approx(0.5)
    assert results["by_instance_type"]["contrastive"]["generation"]["n_instances"] == 0
