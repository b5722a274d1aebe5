"""Linear CKA: worked example, invariances, Gram vs feature form, batched vs per pair."""

import numpy as np
import pytest

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
    with pytest.raises(ValueError, match="same rows"):
        linear_cka(X, X[:9])
    with pytest.raises(ValueError, match="NaN"):
        linear_cka(np.where(X > 1, np.nan, X), X)
