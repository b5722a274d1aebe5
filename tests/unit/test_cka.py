"""Linear CKA: worked example, invariances, Gram vs feature form, batched vs per pair."""

import numpy as np
import pytest

import rounding
from reprsim.metrics.cka import linear_cka, linear_cka_layers


def test_worked_example_by_hand():
    # X = [[1,0],[0,1],[-1,0],[0,-1]] is already centred; Y = first column of X
    X = np.array([[1.0, 0], [0, 1], [-1, 0], [0, -1]])
    Y = X[:, :1]
    # XᵀY = [[2],[0]] -> ||·||² = 4; XᵀX = 2I -> ||·||_F = 2√2; YᵀY = [[2]] -> 2
    assert linear_cka(X, Y) == pytest.approx(4 / (2 * np.sqrt(2) * 2), abs=1e-15)


def test_identity_and_symmetry():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(50, 8)), rng.normal(size=(50, 5))
    assert linear_cka(X, X) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(X, Y) == pytest.approx(linear_cka(Y, X), abs=1e-12)
    assert 0 <= linear_cka(X, Y) <= 1


def test_invariant_to_orthogonal_maps_isotropic_scaling_and_shifts():
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(60, 10)), rng.normal(size=(60, 7))
    Q, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    assert linear_cka(X @ Q * 3.7 + 5.0, Y) == pytest.approx(linear_cka(X, Y), abs=1e-12)


def test_not_invariant_to_anisotropic_scaling():
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(60, 4)), rng.normal(size=(60, 4))
    Y = Y + X
    assert abs(linear_cka(X * [10, 1, 1, 1], Y) - linear_cka(X, Y)) > 1e-3


def test_gram_and_feature_forms_agree():
    rng = np.random.default_rng(3)
    wide = rng.normal(size=(2, 20, 30))    # n <= d: Gram form
    narrow = rng.normal(size=(2, 20, 5))
    gram = linear_cka_layers(wide, narrow)
    # same data with more rows than features in both: feature form
    tall = np.concatenate([wide, rng.normal(size=(2, 40, 30))], axis=1)
    tall_narrow = np.concatenate([narrow, rng.normal(size=(2, 40, 5))], axis=1)
    feature = linear_cka_layers(tall, tall_narrow)
    # recompute each with the other form directly from the definition
    for Xs, Ys, values in ((wide, narrow, gram), (tall, tall_narrow, feature)):
        for i in range(2):
            for j in range(2):
                Xc, Yc = Xs[i] - Xs[i].mean(0), Ys[j] - Ys[j].mean(0)
                K, L = Xc @ Xc.T, Yc @ Yc.T
                expected = np.sum(K * L) / (np.linalg.norm(K) * np.linalg.norm(L))
                assert values[i, j] == pytest.approx(expected, abs=1e-10)


def test_batched_equals_per_pair():
    rng = np.random.default_rng(4)
    Xs, Ys = rng.normal(size=(4, 40, 6)), rng.normal(size=(3, 40, 9))
    Ys[1] += Xs[2] @ rng.normal(size=(6, 9))
    batched = linear_cka_layers(Xs, Ys)
    assert batched.shape == (4, 3)
    for i in range(4):
        for j in range(3):
            assert batched[i, j] == pytest.approx(linear_cka(Xs[i], Ys[j]), abs=1e-12)


def test_float32_input_accumulates_in_float64():
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(100, 16)), rng.normal(size=(100, 16))
    assert linear_cka(X.astype(np.float32), Y.astype(np.float32)) == pytest.approx(linear_cka(X, Y), abs=1e-6)


def test_degenerate_inputs():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(10, 3))
    assert np.isnan(linear_cka(np.ones((10, 3)), X))  # constant layer: 0/0, reported as NaN
    from reprsim.metrics.cka import cka_layers

    assert "constant" in cka_layers(np.stack([np.ones((10, 3)), X]), X[None])[1]["nan_reason"]
    with pytest.raises(ValueError, match="same rows"):
        linear_cka(X, X[:9])
    with pytest.raises(ValueError, match="NaN"):
        linear_cka(np.where(X > 1, np.nan, X), X)


