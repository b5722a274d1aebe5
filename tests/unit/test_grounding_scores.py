"""The scores of the "which measure to believe" tests (issue 28, point 2): ReSi's layer monotonicity, group
separation (AUPRC, conformity, d′), rank correlation, output distances, and Ding et al.'s PC deletion, plus
the linear probe. Each property is checked on constructed inputs whose right answer is known by hand or by
a transcription of the papers' loops."""

from __future__ import annotations

import inspect
import subprocess
import sys
import time
import warnings
from itertools import combinations, product

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import jensenshannon

import rounding
from reprsim.stages.grounding import scores
from reprsim.stages.grounding.scores import (
    average_precision, delete_low_variance, deletion_grid, disagreement, group_separation, jsd_bits,
    monotonicity, probe_correct, rank_correlation,
)

L = 13  # BERT's hidden states, embedding output included (ReSi test 6)


def layer_gap() -> np.ndarray:
    i, j = np.indices((L, L))
    return np.abs(i - j).astype(float)


def resi_monotonicity(values, higher_is_similar):
    """ReSi's `corr_btw_sim_and_layer_distance` and `violation_rate` loops, transcribed (no missing values)."""
    n = len(values)
    corrs = []
    for side in ("forward", "backward"):
        for src in range(n):
            targets = range(src + 1, n) if side == "forward" else range(0, src)
            sims = [values[src, t] for t in targets]
            gaps = [abs(src - t) for t in targets]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                corr = stats.spearmanr(sims, gaps)[0] if len(sims) >= 2 else float("nan")
            corrs.append(-corr if higher_is_similar else corr)
    violations = total = 0
    for src in range(n):
        for side in (range(src + 1, n), range(src - 1, -1, -1)):  # nearest target first
            side = list(side)
            for a, near in enumerate(side):
                for far in side[a + 1:]:
                    total += 1
                    if higher_is_similar:
                        violations += values[src, near] < values[src, far]
                    else:
                        violations += values[src, near] > values[src, far]
    return float(np.nanmean(corrs)), 1 - violations / total


# ------------------------------------------------------------------------------------------------
# monotonicity


def test_monotonicity_ideal_and_reversed_matrices():
    ideal = -layer_gap()  # similarity falling with layer distance
    assert monotonicity(ideal, True) == {"correlation": 1.0, "conformity": 1.0, "anchors": 2 * (L - 2)}
    reversed_ = monotonicity(-ideal, True)
    assert reversed_["correlation"] == pytest.approx(-1.0) and reversed_["conformity"] == 0.0
    as_distance = monotonicity(-ideal, False)  # the same numbers read as a distance are ideal
    assert as_distance["correlation"] == pytest.approx(1.0) and as_distance["conformity"] == 1.0


def test_monotonicity_constant_matrix_has_no_correlation_and_no_violations():
    for higher in (True, False):
        result = monotonicity(np.full((L, L), 0.3), higher)
        assert np.isnan(result["correlation"]) and result["anchors"] == 0
        assert result["conformity"] == 1.0  # ties are not violations (ReSi test 6)


def test_monotonicity_random_matrices_score_near_zero():
    rng = np.random.default_rng(0)
    draws = [monotonicity(rng.random((L, L)), bool(seed % 2)) for seed in range(300)]
    assert abs(np.mean([d["correlation"] for d in draws])) < 0.03
    assert abs(np.mean([d["conformity"] for d in draws]) - 0.5) < 0.02


def test_monotonicity_equals_resi_loops_with_ties():
    rng = np.random.default_rng(1)
    for draw in range(40):
        values = rng.integers(0, 4, size=(L, L)).astype(float) if draw % 2 else rng.normal(size=(L, L))
        for higher in (True, False):
            result = monotonicity(values, higher)
            correlation, conformity = resi_monotonicity(values, higher)
            assert result["correlation"] == pytest.approx(correlation, abs=1e-12)
            assert result["conformity"] == pytest.approx(conformity, abs=1e-12)


def test_monotonicity_nan_value_voids_its_side_and_leaves_the_conformity_count():
    values = -layer_gap()
    values[0, 5] = np.nan  # anchor 0 has only a forward side
    result = monotonicity(values, True)
    assert result["anchors"] == 2 * (L - 2) - 1 and result["correlation"] == 1.0
    assert result["conformity"] == 1.0  # the pairs with the NaN are out of the total, none violated


def test_monotonicity_uses_targets_on_each_side_separately():
    # the backward side reversed (similarity rising with distance below the anchor) halves the score
    i, j = np.indices((L, L))
    values = np.where(j > i, -layer_gap(), layer_gap())
    result = monotonicity(values, True)
    assert result["correlation"] == pytest.approx(0.0) and 0 < result["conformity"] < 1


