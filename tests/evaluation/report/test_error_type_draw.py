"""Which inferences cupid-report --error_types draws (evaluation/report/error_types.py's
``draw``), in process: those with F1 strictly below the threshold (an F1 of exactly 0.20 is not
"below 20%"), at most ``per_model`` of them, the same for the same seed."""
from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from cupid.evaluation.metrics import InferenceCounts
from cupid.evaluation.report import error_types


def analysis(counts: dict[str, tuple]):
    values = {i: InferenceCounts(*c) for i, c in counts.items()}
    return SimpleNamespace(outcome=lambda run, scorer, task: SimpleNamespace(values=values))


def test_an_f1_of_exactly_the_threshold_is_not_below_it():
    # P = 1/2, R = 1/8: F1 = 2 * (1/16) / (5/8) = 0.2 exactly, in floating point too
    assert InferenceCounts(1, 2, 1, 8).f1 == 0.2
    an = analysis({"at": (1, 2, 1, 8), "under": (1, 9, 1, 1), "zero": (0, 2, 0, 3), "over": (1, 2, 1, 2),
                   "empty": (0, 0, 0, 0)})
    eligible, drawn, f1 = error_types.draw(an, None, "s", f1_below=0.2, per_model=10, seed=0)
    assert eligible == ["empty", "under", "zero"]
    assert drawn == eligible
    assert f1 == {"empty": 0.0, "under": pytest.approx(0.2), "zero": 0.0}
    assert f1["under"] < 0.2
    assert error_types.F1_BELOW == 0.20


def test_at_most_per_model_are_drawn_the_same_for_the_same_seed():
    an = analysis({f"i{k:02d}": (0, 2, 0, 2) for k in range(30)})
    eligible, drawn, _ = error_types.draw(an, None, "s", f1_below=0.2, per_model=5, seed=7)
    assert len(eligible) == 30 and len(drawn) == 5 and drawn == sorted(drawn)
    assert set(drawn) <= set(eligible)
    assert drawn == sorted(random.Random(7).sample(eligible, 5))
    again = error_types.draw(an, None, "s", f1_below=0.2, per_model=5, seed=7)[1]
    other = error_types.draw(an, None, "s", f1_below=0.2, per_model=5, seed=8)[1]
    assert again == drawn and other != drawn
    assert error_types.draw(an, None, "s", f1_below=0.0, per_model=5, seed=7)[:2] == ([], [])
