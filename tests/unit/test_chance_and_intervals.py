"""Chance levels, intervals and sample-size notes of every measure (issue 13).

The shortcut routes give what recomputing the measure gives; on independent data the null centres
on the measure's value and p is roughly uniform; the half-sample interval covers a known value at
about its nominal rate; the CCA family is undefined, with its reason, where n − 1 < k_x + k_y.
"""

import numpy as np
import pytest
import torch
from scipy import stats

from reprsim.inference.resampling import fieller, half_samples, interval, t_quantile
from reprsim.metrics import compute, compute_layers, directed_layers, null, replicate_layers
from reprsim.metrics.api import _evaluator
from reprsim.metrics.permutation import null_draws, permutations
from reprsim.metrics.subsample import replicate_draws

SHORTCUTS = [
    ("cka", {}), ("cka", {"estimator": "unbiased"}), ("cka", {"kernel": "rbf", "threshold": 0.8}),
    ("cca", {}), ("svcca", {"threshold": 0.9}), ("pwcca", {"pca_dims": 3}), ("pwcca", {"direction": "x"}),
    ("mutual_knn", {"k": 4}), ("rsa", {}), ("rsa", {"rdm": "euclidean"}), ("rsa", {"outer": "pearson", "rdm": "cosine"}),
    ("cknna", {"k": 4}),
]


@pytest.fixture
def layers_pair():
    rng = np.random.default_rng(3)
    Xs = torch.as_tensor(rng.normal(size=(2, 30, 5)))
    Ys = torch.as_tensor(rng.normal(size=(3, 30, 4)))
    Ys[1] += Xs[0, :, :4]
    return Xs, Ys


@pytest.mark.parametrize("name, params", SHORTCUTS)
def test_null_shortcuts_equal_recomputing_on_permuted_rows(layers_pair, name, params):
    Xs, Ys = layers_pair
    perms = permutations(30, 3, seed=1, device="cpu")
    evaluate = _evaluator(name, params)
    draws, route = null_draws(name, Xs, Ys, perms, evaluate, **params)
    assert route != "recompute"
    recomputed = np.stack([evaluate(Xs, Ys[:, p])[0] for p in perms])
    np.testing.assert_allclose(draws, recomputed, atol=1e-10)


@pytest.mark.parametrize("name, params", [s for s in SHORTCUTS if s[0] not in ("svcca", "rsa", "cknna")
                                          and "rbf" not in str(s[1]) and "pca_dims" not in s[1]])
def test_replicate_shortcuts_equal_recomputing_on_the_subsample(layers_pair, name, params):
    """Exact where the route changes nothing (no PCA chosen on all rows, no RBF bandwidth)."""
    Xs, Ys = layers_pair
    indices = half_samples(30, 3, seed=2)
    evaluate = _evaluator(name, params)
    draws, route = replicate_draws(name, Xs, Ys, indices, evaluate, **params)
    assert route != "recompute"
    recomputed = np.stack([evaluate(Xs[:, idx], Ys[:, idx])[0] for idx in indices])
    np.testing.assert_allclose(draws, recomputed, atol=1e-10)


@pytest.mark.parametrize("name, params", [("pwcca", {}), ("pwcca", {"direction": "x"}), ("pwcca", {"direction": "y"}),
                                          ("neuronsim", {}), ("cknna", {"k": 4})])
def test_both_directions_from_one_computation_equal_each_direction_alone(layers_pair, name, params):
    Xs, Ys = layers_pair
    both = directed_layers(name, Xs, Ys, **params).values
    np.testing.assert_allclose(both[0], compute_layers(name, Xs, Ys, **params).values, atol=1e-12)
    np.testing.assert_allclose(both[1], compute_layers(name, Ys, Xs, **params).values.T, atol=1e-12)


CHANCE = [("cka", {}), ("cka", {"estimator": "unbiased"}), ("svcca", {"pca_dims": 4}), ("pwcca", {"pca_dims": 4}),
          ("neuronsim", {}), ("mutual_knn", {"k": 5}), ("procrustes", {}), ("mixedsim", {"pca_dims": 4}),
          ("cknna", {"k": 5})]


@pytest.mark.parametrize("name, params", CHANCE)
def test_on_independent_data_the_null_centres_on_the_value_and_p_is_uniform(name, params):
    """40 independent (X, Y) draws: the values average to the null means, and the p-values pass a
    KS test for uniformity on the permutation grid (19 permutations: p ∈ {1/20, …, 1})."""
    rng = np.random.default_rng(11)
    values, null_means, p_values = [], [], []
    for _ in range(40):
        X, Y = rng.normal(size=(40, 8)), rng.normal(size=(40, 6))
        result = null(name, X, Y, n_permutations=19, seed=int(rng.integers(1 << 30)), **params)
        values.append(result.value)
        null_means.append(result.meta["null_mean"])
        p_values.append(result.meta["p_value"])
    spread = np.std(values) / np.sqrt(len(values))
    assert abs(np.mean(values) - np.mean(null_means)) < 4 * spread + 1e-3
    # discrete p on {k/20}: compare with a uniform on the same grid
    assert stats.kstest(np.array(p_values) - 0.025, "uniform").pvalue > 0.01
    assert 0.3 < np.mean(p_values) < 0.75