def test_monotonicity_is_fast_and_checks_its_shape():
    values = np.random.default_rng(2).random((L, L))
    best = min(_timed(lambda: monotonicity(values, True)) for _ in range(5))
    assert best < 0.005
    with pytest.raises(ValueError):
        monotonicity(np.zeros((3, 4)), True)


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


# ------------------------------------------------------------------------------------------------
# average precision (sklearn's average_precision_score)


def test_average_precision_hand_worked_examples():
    assert average_precision(np.array([0.9, 0.8, 0.7, 0.6]), np.array([1, 0, 1, 0])) == pytest.approx((1 + 2 / 3) / 2)
    assert average_precision(np.full(4, 0.5), np.array([1, 0, 1, 0])) == pytest.approx(0.5)
    # a tie between a positive and a negative enters together: P at 0.5 is 1/3, not 1/2
    assert average_precision(np.array([0.9, 0.5, 0.5, 0.1]), np.array([0, 1, 0, 1])) == pytest.approx(1 / 6 + 1 / 4)
    assert average_precision(np.array([0.9, 0.5, 0.5, 0.1]), np.array([1, 0, 1, 0])) == pytest.approx(1 / 2 + 1 / 3)


def test_average_precision_perfect_reversed_and_constant():
    assert average_precision(np.array([4.0, 3, 2, 1]), np.array([1, 1, 0, 0])) == 1.0
    assert average_precision(np.array([4.0, 3, 2, 1]), np.array([0, 0, 1, 1])) == pytest.approx(0.5 / 3 + 0.5 / 2)
    positive = np.array([1, 0, 0, 1, 0, 1, 0])
    assert average_precision(np.full(7, 2.0), positive) == pytest.approx(3 / 7)


def test_average_precision_ignores_item_order_and_drops_nan():
    rng = np.random.default_rng(3)
    scores_, positive = rng.integers(0, 3, 20).astype(float), rng.integers(0, 2, 20)
    order = rng.permutation(20)
    assert average_precision(scores_, positive) == pytest.approx(average_precision(scores_[order], positive[order]))
    assert average_precision(np.array([0.9, np.nan, 0.7]), np.array([0, 1, 1])) == pytest.approx(0.5)
    assert np.isnan(average_precision(np.array([np.nan]), np.array([1])))
    assert average_precision(np.array([0.3, 0.2]), np.array([0, 0])) == 0.0  # sklearn's value without positives


# ------------------------------------------------------------------------------------------------
# group separation (ReSi tests 3-5)


def grouped(sizes=(5, 5, 5)) -> list:
    return [g for g, size in enumerate(sizes) for _ in range(size)]


def separable(groups, rng, within=0.9, between=0.1, noise=0.02) -> np.ndarray:
    same = np.equal.outer(groups, groups)
    values = np.where(same, within, between) + noise * rng.standard_normal((len(groups), len(groups)))
    np.fill_diagonal(values, 1.0)
    return values


def test_group_separation_perfect_measure():
    groups = grouped()
    result = group_separation(separable(groups, np.random.default_rng(4)), groups, True)
    assert result["auprc"] == 1.0 and result["conformity"] == 1.0 and result["d_prime"] > 10
    assert result["groups"] == 3 and result["positives"] == 30 and result["negatives"] == 150


def test_group_separation_chance_levels_are_resis():
    rng = np.random.default_rng(5)
    assert group_separation(rng.random((15, 15)), grouped((5, 5, 5)), True)["chance"] == pytest.approx(10 / 60)
    assert group_separation(rng.random((10, 10)), grouped((5, 5)), True)["chance"] == pytest.approx(10 / 35)


@pytest.mark.parametrize("higher", [True, False])
@pytest.mark.parametrize("level", [0.0, 0.4])
def test_group_separation_useless_constant_measure(higher, level):
    groups = grouped()
    result = group_separation(np.full((15, 15), level), groups, higher)
    assert result["auprc"] == pytest.approx(result["chance"]) and result["chance"] == pytest.approx(10 / 60)
    assert result["conformity"] == 0.0  # ties count as violations (ReSi B.7a)
    assert np.isnan(result["d_prime"])  # zero pooled variance


def expected_random_ap(positives: int, total: int) -> float:
    """E[AP] of a uniformly random ranking without ties (Bestgen 2015):
    (P − 1)/(N − 1) + H_N (N − P)/(N (N − 1))."""
    harmonic = np.sum(1.0 / np.arange(1, total + 1))
    return (positives - 1) / (total - 1) + harmonic * (total - positives) / (total * (total - 1))