# --------------------------------------------------------------------------- all estimators
import torch  # noqa: E402

from reprsim.metrics.cka import cka, cka_layers, minibatch_cka_layers
from reprsim.metrics.distance import model_distance


def reference_hsic(K, L, estimator):
    """HSIC written as the formulas read (explicit H; loops-free but per pair), for tests only."""
    n = K.shape[0]
    if estimator == "biased":
        H = np.eye(n) - np.ones((n, n)) / n
        return np.trace(K @ H @ L @ H) / (n - 1) ** 2
    Kt, Lt = K.copy(), L.copy()
    np.fill_diagonal(Kt, 0)
    np.fill_diagonal(Lt, 0)
    one = np.ones(n)
    return (np.trace(Kt @ Lt) + (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
            - 2 / (n - 2) * (one @ Kt @ Lt @ one)) / (n * (n - 3))


def reference_gram(X, kernel, threshold=1.0):
    if kernel == "linear":
        return X @ X.T
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    sigma2 = threshold**2 * np.median(sq[np.triu_indices(len(X), 1)])
    return np.exp(-sq / (2 * sigma2))


def reference_cka(X, Y, kernel, estimator, threshold=1.0):
    K, L = reference_gram(X, kernel, threshold), reference_gram(Y, kernel, threshold)
    return reference_hsic(K, L, estimator) / np.sqrt(reference_hsic(K, K, estimator) * reference_hsic(L, L, estimator))


def gram_tolerance(Xs, Ys, kernel="linear", estimator="biased", threshold=1.0):
    """How far two summation orders of the Gram form may leave a CKA apart on any BLAS kernel (tests/rounding.py),
    for every layer pair of Xs and Ys: each HSIC is a sum over the n² entries of two Grams, off by γ_(n²) times its
    terms' magnitudes; over the value, these are its condition. The biased estimator's centred Grams keep it at most
    1 + CKA (Cauchy–Schwarz); the unbiased one's three sums of raw Grams cancel where the Grams share a large
    constant part (shifted rows, RBF entries near their mean). The feature form's sums (n, then d² terms) are
    shorter."""
    def hsic(K, L):  # the estimator's sum (without its constant factor) and the sum of its terms' magnitudes
        n = len(K)
        if estimator == "biased":
            K, L = (M - M.mean(0) - M.mean(1)[:, None] + M.mean() for M in (K, L))
            return (K * L).sum(), np.abs(K * L).sum()
        K, L = (M - np.diag(np.diag(M)) for M in (K, L))
        A, B = np.abs(K), np.abs(L)
        return ((K * L).sum() + K.sum() * L.sum() / ((n - 1) * (n - 2)) - 2 / (n - 2) * K.sum(0) @ L.sum(0),
                (A * B).sum() + A.sum() * B.sum() / ((n - 1) * (n - 2)) + 2 / (n - 2) * A.sum(0) @ B.sum(0))

    condition = 0.0
    for K in (reference_gram(np.asarray(X), kernel, threshold) for X in Xs):
        for L in (reference_gram(np.asarray(Y), kernel, threshold) for Y in Ys):
            (xy, a_xy), (xx, a_xx), (yy, a_yy) = hsic(K, L), hsic(K, K), hsic(L, L)
            condition = max(condition, (a_xy + abs(xy) * (a_xx / xx + a_yy / yy) / 2) / np.sqrt(xx * yy))
    return rounding.products(K.shape[0] ** 2, condition=condition)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
@pytest.mark.parametrize("estimator", ["biased", "unbiased"])
@pytest.mark.parametrize("n", [12, 40])
def test_every_estimator_matches_its_formula(kernel, estimator, n):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(n, 15))
    Y = X[:, :10] @ rng.normal(size=(10, 8)) + rng.normal(size=(n, 8))
    expected = reference_cka(X, Y, kernel, estimator, threshold=0.8)
    assert cka(X, Y, kernel=kernel, estimator=estimator, threshold=0.8) == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
