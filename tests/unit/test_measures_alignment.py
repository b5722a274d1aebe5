"""Alignment-based measures: loop transcriptions of each formula, identity, worked examples, invariances,
the relations between measures, and the errors on bad parameters or undefined inputs."""

import itertools

import numpy as np
import pytest
import torch
from scipy.optimize import linprog

import rounding
from reprsim.metrics.alignment import (
    aligned_cosine_layers,
    hard_correlation_match_layers,
    linear_regression_layers,
    permutation_procrustes_layers,
    procrustes_size_shape_layers,
    shape_metric_layers,
    soft_matching_layers,
)
from reprsim.metrics.procrustes import procrustes_layers


def t(a):
    return torch.as_tensor(np.asarray(a, dtype=np.float64))


@pytest.fixture(scope="module")
def layers():
    rng = np.random.default_rng(0)
    Xs = rng.normal(size=(2, 40, 6))
    Ys = rng.normal(size=(3, 40, 5))
    Ys[1] += Xs[0, :, :5]  # one related pair
    Xs[1] *= [1.0, 3.0, 0.5, 1.0, 2.0, 1.0]  # anisotropic
    Ys[2] += 0.7  # shifted
    return Xs, Ys


def pad(A, D):
    return np.hstack([A, np.zeros((A.shape[0], D - A.shape[1]))])


def centred(A):
    return A - A.mean(axis=0)


def nuclear(M):
    return sum(np.linalg.svd(M, compute_uv=False))


def check_all_cells(function, expected, Xs, Ys, tol=1e-8, **params):
    """Every (i, j) cell, with X the wider side and again with X the narrower one."""
    for A, B in ((Xs, Ys), (Ys, Xs)):
        values, _ = function(t(A), t(B), **params)
        assert values.shape == (len(A), len(B)) and values.dtype == torch.float64
        for i, j in itertools.product(range(len(A)), range(len(B))):
            assert values[i, j].item() == pytest.approx(expected(A[i], B[j]), rel=tol, abs=tol), (i, j)


# --- loop transcriptions of the formulas --------------------------------------------------------

def netrep_whiten(Xc, alpha):
    """netrep's whiten: eigen-decomposition of XᵀX (no 1/n), eigenvalues clipped at 1e-7, variance kept."""
    if alpha == 1:
        return Xc
    lam, V = np.linalg.eigh(Xc.T @ Xc)
    lam = np.maximum(lam, 1e-7)
    diag = np.array([alpha + (1 - alpha) * l ** -0.5 for l in lam])
    new_var = sum((alpha * np.sqrt(l) + 1 - alpha) ** 2 for l in lam)
    diag = diag * np.sqrt(lam.sum() / new_var)
    Z = np.zeros_like(Xc.T @ Xc)
    for k in range(len(lam)):
        Z += diag[k] * np.outer(V[:, k], V[:, k])
    return Xc @ Z


def loop_shape_metric(alpha):
    def metric(X, Y):
        D = max(X.shape[1], Y.shape[1])  # netrep pads first, then centres and whitens each side
        Px, Py = netrep_whiten(centred(pad(X, D)), alpha), netrep_whiten(centred(pad(Y, D)), alpha)
        return np.arccos(min(1.0, nuclear(Px.T @ Py) / (np.linalg.norm(Px) * np.linalg.norm(Py))))
    return metric


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.0])
def test_shape_metric_matches_loop_transcription(layers, alpha):
    check_all_cells(shape_metric_layers, loop_shape_metric(alpha), *layers, alpha=alpha)


def loop_size_shape(X, Y):
    D = max(X.shape[1], Y.shape[1])
    Xc, Yc = centred(pad(X, D)), centred(pad(Y, D))
    return np.sqrt(max(0.0, np.sum(Xc**2) + np.sum(Yc**2) - 2 * nuclear(Xc.T @ Yc)))


def test_size_shape_matches_loop_transcription(layers):
    check_all_cells(procrustes_size_shape_layers, loop_size_shape, *layers)


def loop_permutation_procrustes(X, Y):
    """Brute force over every permutation of the zero-padded units."""
    D = max(X.shape[1], Y.shape[1])
    Xp, Yp = pad(X, D), pad(Y, D)
    best = np.inf
    for perm in itertools.permutations(range(D)):
        total = 0.0
        for k in range(D):
            for i in range(len(X)):
                total += (Xp[i, perm[k]] - Yp[i, k]) ** 2
        best = min(best, total)
    return np.sqrt(best)