@pytest.mark.parametrize("sizes", [(5, 5, 5), (5, 5)])
def test_group_separation_random_measure_sits_at_chance(sizes):
    """A random measure's mean AUPRC is the expected AP of a random ranking, which for ReSi's designs lies
    above ReSi's chance level (the positive share): ≈ 0.219 against 10/60 for 3 groups of 5, ≈ 0.352 against
    10/35 for 2 groups of 5. Conformity and d′ sit at 0.5 and 0."""
    rng = np.random.default_rng(6)
    groups = grouped(sizes)
    m = len(groups)
    draws = [group_separation(rng.random((m, m)), groups, True) for _ in range(300)]
    positives, total = 10, 10 + 5 * (m - 5)
    chance = draws[0]["chance"]
    assert chance == pytest.approx(positives / total)
    assert abs(np.mean([d["auprc"] for d in draws]) - expected_random_ap(positives, total)) < 0.01
    assert expected_random_ap(positives, total) - chance > 0.05
    assert abs(np.mean([d["conformity"] for d in draws]) - 0.5) < 0.02
    assert abs(np.mean([d["d_prime"] for d in draws])) < 0.1


def test_group_separation_distance_orientation_equals_negated_similarity():
    rng = np.random.default_rng(7)
    groups = grouped()
    for draw in range(10):
        similarity = separable(groups, rng, within=0.6, between=0.5, noise=0.1)  # overlapping groups
        if draw % 2:
            similarity = np.round(similarity, 1)  # ties
        as_similarity = group_separation(similarity, groups, True)
        for distance in (1.0 - similarity, -similarity):  # a positive and an all-negative distance
            as_distance = group_separation(distance, groups, False)
            for key in ("auprc", "chance", "conformity", "groups", "positives", "negatives"):
                assert as_distance[key] == pytest.approx(as_similarity[key], abs=1e-12), key
            assert np.sign(as_distance["d_prime"]) == np.sign(as_similarity["d_prime"])


def test_group_separation_equals_resi_on_distances():
    """ReSi's auprc (through average_precision, checked against sklearn above) and violation_rate, transcribed."""
    rng = np.random.default_rng(8)
    groups = [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]
    for _ in range(10):
        values = rng.integers(0, 5, size=(12, 12)).astype(float)
        aps, rates = [], []
        for g in range(3):
            members = [m for m, h in enumerate(groups) if h == g]
            others = [m for m, h in enumerate(groups) if h != g]
            intra = [values[a, b] for a, b in combinations(members, 2)]
            cross = [values[a, b] for a, b in product(members, others)]
            top = max(intra + cross) or 5e-5
            intra_s, cross_s = [(top - d) / top for d in intra], [(top - d) / top for d in cross]
            aps.append(average_precision(np.r_[intra_s, cross_s], np.r_[np.ones(len(intra)), np.zeros(len(cross))]))
            rates.append(np.mean([a <= b for a, b in product(intra_s, cross_s)]))
        result = group_separation(values, groups, False)
        assert result["auprc"] == pytest.approx(np.mean(aps))
        assert result["conformity"] == pytest.approx(1 - np.mean(rates))


def test_group_separation_uses_one_orientation_and_nan_rules():
    groups = grouped()
    values = separable(groups, np.random.default_rng(9))
    lower_within = np.tril(np.equal.outer(groups, groups), k=-1)
    junk = np.where(lower_within, -5.0, values)  # b → a inside a group is never read
    assert group_separation(junk, groups, True) == group_separation(values, groups, True)
    some_nan = values.copy()
    some_nan[0, 1] = some_nan[0, 7] = np.nan
    result = group_separation(some_nan, groups, True)
    assert result["auprc"] == 1.0 and result["positives"] == 29 and result["negatives"] == 149
    all_nan = values.copy()
    all_nan[np.ix_(range(5, 10), range(5, 10))] = np.nan  # group 1 has no positives left
    result = group_separation(all_nan, groups, True)
    assert np.isnan(result["auprc"]) and np.isnan(result["conformity"]) and np.isnan(result["chance"])
    assert result["groups"] == 3 and result["positives"] == 20


def test_group_separation_skips_singletons_and_all_zero_distances():
    groups = ["a", "a", "a", "b", "b", "b", "lone"]
    result = group_separation(np.zeros((7, 7)), groups, False)  # max 0: floor 5e-5, every s = 0
    assert result["groups"] == 2 and result["auprc"] == pytest.approx(3 / 15) and result["conformity"] == 0.0
    assert np.isnan(group_separation(np.zeros((3, 3)), ["x", "y", "z"], True)["auprc"])