def test_mutual_knn_null_mean_is_exact():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(50, 6)), rng.normal(size=(50, 6))
    result = null("mutual_knn", X, Y, n_permutations=19, k=5)
    assert result.meta["null_mean"] == pytest.approx(5 / 49) and result.meta["null_mean_from"].startswith("exact")


def _population_linear_cka(A: np.ndarray, B: np.ndarray, noise: float) -> float:
    """X = Z A + noise, Y = Z B + noise, Z ~ N(0, I): ||Σxy||² / (||Σxx|| ||Σyy||)."""
    cross = A.T @ B
    xx = A.T @ A + noise**2 * np.eye(A.shape[1])
    yy = B.T @ B + noise**2 * np.eye(B.shape[1])
    return float(np.linalg.norm(cross) ** 2 / (np.linalg.norm(xx) * np.linalg.norm(yy)))


@pytest.mark.parametrize("estimator", ["biased", "unbiased"])
def test_the_half_sample_interval_covers_the_population_cka_at_about_the_nominal_rate(estimator):
    rng = np.random.default_rng(5)
    A, B = rng.normal(size=(3, 3)), rng.normal(size=(3, 2))
    truth = _population_linear_cka(A, B, noise=1.5)
    n, trials, covered = 200, 100, 0
    for t in range(trials):
        Z = rng.normal(size=(n, 3))
        X = Z @ A + 1.5 * rng.normal(size=(n, 3))
        Y = Z @ B + 1.5 * rng.normal(size=(n, 2))
        indices = half_samples(n, 100, seed=t)  # enough replicates that their 2.5% points are not noise
        estimate = compute("cka", X, Y, estimator=estimator).value
        draws = replicate_layers("cka", X[None], Y[None], indices, estimator=estimator)[0][:, 0, 0]
        low, high = interval(estimate, draws, n, indices.shape[1])
        covered += low <= truth <= high
    assert 0.87 <= covered / trials <= 0.99


def test_the_interval_contains_the_estimate_however_skewed_the_replicates():
    replicates = np.r_[np.zeros(49), 100.0]  # above the 97.5% point of a mean-centred version
    low, high = interval(0.3, replicates, n=100, m=50)
    assert low <= 0.3 <= high
    assert np.isnan(interval(np.nan, replicates, 100, 50)).all()  # an undefined value has no interval


def test_fieller_is_the_ratio_interval_it_solves_for():
    t = float(t_quantile(30, 0.95))
    # a denominator known exactly: the numerator's t interval divided by it
    low, high, g = fieller(2.0, 4.0, np.array([[0.09, 0.0], [0.0, 0.0]]), 29)
    assert (low, high, g) == pytest.approx(((2.0 - t * 0.3) / 4.0, (2.0 + t * 0.3) / 4.0, 0.0), rel=1e-12)
    # each end solves (N − ρD)² = t²·var(N − ρD) for a correlated covariance
    cov = np.array([[0.04, 0.01], [0.01, 0.02]])
    for rho in fieller(1.0, 1.5, cov, 29)[:2]:
        variance = cov[0, 0] - 2 * rho * cov[0, 1] + rho**2 * cov[1, 1]
        assert (1.0 - rho * 1.5) ** 2 == pytest.approx(t * t * variance, rel=1e-9)
    # a denominator whose interval reaches 0 (g ≥ 1): unbounded, no interval
    assert np.isnan(fieller(1.0, 0.1, cov, 29)[:2]).all()


def test_fieller_of_a_ratio_that_is_one_in_every_replicate_is_the_point_not_undefined():
    # a seed placebo: numerator and denominator the same in each replicate, so b² − ac is 0 up to rounding, and
    # rounding takes it below 0 in a few of these 20000 draws
    rng = np.random.default_rng(0)
    for _ in range(20000):
        value, spread = rng.uniform(0.05, 2), 10 ** rng.uniform(-8, -1.5)  # g < 1 throughout
        both = value + spread * value * rng.normal(size=30)
        low, high, _ = fieller(value, value, np.full((2, 2), both.var(ddof=1)), 29)
        assert low == pytest.approx(1.0, abs=1e-6) and high == pytest.approx(1.0, abs=1e-6)


def test_cca_is_undefined_with_its_reason_when_dimensions_exceed_the_rows_and_warns_below_five_rows_each():
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(40, 30)), rng.normal(size=(40, 20))
    undefined = compute("pwcca", X, Y)
    assert np.isnan(undefined.value) and "k_x + k_y = 30 + 20 = 50 > n − 1 = 39" in undefined.meta["undefined"]
    reduced = compute("svcca", X, Y, pca_dims=10)
    assert np.isfinite(reduced.value) and reduced.meta["k"] == 20 and "n/k = 40/20" in reduced.meta["warning"]
    assert "warning" not in compute("svcca", X, Y, pca_dims=4).meta  # 40 ≥ 5 · 8
    assert "n/k = 40/30" in compute("cka", X, Y).meta["warning"]  # biased CKA: k = max(d_x, d_y)
    assert "warning" not in compute("cka", X, Y, estimator="unbiased").meta