def test_permutation_procrustes_matches_brute_force(layers):
    Xs, Ys = layers
    check_all_cells(permutation_procrustes_layers, loop_permutation_procrustes, Xs, Ys)


def loop_aligned_cosine(X, Y):
    D = max(X.shape[1], Y.shape[1])
    Xp, Yp = pad(X, D), pad(Y, D)
    U, _, Vt = np.linalg.svd(Xp.T @ Yp)
    Q = U @ Vt
    cosines = []
    for i in range(len(X)):
        a, b = Xp[i] @ Q, Yp[i]
        if np.linalg.norm(Xp[i]) == 0 or np.linalg.norm(b) == 0:
            continue
        cosines.append(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    return np.mean(cosines)


def test_aligned_cosine_matches_loop_transcription(layers):
    Xs, Ys = layers
    Xs, Ys = Xs.copy(), Ys.copy()
    Xs[0, 3] = 0.0  # zero rows are skipped
    Ys[2, [5, 7]] = 0.0
    check_all_cells(aligned_cosine_layers, loop_aligned_cosine, Xs, Ys)
    _, meta = aligned_cosine_layers(t(Xs), t(Ys))
    assert meta["skipped_rows"] == [[1, 1, 3], [0, 0, 2]]


def loop_linear_regression(ridge):
    def r2(X, Y):
        Xc, Yc = centred(X), centred(Y)
        if ridge == 0:
            B = np.linalg.lstsq(Xc, Yc, rcond=None)[0]
        else:
            G = Xc.T @ Xc
            B = np.linalg.solve(G + ridge * np.trace(G) / X.shape[1] * np.eye(X.shape[1]), Xc.T @ Yc)
        return 1 - np.sum((Yc - Xc @ B) ** 2) / np.sum(Yc**2)
    return r2


@pytest.mark.parametrize("ridge", [0.0, 0.3])
def test_linear_regression_matches_loop_transcription(layers, ridge):
    check_all_cells(linear_regression_layers, loop_linear_regression(ridge), *layers, ridge=ridge)


def test_linear_regression_with_ridge_when_n_below_d():
    rng = np.random.default_rng(5)
    Xs, Ys = rng.normal(size=(1, 8, 12)), rng.normal(size=(2, 8, 3))
    check_all_cells(linear_regression_layers, loop_linear_regression(0.1), Xs, Ys, ridge=0.1)


def pearson(a, b):
    a, b = a - a.mean(), b - b.mean()
    return sum(a * b) / np.sqrt(sum(a * a) * sum(b * b))


def loop_hard_correlation_match(X, Y):
    """Brute force over every one-to-one matching of the narrower side's units."""
    C = [[pearson(X[:, k], Y[:, l]) for l in range(Y.shape[1])] for k in range(X.shape[1])]
    if X.shape[1] <= Y.shape[1]:
        pairs = [list(zip(range(X.shape[1]), cols)) for cols in itertools.permutations(range(Y.shape[1]), X.shape[1])]
    else:
        pairs = [list(zip(rows, range(Y.shape[1]))) for rows in itertools.permutations(range(X.shape[1]), Y.shape[1])]
    return max(np.mean([C[k][l] for k, l in match]) for match in pairs)


def test_hard_correlation_match_matches_brute_force(layers):
    check_all_cells(hard_correlation_match_layers, loop_hard_correlation_match, *layers)


def loop_soft_matching(normalize):
    def w2(X, Y):
        """Transport LP solved by scipy's linprog over the d1·d2 plan entries."""
        units_x, units_y = [centred(X)[:, k] for k in range(X.shape[1])], [centred(Y)[:, l] for l in range(Y.shape[1])]
        if normalize:
            units_x = [u / np.linalg.norm(u) for u in units_x]
            units_y = [u / np.linalg.norm(u) for u in units_y]
        d1, d2 = len(units_x), len(units_y)
        cost = [sum((units_x[k] - units_y[l]) ** 2) for k in range(d1) for l in range(d2)]
        A, b = [], []
        for k in range(d1):
            A.append([1.0 if kk == k else 0.0 for kk in range(d1) for _ in range(d2)])
            b.append(1 / d1)
        for l in range(d2):
            A.append([1.0 if ll == l else 0.0 for _ in range(d1) for ll in range(d2)])
            b.append(1 / d2)
        result = linprog(cost, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
        return np.sqrt(result.fun)
    return w2


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("width_x", [6, 5])  # 5: equal widths, solved as an assignment
def test_soft_matching_matches_transport_lp(layers, normalize, width_x):
    Xs, Ys = layers
    check_all_cells(soft_matching_layers, loop_soft_matching(normalize), Xs[:, :, :width_x], Ys, normalize=normalize)


# --- identity, worked examples ------------------------------------------------------------------

@pytest.mark.parametrize("function, params, best", [
    (shape_metric_layers, {}, 0.0),
    (shape_metric_layers, {"alpha": 0.0}, 0.0),
    (shape_metric_layers, {"alpha": 0.5}, 0.0),
    (procrustes_size_shape_layers, {}, 0.0),
    (permutation_procrustes_layers, {}, 0.0),
    (aligned_cosine_layers, {}, 1.0),
    (linear_regression_layers, {}, 1.0),
    (linear_regression_layers, {"ridge": 0.1}, None),  # shrinkage: below 1 on identical inputs
    (hard_correlation_match_layers, {}, 1.0),
    (soft_matching_layers, {}, 0.0),
    (soft_matching_layers, {"normalize": True}, 0.0),
])
def test_identical_inputs(layers, function, params, best):
    Xs, _ = layers
    values, _ = function(t(Xs), t(Xs), **params)
    diagonal = values.diagonal().numpy()
    if best is None:
        assert np.all((0.9 < diagonal) & (diagonal < 1))
    elif function is shape_metric_layers:  # arccos(1 − δ) = √(2δ): the root of the cosine's rounding
        np.testing.assert_allclose(diagonal, best, atol=rounding.root_of_cancellation(Xs.shape[1] * Xs.shape[2]))
    else:
        np.testing.assert_allclose(diagonal, best, atol=1e-7)


def test_size_shape_is_exact_near_zero_at_unequal_widths():
    rng = np.random.default_rng(10)
    Z = rng.normal(size=(30, 4))
    Q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    X = pad(Z, 5) @ Q + 2.0  # the same shape as Z, rotated in 5 dimensions and shifted
    assert one(procrustes_size_shape_layers, X, Z) == pytest.approx(0.0, abs=1e-10)
    assert one(procrustes_size_shape_layers, Z, X) == pytest.approx(0.0, abs=1e-10)
    assert one(aligned_cosine_layers, X - 2.0, Z) == pytest.approx(1.0, abs=1e-12)
    assert one(aligned_cosine_layers, Z, X - 2.0) == pytest.approx(1.0, abs=1e-12)


def one(function, X, Y, **params):
    return function(t(X)[None], t(Y)[None], **params)[0][0, 0].item()


def test_worked_examples_by_hand():
    # X̃ = [[1,0],[-1,0],[0,1],[0,-1]], Ỹ = its first column padded: X̃ᵀỸ = [[2],[0]], ‖X̃‖ = 2, ‖Ỹ‖ = √2
    X = [[1.0, 0], [-1, 0], [0, 1], [0, -1]]
    Y = [[1.0], [-1], [0], [0]]
    assert one(shape_metric_layers, X, Y) == pytest.approx(np.pi / 4, abs=1e-12)  # arccos(2 / 2√2)
    assert one(procrustes_size_shape_layers, X, Y) == pytest.approx(np.sqrt(2), abs=1e-12)  # √(4 + 2 − 2·2)
    # swapping the columns of X leaves only the last entry off by 1; keeping them is off by √3
    assert one(permutation_procrustes_layers, [[1.0, 2], [3, 4]], [[2.0, 1], [4, 4]]) == pytest.approx(1.0, abs=1e-12)
    # d = 1: Q* = sign(xᵀy) = +1 (xᵀy = 2), each cosine is sign(x_i y_i): (1 + 1 − 1)/3
    assert one(aligned_cosine_layers, [[1.0], [2], [-1]], [[1.0], [1], [1]]) == pytest.approx(1 / 3, abs=1e-12)
    # xᵀy = −1 -> Q* = −1; row 3 of X is zero and skipped; cosines −1 and +1
    value, meta = aligned_cosine_layers(t([[[1.0], [2], [0]]]), t([[[1.0], [-1], [5]]]))
    assert value.item() == pytest.approx(0.0, abs=1e-12) and meta["skipped_rows"] == [[1]]
    # X̃ = [-1,0,1], Ỹ = [-2,-1,3]: r = 5/√(2·14), R² = 25/28
    assert one(linear_regression_layers, [[0.0], [1], [2]], [[0.0], [1], [5]]) == pytest.approx(25 / 28, abs=1e-12)
    # a = (1,-1,0,0), b = (0,0,1,-1): X = [a, b], Y = [b, a + b]; C = [[0, 1/√2], [1, 1/√2]], best: swap
    a, b = np.array([1.0, -1, 0, 0]), np.array([0.0, 0, 1, -1])
    expected = (1 + 1 / np.sqrt(2)) / 2
    assert one(hard_correlation_match_layers, np.c_[a, b], np.c_[b, a + b]) == pytest.approx(expected, abs=1e-12)
    # units x1 = (1,-1), x2 = (3,-3), each of mass 1/2, both sent to y = (2,-2): ½·2 + ½·2 = 2
    assert one(soft_matching_layers, [[1.0, 3], [-1, -3]], [[2.0], [-2]]) == pytest.approx(np.sqrt(2), abs=1e-12)


# --- relations between measures -----------------------------------------------------------------

def test_shape_metric_at_alpha_one_is_procrustes(layers):
    Xs, Ys = map(t, layers)
    np.testing.assert_allclose(shape_metric_layers(Xs, Ys, alpha=1.0)[0], procrustes_layers(Xs, Ys)[0], atol=1e-10)
    np.testing.assert_allclose(shape_metric_layers(Ys, Xs)[0], procrustes_layers(Ys, Xs)[0], atol=1e-10)


def test_shape_metric_at_alpha_zero_ignores_invertible_affine_maps():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(50, 6))
    Y = X @ rng.normal(size=(6, 6)) + rng.normal(size=6)
    assert one(shape_metric_layers, X, Y, alpha=0.0) == pytest.approx(0.0, abs=1e-6)
    assert one(shape_metric_layers, X, Y, alpha=1.0) > 0.05


def test_soft_matching_at_equal_widths_is_permutation_procrustes_over_sqrt_d(layers):
    Xs, Ys = layers
    Xs, Ys = Xs[:, :, :5], Ys
    Xc, Yc = t(Xs - Xs.mean(axis=1, keepdims=True)), t(Ys - Ys.mean(axis=1, keepdims=True))
    expected = permutation_procrustes_layers(Xc, Yc)[0] / np.sqrt(5)
    np.testing.assert_allclose(soft_matching_layers(t(Xs), t(Ys))[0], expected, atol=1e-10)
    # with unit-norm units, W₂² = 2 − 2·(mean matched correlation): hard correlation match
    normalized = soft_matching_layers(t(Xs), t(Ys), normalize=True)[0]
    np.testing.assert_allclose(1 - normalized**2 / 2, hard_correlation_match_layers(t(Xs), t(Ys))[0], atol=1e-10)


# --- invariances (derived in the module docstrings; checked on one pair each) --------------------

def transforms(rng, d):
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return {
        "PU": lambda X: X[:, rng.permutation(d)],
        "OT": lambda X: X @ Q,
        "IS": lambda X: 3.7 * X,
        "IL": lambda X: X @ (rng.normal(size=(d, d)) + 2 * np.eye(d)),
        "TR": lambda X: X + rng.normal(size=d),
    }


INVARIANT = [  # function, params, the transforms of X it is invariant to
    (shape_metric_layers, {}, {"PU", "OT", "IS", "TR"}),
    (shape_metric_layers, {"alpha": 0.5}, {"PU", "OT", "TR"}),
    (shape_metric_layers, {"alpha": 0.0}, {"PU", "OT", "IS", "IL", "TR"}),
    (procrustes_size_shape_layers, {}, {"PU", "OT", "TR"}),
    (permutation_procrustes_layers, {}, {"PU"}),
    (aligned_cosine_layers, {}, {"PU", "OT", "IS"}),
    (linear_regression_layers, {}, {"PU", "OT", "IS", "IL", "TR"}),  # X is the predictor
    (linear_regression_layers, {"ridge": 0.5}, {"PU", "OT", "IS", "TR"}),
    (hard_correlation_match_layers, {}, {"PU", "IS", "TR"}),
    (soft_matching_layers, {}, {"PU", "TR"}),
    (soft_matching_layers, {"normalize": True}, {"PU", "IS", "TR"}),
]


@pytest.mark.parametrize("function, params, invariant", INVARIANT)
def test_invariances(function, params, invariant):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 5)) + 0.5
    Y = X[:, :4] @ rng.normal(size=(4, 4)) + 0.5 * rng.normal(size=(40, 4)) + 0.3
    base = one(function, X, Y, **params)
    for name, transform in transforms(rng, 5).items():
        changed = abs(one(function, transform(X), Y, **params) - base)
        assert (changed < 1e-8) == (name in invariant), (name, changed)