# ------------------------------------------------------------------------------------------------
# rank correlation


def test_rank_correlation_is_spearman_invariant_to_monotone_maps():
    rng = np.random.default_rng(10)
    x, y = rng.random(40), rng.random(40)
    y = x + 0.3 * y
    rho = rank_correlation(x, y)
    assert rho == pytest.approx(stats.spearmanr(x, y)[0]) and rho > 0.5
    assert rank_correlation(np.exp(3 * x), y ** 3 - 2) == pytest.approx(rho)
    assert rank_correlation(x, -y) == pytest.approx(-rho)


def test_rank_correlation_drops_nan_pairs_and_needs_three():
    x = np.array([0.1, np.nan, 0.3, 0.2, 0.5, 0.4])
    y = np.array([1.0, 2.0, np.nan, 2.5, 4.0, 3.0])
    kept = [0, 3, 4, 5]
    assert rank_correlation(x, y) == pytest.approx(stats.spearmanr(x[kept], y[kept])[0])
    assert np.isnan(rank_correlation(np.array([0.1, 0.2, np.nan]), np.array([1.0, 2.0, 3.0])))
    assert np.isnan(rank_correlation(np.array([0.1, 0.2, 0.3]), np.array([1.0, 1.0, 1.0])))


# ------------------------------------------------------------------------------------------------
# output distances (ReSi test 2)


def test_jsd_bits_known_values_and_properties():
    rng = np.random.default_rng(11)
    a, b = 5 * rng.standard_normal((50, 3)), 5 * rng.standard_normal((50, 3))
    assert np.allclose(jsd_bits(a, a), 0.0, atol=1e-12)
    assert np.allclose(jsd_bits(a, b), jsd_bits(b, a))
    values = jsd_bits(a, b)
    assert values.shape == (50,) and ((values >= 0) & (values <= 1)).all()
    p = np.exp(a - a.max(1, keepdims=True))
    q = np.exp(b - b.max(1, keepdims=True))
    expected = [jensenshannon(pi, qi, base=2) ** 2 for pi, qi in zip(p, q)]  # scipy's is the square root
    assert np.allclose(values, expected, atol=1e-10)
    far = jsd_bits(np.array([[60.0, 0.0, 0.0]]), np.array([[0.0, 60.0, 0.0]]))
    assert far[0] == pytest.approx(1.0, abs=1e-12)
    disjoint = jsd_bits(np.array([[0.0, -np.inf]]), np.array([[-np.inf, 0.0]]))  # exactly 0 probabilities
    assert disjoint[0] == pytest.approx(1.0)
    with_nan = jsd_bits(np.array([[0.0, np.nan], [1.0, 0.0]]), np.array([[0.0, 1.0], [1.0, 0.0]]))
    assert np.isnan(with_nan[0]) and with_nan[1] == pytest.approx(0.0)