@pytest.mark.parametrize("estimator", ["biased", "unbiased"])
def test_batched_layers_equal_single_pairs(kernel, estimator):
    rng = np.random.default_rng(8)
    Xs, Ys = rng.normal(size=(3, 30, 7)), rng.normal(size=(2, 30, 40))
    Ys[0, :, :7] += 2 * Xs[1]
    values, meta = cka_layers(Xs, list(Ys), kernel=kernel, estimator=estimator)
    assert meta["kernel"] == kernel and meta["estimator"] == estimator
    # n = 30 ≤ d: the Gram form, whose Grams are built a layer at a time either way; the sums over them are not
    tolerance = gram_tolerance(Xs, Ys, kernel, estimator)
    for i in range(3):
        for j in range(2):
            assert values[i, j].item() == pytest.approx(cka(Xs[i], Ys[j], kernel, estimator), abs=tolerance)


def test_unbiased_can_be_negative_and_needs_four_rows():
    rng = np.random.default_rng(9)
    values = [cka(rng.normal(size=(6, 3)), rng.normal(size=(6, 3)), estimator="unbiased") for _ in range(30)]
    assert min(values) < 0
    with pytest.raises(ValueError, match="n ≥ 4"):
        cka(rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), estimator="unbiased")


def test_minibatch_with_one_batch_is_unbiased_cka_and_reports_batches():
    rng = np.random.default_rng(10)
    Xs, Ys = rng.normal(size=(2, 50, 6)), rng.normal(size=(2, 50, 6))
    Ys[1] += Xs[0]
    whole, _ = minibatch_cka_layers(Xs, Ys, batch_size=50)
    unbiased, _ = cka_layers(Xs, Ys, estimator="unbiased")  # n > d: the feature form, against one batch's Grams
    torch.testing.assert_close(whole, unbiased, rtol=0, atol=gram_tolerance(Xs, Ys, estimator="unbiased"))
    values, meta = minibatch_cka_layers(Xs, Ys, batch_size=16)
    assert meta["n_batches"] == 3 and meta["dropped_rows"] == 2
    # by hand: sum HSIC over three batches
    K = [reference_gram(Xs[0, b * 16:(b + 1) * 16], "linear") for b in range(3)]
    L = [reference_gram(Ys[1, b * 16:(b + 1) * 16], "linear") for b in range(3)]
    expected = sum(reference_hsic(k, l, "u") for k, l in zip(K, L)) / np.sqrt(
        sum(reference_hsic(k, k, "u") for k in K) * sum(reference_hsic(l, l, "u") for l in L))
    assert values[0, 1].item() == pytest.approx(expected, abs=1e-12)


def test_torch_float32_input_agrees_with_numpy_float64():
    rng = np.random.default_rng(11)
    X, Y = rng.normal(size=(64, 12)), rng.normal(size=(64, 9))
    from_torch = cka(torch.tensor(X, dtype=torch.float32), torch.tensor(Y, dtype=torch.float32), estimator="unbiased")
    assert from_torch == pytest.approx(cka(X, Y, estimator="unbiased"), abs=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_agrees_with_cpu():
    rng = np.random.default_rng(12)
    Xs, Ys = rng.normal(size=(3, 100, 20)), rng.normal(size=(2, 100, 30))
    for kernel in ("linear", "rbf"):
        for estimator in ("biased", "unbiased"):
            on_cpu, _ = cka_layers(Xs, Ys, kernel, estimator)
            on_gpu, _ = cka_layers(torch.tensor(Xs, device="cuda"), torch.tensor(Ys, device="cuda"), kernel, estimator)
            torch.testing.assert_close(on_gpu.cpu(), on_cpu, rtol=0, atol=1e-6)


def test_model_distance():
    assert model_distance([1.0, 1.0, 1.0]) == 0.0
    assert model_distance([0.0, 0.0]) == pytest.approx(np.sqrt(2) * np.pi / 2)
    with pytest.raises(ValueError, match="arccos"):
        model_distance([1.5])