def test_linear_regression_target_side_is_not_invertible_linear_invariant():
    rng = np.random.default_rng(8)
    X, Y = rng.normal(size=(40, 5)), rng.normal(size=(40, 4))
    Y = Y + X[:, :4]
    A = rng.normal(size=(4, 4)) + 2 * np.eye(4)
    assert abs(one(linear_regression_layers, X, Y @ A) - one(linear_regression_layers, X, Y)) > 1e-3


# --- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("function, params, match", [
    (shape_metric_layers, {"alpha": -0.1}, "alpha"),
    (shape_metric_layers, {"alpha": 1.5}, "alpha"),
    (shape_metric_layers, {"alpha": "1"}, "alpha"),
    (shape_metric_layers, {"alpha": True}, "alpha"),
    (linear_regression_layers, {"ridge": -1.0}, "ridge"),
    (linear_regression_layers, {"ridge": float("nan")}, "ridge"),
    (linear_regression_layers, {"ridge": float("inf")}, "ridge"),
    (linear_regression_layers, {"ridge": None}, "ridge"),
    (soft_matching_layers, {"normalize": 1}, "normalize"),
])
def test_bad_parameters(layers, function, params, match):
    with pytest.raises(ValueError, match=match):
        function(*map(t, layers), **params)


def test_undefined_inputs():
    rng = np.random.default_rng(9)
    wide = t(rng.normal(size=(1, 6, 6)))  # n − 1 = 5 ≤ d = 6
    X = t(rng.normal(size=(1, 20, 4)))
    with pytest.raises(ValueError, match="n − 1 > d"):
        shape_metric_layers(wide, X[:, :6], alpha=0.5)
    shape_metric_layers(wide, X[:, :6], alpha=1.0)  # rotations only: fine
    deficient = X.clone()
    deficient[0, :, 3] = deficient[0, :, 0] + deficient[0, :, 1]
    # a rank-deficient side is whitened (α < 1) and predicts (ridge 0) within its column space
    assert shape_metric_layers(X, deficient, alpha=0.0)[0].item() == pytest.approx(
        shape_metric_layers(X, deficient[:, :, :3], alpha=0.0)[0].item(), abs=1e-10)
    assert linear_regression_layers(deficient, X)[0].item() == pytest.approx(
        linear_regression_layers(deficient[:, :, :3], X)[0].item(), abs=1e-12)
    assert linear_regression_layers(deficient, X)[1]["rank_x"] == [3]
    constant = torch.ones(1, 20, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="constant"):
        shape_metric_layers(constant, X)
    with pytest.raises(ValueError, match="n − 1 > d_x"):
        linear_regression_layers(wide, X[:, :6])
    with pytest.raises(ValueError, match="constant"):
        linear_regression_layers(X, constant)
    with pytest.raises(ValueError, match="constant"):
        linear_regression_layers(constant, X, ridge=0.1)
    dead = X.clone()
    dead[0, :, [1, 2]] = 5.0
    # constant units are left out (tests/unit/test_constant_units.py); a layer with none left is an error
    assert hard_correlation_match_layers(X, dead)[1]["excluded_units"] == {"x": [0], "y": [2]}
    with pytest.raises(ValueError, match="every unit of Y's layer 0 is constant"):
        hard_correlation_match_layers(X, constant)
    with pytest.raises(ValueError, match="every unit of X's layer 0 is constant"):
        soft_matching_layers(constant, X, normalize=True)
    assert "excluded_units" not in soft_matching_layers(dead, X)[1]  # a constant unit is a point at the origin
    with pytest.raises(ValueError, match="every row"):
        aligned_cosine_layers(X, torch.zeros(1, 20, 3, dtype=torch.float64))