def test_disagreement_counts_rows_whose_argmax_differs():
    a = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.0, 0.0, 5.0], [1.0, 1.0, 0.0]])
    b = np.array([[0.5, 0.1, 0.0], [3.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    assert disagreement(a, b).tolist() == [0.0, 1.0, 1.0, 1.0]  # a tie goes to the first class
    assert disagreement(a, a).sum() == 0
    with pytest.raises(ValueError):
        disagreement(a, b[:2])


# ------------------------------------------------------------------------------------------------
# principal-component deletion (Ding et al. A.3)


def test_deletion_grid_is_dings_and_scales():
    assert deletion_grid(768) == [0, 100, 200, 300, 400, 500, 600, 650, 700, 725, 750, 758, 763, 767]
    for d in (384, 512, 64, 10, 2, 1):
        grid = deletion_grid(d)
        assert grid[0] == 0 and grid[-1] == d - 1 and all(k < d for k in grid)
        assert all(a < b for a, b in zip(grid, grid[1:]))
    assert deletion_grid(384)[-1] == 383 and len(deletion_grid(384)) == 14


def test_delete_low_variance_k0_is_a_copy():
    x = np.random.default_rng(12).standard_normal((30, 6)).astype(np.float32)
    [[out]] = delete_low_variance(x, [x], [0])
    assert out is not x and np.array_equal(out, x) and out.dtype == np.float32


def test_delete_low_variance_keeps_the_top_variance_directions():
    rng = np.random.default_rng(13)
    n, d = 200, 8
    noise = rng.standard_normal((n, d))
    basis, _ = np.linalg.qr(noise - noise.mean(axis=0))  # orthonormal, centred columns: the PCs are the axes
    spread = np.array([3.0, 0.5, 7.0, 1.0, 0.2, 5.0, 2.0, 0.1])  # known variances, in no order
    mean = rng.standard_normal(d)
    fit = basis * spread + mean
    other = rng.standard_normal((20, d)) + mean
    grid = [1, 3, 5, 7]
    for k, (fit_out, other_out) in zip(grid, delete_low_variance(fit, [fit, other], grid)):
        kept_cols = np.sort(np.argsort(-spread)[: d - k])
        dropped = np.setdiff1d(np.arange(d), kept_cols)
        assert np.allclose(fit_out[:, kept_cols], fit[:, kept_cols])
        assert np.allclose(fit_out[:, dropped], mean[dropped])  # the deleted directions collapse to the mean
        assert np.allclose(other_out[:, kept_cols], other[:, kept_cols])
        assert np.allclose(other_out[:, dropped], mean[dropped])
        # the deleted directions hold rounding alone (below γ·‖fit‖, tests/rounding.py), the kept ones their spread
        tol = rounding.products(n * d, scale=np.linalg.norm(fit))
        assert np.linalg.matrix_rank(fit_out - fit_out.mean(axis=0), tol=tol) == d - k


def test_delete_low_variance_rank_on_correlated_rows():
    rng = np.random.default_rng(14)
    n, d = 300, 24
    x = rng.standard_normal((n, d)) @ rng.standard_normal((d, d)) + 4.0
    grid = [0, 5, 23]
    for k, [out] in zip(grid, delete_low_variance(x, [x], grid)):
        assert out.shape == (n, d)
        assert np.linalg.matrix_rank(out - out.mean(axis=0), tol=1e-8 * np.abs(x).max()) == d - k
    with pytest.raises(ValueError):
        delete_low_variance(x, [x], [0, d])


def test_delete_low_variance_decomposes_once_for_the_grid_with_each_k_as_alone():
    """One SVD serves every k of the grid: each deleted version equals the one computed for its k alone."""
    rng = np.random.default_rng(15)
    fit, other = rng.standard_normal((120, 16)) + 2.0, rng.standard_normal((40, 16)).astype(np.float32)
    grid = deletion_grid(16)
    together = delete_low_variance(fit, [fit, other], grid)
    for k, deleted in zip(grid, together):
        [alone] = delete_low_variance(fit, [fit, other], [k])
        assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(deleted, alone))


# ------------------------------------------------------------------------------------------------
# linear probe


def blobs(rng, n, d=384, classes=3, margin=4.0):
    y = rng.integers(0, classes, n)
    centres = np.zeros((classes, d))
    centres[np.arange(classes), np.arange(classes)] = margin
    x = rng.standard_normal((n, d)) * 0.5 + centres[y]
    x[:, -1] = 2.0  # a zero-variance column
    return x, y


def test_probe_separable_data_is_predicted_exactly():
    rng = np.random.default_rng(15)
    x, y = blobs(rng, 1500)
    correct = probe_correct(x[:1200], y[:1200], x[1200:], y[1200:], n_classes=3)
    assert correct.dtype == bool and correct.shape == (300,) and correct.all()


def test_probe_on_labels_independent_of_x_is_at_chance_and_deterministic():
    rng = np.random.default_rng(16)
    x = rng.standard_normal((1800, 384))
    y = rng.integers(0, 3, 1800)
    import torch

    threads, rng_state = torch.get_num_threads(), torch.get_rng_state()
    first = probe_correct(x[:1200], y[:1200], x[1200:], y[1200:], n_classes=3, seed=1)
    assert abs(first.mean() - 1 / 3) < 0.07
    assert np.array_equal(first, probe_correct(x[:1200], y[:1200], x[1200:], y[1200:], n_classes=3, seed=1))
    assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), rng_state)  # no side effects


def test_probe_is_fast():
    rng = np.random.default_rng(17)
    x, y = blobs(rng, 1500, margin=1.0)
    probe_correct(x[:50], y[:50], x[50:60], y[50:60], n_classes=3)  # torch's first-call start-up out of the way
    assert min(_timed(lambda: probe_correct(x[:1200], y[:1200], x[1200:], y[1200:], 3)) for _ in range(2)) < 1.0


# ------------------------------------------------------------------------------------------------
# the module


def test_every_function_is_documented_and_torch_is_only_the_probes():
    public = [f for name, f in inspect.getmembers(scores, inspect.isfunction) if f.__module__ == scores.__name__]
    assert len(public) >= 9 and all(inspect.getdoc(f) for f in public)
    loaded = subprocess.run([sys.executable, "-c", "import sys, reprsim.stages.grounding.scores; "
                             "print('torch' in sys.modules)"], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False"
