"""Least-squares linear aligner and the relative Frobenius error."""

import numpy as np
import pytest

from reprsim.align import LinearAligner, relative_error
from reprsim.compare import matching_layer


def test_exact_on_a_noiseless_affine_map():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6))
    W, b = rng.normal(size=(6, 4)), rng.normal(size=4)
    aligner = LinearAligner().fit(X[:150], X[:150] @ W + b)
    assert aligner.score(X[150:], X[150:] @ W + b) < 1e-12


def test_relative_error_definition():
    Y = np.array([[3.0, 4.0], [0.0, 0.0]])
    assert relative_error(Y, np.zeros_like(Y)) == pytest.approx(1.0)
    assert relative_error(Y, Y * 0.5) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="zeros"):
        relative_error(np.zeros((2, 2)), np.ones((2, 2)))


def test_validation_picks_a_ridge_that_generalises():
    """Rank-deficient inputs stored in float32: plain least squares fits the noise, selection does not."""
    rng = np.random.default_rng(3)
    latent = rng.normal(size=(600, 20))
    X = (latent @ rng.normal(size=(20, 100))).astype(np.float32).astype(np.float64)  # rank 20 + rounding
    Y = latent @ rng.normal(size=(20, 30)) + 0.1 * rng.normal(size=(600, 30))
    train, val, test = slice(0, 300), slice(300, 450), slice(450, 600)
    plain = LinearAligner(ridge=0.0).fit(X[train], Y[train])
    chosen = LinearAligner(ridge=[0.0, 1e-6, 1e-4, 1e-2, 1.0]).fit(X[train], Y[train], X[val], Y[val])
    assert chosen.ridge_ in chosen.validation_errors_ and len(chosen.validation_errors_) == 5
    assert chosen.validation_errors_[chosen.ridge_] == min(chosen.validation_errors_.values())
    assert chosen.score(X[test], Y[test]) <= plain.score(X[test], Y[test]) + 1e-9
    assert chosen.score(X[test], Y[test]) < 0.2
    with pytest.raises(ValueError, match="validation"):
        LinearAligner(ridge=[0.0, 1.0]).fit(X[train], Y[train])


def test_float32_rounding_noise_is_not_fit():
    """Rank-deficient float32 activations (an embedding layer over a small vocabulary): the
    directions at rounding level are cut, so a held-out input with something new in it (a
    word train never had) is not multiplied by the inverse of rounding noise."""
    rng = np.random.default_rng(4)
    latent = rng.normal(size=(500, 15))
    X = latent @ rng.normal(size=(15, 60))
    X[300:] += 0.05 * rng.normal(size=(200, 1)) * rng.normal(size=(1, 60))  # novel direction, test only
    X32 = X.astype(np.float32)
    Y = latent @ rng.normal(size=(15, 10)) + 0.01 * rng.normal(size=(500, 10))
    aligner = LinearAligner(ridge=0.0).fit(X32[:300], Y[:300])
    assert aligner.rank_ == 15
    assert aligner.score(X32[300:], Y[300:]) < 0.05
    # the same rows announced as float64 keep the noise directions, and the map explodes
    naive = LinearAligner(ridge=0.0).fit(X32[:300].astype(np.float64), Y[:300])
    assert naive.rank_ > 15 and naive.score(X32[300:], Y[300:]) > 10 * aligner.score(X32[300:], Y[300:])


def test_ridge_shrinks_towards_the_mean():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 5))
    Y = X @ rng.normal(size=(5, 3))
    plain = LinearAligner().fit(X, Y)
    heavy = LinearAligner(ridge=1e6).fit(X, Y)
    assert np.linalg.norm(heavy.weight) < 1e-2 * np.linalg.norm(plain.weight)
    np.testing.assert_allclose(heavy.transform(X).mean(0), Y.mean(0), atol=1e-3)
    with pytest.raises(ValueError, match="ridge"):
        LinearAligner(ridge=-1)


def test_held_out_error_is_honest_when_n_below_d():
    """With fewer train rows than features the map interpolates train but not held-out rows."""
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(60, 40)), rng.normal(size=(60, 5))
    aligner = LinearAligner().fit(X[:30], Y[:30])
    assert aligner.score(X[:30], Y[:30]) < 1e-8
    assert aligner.score(X[30:], Y[30:]) > 0.9


@pytest.mark.parametrize("layer, frm, to, expected", [(0, 6, 4, 0), (6, 6, 4, 4), (3, 6, 4, 2), (2, 4, 12, 6)])
def test_matching_layer_by_relative_depth(layer, frm, to, expected):
    assert matching_layer(layer, frm, to) == expected
