"""The grounding tests' item-level nulls and pass decision (reprsim.stages.grounding.nulls), and the scores they rest
on (random rankings' AUPRC, Ding's same-depth specificity, whether deletion costs a probe accuracy, the probe's
cross-validated penalty): values from worked examples and the properties a decision depends on."""

import math

import numpy as np
import pytest

from reprsim.stages.grounding import nulls, scores


def test_few_items_give_every_permutation_many_a_seeded_sample():
    every, exact = nulls.permutations(3, 999, 0)
    assert exact and len(every) == 6 and list(every[0]) == [0, 1, 2]
    assert len({tuple(p) for p in every}) == 6
    drawn, exact = nulls.permutations(8, 50, 0)  # 8! = 40,320 > 51
    assert not exact and drawn.shape == (50, 8)
    assert np.array_equal(drawn, nulls.permutations(8, 50, 0)[0])
    assert all(sorted(p) == list(range(8)) for p in drawn)


def test_p_value_counts_the_null_at_or_above_the_score():
    null = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 1.0])
    assert nulls.p_value(1.0, null, exact=True) == pytest.approx(1 / 6)  # the identity among the permutations
    assert nulls.p_value(0.45, null, exact=True) == pytest.approx(2 / 6)
    assert nulls.p_value(2.0, null, exact=False) == pytest.approx(1 / 7)  # (1 + 0) / (1 + 6)
    assert math.isnan(nulls.p_value(float("nan"), null, exact=True))


def test_a_pass_needs_the_item_null_and_the_row_interval_and_enough_items():
    decide = nulls.decide
    assert decide(0.9, 0.5, 0.0, p=0.01, min_p=0.001, items=12, min_items=10) == nulls.PASS
    assert decide(0.9, -0.1, 0.0, p=0.01, min_p=0.001, items=12, min_items=10) == nulls.FAIL  # rows
    assert decide(0.9, 0.5, 0.0, p=0.2, min_p=0.001, items=12, min_items=10) == nulls.FAIL  # items
    assert decide(0.9, 0.5, 0.0, p=0.01, min_p=0.001, items=9, min_items=10) == nulls.TOO_FEW
    # 3 models: 6 orderings, so even a perfect ρ has p = 1/6: no score could pass
    assert decide(1.0, 0.9, 0.0, p=1 / 6, min_p=1 / 6, items=12, min_items=10) == nulls.TOO_FEW


def test_a_perfect_ranking_is_decidable_on_a_large_design_not_on_a_tiny_one():
    large = scores.random_auprcs([0] * 5 + [1] * 5 + [2] * 5, draws=400, seed=0)
    assert np.mean(large) == pytest.approx(scores.random_auprc([0] * 5 + [1] * 5 + [2] * 5, draws=400))
    assert nulls.summary(1.0, large, exact=False)["p_value"] < 0.01
    tiny = scores.random_auprcs([0, 0, 1, 1], draws=400, seed=0)  # 2 positives among 6 pairs
    found = nulls.summary(1.0, tiny, exact=False)
    assert found["min_p"] > 0.05 and found["p_value"] == found["min_p"]


def test_same_depth_hits_count_the_diagonal_closest_and_split_ties():
    similar = np.array([[0.9, 0.2, 0.1], [0.3, 0.8, 0.8], [0.1, 0.95, 0.4]])
    assert np.allclose(scores.same_depth_hits(similar, True), [1.0, 0.5, 0.0])
    assert np.allclose(scores.same_depth_hits(-similar, False), [1.0, 0.5, 0.0])  # a distance, oriented
    with_nan = similar.copy()
    with_nan[2, 0] = np.nan
    assert np.isnan(scores.same_depth_hits(with_nan, True)[2])


def test_accuracy_change_says_whether_deletion_costs_accuracy():
    rng = np.random.default_rng(0)
    n = 800
    falling = np.stack([rng.random(n) < p for p in np.linspace(0.85, 0.55, 8)])
    flat = np.stack([rng.random(n) < 0.82 for _ in range(8)])
    assert scores.accuracy_change(falling)["falls"]
    assert scores.accuracy_change(falling)["change"][0] == 0 and scores.accuracy_change(falling)["drop"] > 0.2
    assert not scores.accuracy_change(flat)["falls"]


def test_the_probe_penalty_is_chosen_on_held_out_folds():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((240, 30))
    y = (x[:, 0] > 0).astype(int)
    signal = scores.cross_validated_penalty(x, y, 2, seed=0)
    noise = scores.cross_validated_penalty(x, rng.integers(0, 2, 240), 2, seed=0)
    assert signal["weight_decay"] in scores.PROBE_PENALTIES and signal["cv_accuracy"] > 0.85
    assert noise["cv_accuracy"] < 0.65
    assert signal["cv_accuracy"] == max(signal["per_penalty"].values())


def test_the_smallest_p_of_a_permutation_null_counts_the_orders_that_keep_the_score():
    assert nulls.smallest_p(3, 999, invariant=2) == pytest.approx(2 / 6)  # 3 layers: identity and reversal of 6
    assert nulls.smallest_p(7, 999, invariant=2) == pytest.approx(1 / 1000)  # 5,040 orders, 999 drawn
    assert nulls.smallest_p(4, 999) == pytest.approx(1 / 24)
