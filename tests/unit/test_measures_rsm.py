"""RSM-based measures (reprsim.metrics.rsm) against plain-numpy loop transcriptions of their papers' formulas,
worked examples, identical inputs, invariances and the errors on bad parameters or undefined input."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats
import torch
from scipy.spatial.distance import pdist

import rounding
from reprsim.metrics.rsm import (
    average_ranks,
    correctly_rounded_sqrt_,
    dcor_layers,
    eigenspace_overlap_layers,
    euclidean_distances,
    gulp_layers,
    rsa_layers,
    rsm_norm_difference_layers,
)

L1, L2, N, D1, D2 = 2, 3, 40, 6, 5


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    Xs = rng.normal(size=(L1, N, D1)) + rng.normal(size=(1, 1, D1))
    Ys = rng.normal(size=(L2, N, D2)) * np.array([1.0, 3.0, 0.5])[:, None, None]
    Ys[1] += Xs[0, :, :D2]  # one related pair, so values are not all near chance
    return Xs, Ys


def t(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64))


def every_cell(f, Xs, Ys, reference, **params):
    values, _ = f(t(Xs), t(Ys), **params)
    assert values.shape == (len(Xs), len(Ys)) and values.dtype == torch.float64
    for i in range(len(Xs)):
        for j in range(len(Ys)):
            assert values[i, j].item() == pytest.approx(reference(Xs[i], Ys[j], **params), rel=1e-8, abs=1e-8), (i, j)


# ---------- loop transcriptions (plain numpy, Python loops as in the formulas) ----------

def loop_distance(a, b, kind):
    if kind == "euclidean":
        return math.sqrt(sum((a[k] - b[k]) ** 2 for k in range(len(a))))
    if kind == "correlation":
        a, b = a - sum(a) / len(a), b - sum(b) / len(b)
    dot = sum(a[k] * b[k] for k in range(len(a)))
    return 1 - dot / (math.sqrt(sum(v * v for v in a)) * math.sqrt(sum(v * v for v in b)))


def loop_ranks(v):
    """Average ranks: 1 + (number smaller) + (number of other equal values) / 2."""
    return [1 + sum(w < x for w in v) + (sum(w == x for w in v) - 1) / 2 for x in v]


def loop_pearson(u, v):
    mu, mv = sum(u) / len(u), sum(v) / len(v)
    num = sum((a - mu) * (b - mv) for a, b in zip(u, v))
    return num / math.sqrt(sum((a - mu) ** 2 for a in u) * sum((b - mv) ** 2 for b in v))


def loop_rsa(X, Y, rdm="correlation", outer="spearman"):
    n = len(X)
    u = [loop_distance(X[i], X[j], rdm) for i in range(n) for j in range(i + 1, n)]
    v = [loop_distance(Y[i], Y[j], rdm) for i in range(n) for j in range(i + 1, n)]
    if outer == "spearman":
        u, v = loop_ranks(u), loop_ranks(v)
    return loop_pearson(u, v)


def loop_matrix(X, rsm):
    n = len(X)
    if rsm == "euclidean":
        return np.array([[loop_distance(X[i], X[j], "euclidean") for j in range(n)] for i in range(n)])
    return np.array([[sum(X[i][k] * X[j][k] for k in range(len(X[i]))) for j in range(n)] for i in range(n)])


def loop_rsm_norm(X, Y, rsm="euclidean", norm="frobenius"):
    diff = loop_matrix(X, rsm) - loop_matrix(Y, rsm)
    if norm == "spectral":
        return np.linalg.norm(diff, ord=2)  # ReSi's expression, the largest singular value
    return math.sqrt(sum(diff[i, j] ** 2 for i in range(len(X)) for j in range(len(X))))


def loop_double_centred(X):
    n = len(X)
    a = loop_matrix(X, "euclidean")
    row = [sum(a[i, j] for j in range(n)) / n for i in range(n)]
    col = [sum(a[i, j] for i in range(n)) / n for j in range(n)]
    grand = sum(row) / n
    return [[a[i, j] - row[i] - col[j] + grand for j in range(n)] for i in range(n)]


def loop_dcor(X, Y):
    n = len(X)
    A, B = loop_double_centred(X), loop_double_centred(Y)
    dcov = sum(A[i][j] * B[i][j] for i in range(n) for j in range(n)) / n**2
    dvar_x = sum(A[i][j] ** 2 for i in range(n) for j in range(n)) / n**2
    dvar_y = sum(B[i][j] ** 2 for i in range(n) for j in range(n)) / n**2
    return math.sqrt(dcov / math.sqrt(dvar_x * dvar_y))


def gulp_features(X):
    """The authors' normalisation, feature-major (d×n): centre each feature, scale so tr Σ = 1."""
    A = (X - X.mean(axis=0)).T
    return A * math.sqrt(A.shape[1] / sum(A[k, i] ** 2 for k in range(A.shape[0]) for i in range(A.shape[1])))


def loop_gulp(X, Y, lam=0.0):
    """The plug-in d̂² = tr[(Σ_A G_A)²] + tr[(Σ_B G_B)²] − 2 tr[G_A Σ_AB G_B Σ_BA], rooted; covariances summed
    over rows, G from the eigenpairs (pseudo-inverse on the non-zero eigenvalues at λ = 0)."""
    A, B = gulp_features(X), gulp_features(Y)
    n = A.shape[1]
    S_a = sum(np.outer(A[:, i], A[:, i]) for i in range(n)) / n
    S_b = sum(np.outer(B[:, i], B[:, i]) for i in range(n)) / n
    S_ab = sum(np.outer(A[:, i], B[:, i]) for i in range(n)) / n

    def inverse(S):
        values, vectors = np.linalg.eigh(S)
        G = np.zeros_like(S)
        for k, value in enumerate(values):
            if lam > 0 or value > 1e-10 * values.max():
                G += np.outer(vectors[:, k], vectors[:, k]) / (value + lam)
        return G

    G_a, G_b = inverse(S_a), inverse(S_b)
    squared = (np.trace(S_a @ G_a @ S_a @ G_a) + np.trace(S_b @ G_b @ S_b @ G_b)
               - 2 * np.trace(G_a @ S_ab @ G_b @ S_ab.T))
    return math.sqrt(max(squared, 0.0))


def hat_gulp(X, Y, lam=0.0):
    """‖P_A − P_B‖_F with the n×n ridge hat matrices P = Aᵀ(AAᵀ + nλI)⁺A."""
    def hat(A):
        n = A.shape[1]
        return A.T @ np.linalg.pinv(A @ A.T + n * lam * np.eye(len(A)), rcond=1e-10, hermitian=True) @ A
    return np.linalg.norm(hat(gulp_features(X)) - hat(gulp_features(Y)))


def loop_eos(X, Y):
    """ReSi's construction: left singular vectors of the uncentred R up to its rank."""
    U = np.linalg.svd(X)[0][:, : np.linalg.matrix_rank(X)]
    V = np.linalg.svd(Y)[0][:, : np.linalg.matrix_rank(Y)]
    total = sum(sum(U[i, k] * V[i, m] for i in range(len(U))) ** 2
                for k in range(U.shape[1]) for m in range(V.shape[1]))
    return total / max(X.shape[1], Y.shape[1])


# ---------- (1) batched function == loop transcription, every cell ----------

@pytest.mark.parametrize("rdm", ["correlation", "cosine", "euclidean"])
@pytest.mark.parametrize("outer", ["spearman", "pearson"])
def test_rsa_matches_loops(data, rdm, outer):
    every_cell(rsa_layers, *data, loop_rsa, rdm=rdm, outer=outer)


def test_rsa_spearman_matches_scipy(data):
    Xs, Ys = data
    values, meta = rsa_layers(t(Xs), t(Ys))
    tri = np.triu_indices(N, 1)
    for i in range(L1):
        for j in range(L2):
            s = 1 - np.corrcoef(Xs[i] - Xs[i].mean(1, keepdims=True))[tri]
            s2 = 1 - np.corrcoef(Ys[j] - Ys[j].mean(1, keepdims=True))[tri]
            assert values[i, j].item() == pytest.approx(scipy.stats.spearmanr(s, s2).statistic, abs=1e-10)
    assert meta == {"rdm": "correlation", "outer": "spearman"}


def test_average_ranks_match_rankdata_with_ties():
    v = np.array([3.0, 1.0, 2.0, 3.0, 1.0, 3.0, 0.5, 2.0, 7.0, 3.0])
    assert np.array_equal(average_ranks(t(v)).numpy(), scipy.stats.rankdata(v, method="average"))
    assert average_ranks(t(v)).tolist() == loop_ranks(list(v))
    both = np.stack([v, -v[::-1]])  # a batch of layers, ranked along the last dimension
    expected = scipy.stats.rankdata(both, method="average", axis=1)
    assert np.array_equal(average_ranks(t(both)).numpy(), expected)
    assert average_ranks(t([[2.0, 2.0, 2.0]])).tolist() == [[2.0, 2.0, 2.0]]


def test_average_ranks_tolerance():
    v = t([0.3, 0.1 + 0.2, 0.7, 0.7 + 1e-3])  # 0.1 + 0.2 is 0.30000000000000004
    assert average_ranks(v).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert average_ranks(v, 1e-12).tolist() == [1.5, 1.5, 3.0, 4.0]
    assert average_ranks(t([1.2e-12, 0.0, 0.6e-12, 1.0]), 1e-12).tolist() == [2.0, 2.0, 2.0, 4.0]  # a run of steps
    values = t([[1.0, 1.0 + 1e-9, 5.0], [3.0, 1.0, 1.0 + 1e-9]])
    own = t([[1e-12, 1e-8, 0.0], [0.0, 1e-12, 1e-12]])  # a step takes the larger of its two values' tolerances
    assert average_ranks(values, own).tolist() == [[1.5, 1.5, 3.0], [3.0, 1.0, 2.0]]


# ---------- (1b) ties: RDM entries equal in exact arithmetic rank as ties (issue 41) ----------

def tied_layers():
    """Integer layers whose RDMs are mostly ties: T's 44 850 Euclidean distances take 29 values."""
    rng = np.random.default_rng(1)
    T = rng.integers(0, 3, (300, 8))
    U = np.concatenate([T[:, :5], rng.integers(0, 3, (300, 5))], axis=1)
    return T, U


def exact_keys(Z, rdm):
    """An integer layer's RDM triangle in exact arithmetic, as keys ordered as the entries: the squared distance
    (an integer), or for 1 − cos the rational −sign(p)·p² / (|a|²|b|²), p = <a, b> (correlation: rows d·a − Σa)."""
    Z = Z.astype(np.int64)
    if rdm == "correlation":
        Z = Z.shape[1] * Z - Z.sum(axis=1, keepdims=True)
    G = Z @ Z.T
    norms = np.diag(G)
    i, j = np.triu_indices(len(Z), 1)
    if rdm == "euclidean":
        return list(norms[i] + norms[j] - 2 * G[i, j])
    return [-Fraction(int(np.sign(p)) * int(p) ** 2, int(a) * int(b)) for p, a, b in zip(G[i, j], norms[i], norms[j])]


def exact_spearman(Z1, Z2, rdm):
    def ranks(keys):
        position = {key: k for k, key in enumerate(sorted(set(keys)))}
        return scipy.stats.rankdata([position[key] for key in keys])
    return scipy.stats.spearmanr(ranks(exact_keys(Z1, rdm)), ranks(exact_keys(Z2, rdm))).statistic


def spearman_tolerance(n: int) -> float:
    """ρ from exact ranks of the n(n − 1)/2 entries: centring, norms and the product each sum m terms."""
    return rounding.products(3 * (n * (n - 1) // 2))


@pytest.mark.parametrize("rdm", ["euclidean", "correlation", "cosine"])
def test_rsa_spearman_ties_match_scipy_on_integer_data(rdm):
    """Exact ties rank as ties on every kernel: the ranks are those of the exact values, so ρ is off by rounding of
    the final correlation only."""
    T, U = tied_layers()
    value = rsa_layers(t(T[None]), t(U[None]), rdm=rdm)[0].item()
    assert value == pytest.approx(exact_spearman(T, U, rdm), abs=spearman_tolerance(len(T)))
    a, b = pdist(T, rdm), pdist(U, rdm)
    if rdm == "euclidean":  # scipy's distances are roots of exact integers: its ties are exact
        assert value == pytest.approx(0.549888, abs=1e-6)  # as rsatoolbox; 0.550111 with the ties split
    else:  # scipy's cosine and correlation distances split exact ties by rounding: compared rounded to 1e-9
        assert len(np.unique(a)) > len(set(exact_keys(T, rdm)))
        a, b = np.round(a, 9), np.round(b, 9)
    assert value == pytest.approx(scipy.stats.spearmanr(a, b).statistic, abs=2 * spearman_tolerance(len(T)))


@pytest.mark.parametrize("rdm", ["euclidean", "correlation", "cosine"])
def test_rsa_spearman_matches_scipy_on_continuous_data(rdm):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 12)) * rng.uniform(0.1, 3.0, 12) + 5.0
    Y = X[:, :6] @ rng.normal(size=(6, 9)) + rng.normal(size=(200, 9))
    value = rsa_layers(t(X[None]), t(Y[None]), rdm=rdm)[0].item()
    expected = scipy.stats.spearmanr(pdist(X, rdm), pdist(Y, rdm)).statistic
    assert value == pytest.approx(expected, abs=2 * spearman_tolerance(len(X)))  # both sides round


def test_euclidean_distances_exact_on_integer_data():
    """Exact on every kernel by construction: each partial sum of the Gram product is an integer below 2^53,
    whatever order a BLAS kernel sums in, and the root is correctly rounded. So equal true distances are equal
    computed ones (RSA's tied ranks), and the same on every CPU."""
    T, U = tied_layers()
    squared = np.sum((T[:, None, :] - T[None, :, :]) ** 2, axis=-1)
    for offset in (0, 10**6):  # the column medians are data values: shifted integers stay exact
        assert np.array_equal(euclidean_distances(t(T[None] + offset))[0].numpy(), np.sqrt(squared))
    assert rsa_layers(t(T[None] + 10**6), t(U[None]), rdm="euclidean")[0].item() == rsa_layers(
        t(T[None]), t(U[None]), rdm="euclidean")[0].item()


def test_square_roots_are_correctly_rounded():
    """IEEE 754's root (numpy's, the CPU instruction), not torch's CPU sqrt, which MKL's vector math computes to
    within an ulp by a per-CPU algorithm (on the AMD EPYC these tests were written on it differs on ~1 % of these)."""
    rng = np.random.default_rng(8)
    values = np.concatenate([rng.uniform(0, 30, 20_000), rng.integers(0, 10**6, 20_000), [0.0, 2.0**-1074]])
    for dtype in (np.float64, np.float32):
        squares = values.astype(dtype)
        roots = correctly_rounded_sqrt_(torch.as_tensor(squares.copy()))
        assert roots.dtype == torch.from_numpy(squares).dtype and np.array_equal(roots.numpy(), np.sqrt(squares))
    matrix = torch.as_tensor(values.copy()).reshape(2, -1)
    correctly_rounded_sqrt_(matrix[:, ::3])  # a strided view: rooted in place, the rest untouched
    assert np.array_equal(matrix[:, ::3].numpy(), np.sqrt(values.reshape(2, -1)[:, ::3]))
    assert np.array_equal(matrix[:, 1::3].numpy(), values.reshape(2, -1)[:, 1::3])


@pytest.mark.parametrize("rsm", ["euclidean", "linear"])
@pytest.mark.parametrize("norm", ["frobenius", "spectral"])
def test_rsm_norm_difference_matches_loops(data, rsm, norm):
    every_cell(rsm_norm_difference_layers, *data, loop_rsm_norm, rsm=rsm, norm=norm)


def test_dcor_matches_loops(data):
    every_cell(dcor_layers, *data, loop_dcor)


@pytest.mark.parametrize("lam", [0.0, 0.05, 3.0])
def test_gulp_matches_plug_in_and_hat_matrices(data, lam):
    every_cell(gulp_layers, *data, loop_gulp, lam=lam)
    every_cell(gulp_layers, *data, hat_gulp, lam=lam)


def test_gulp_positive_lambda_wider_than_n():
    """λ > 0 with d > n (the n×n Gram branch) against the hat matrices."""
    rng = np.random.default_rng(3)
    every_cell(gulp_layers, rng.normal(size=(2, 10, 14)), rng.normal(size=(2, 10, 4)), hat_gulp, lam=0.1)


def test_gulp_rank_deficient_layer():
    """A repeated column: the pseudo-inverse works on the true rank, and the layer is its own distance 0."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1, N, D1))
    X[0, :, -1] = X[0, :, 0]
    every_cell(gulp_layers, X, rng.normal(size=(1, N, D2)), hat_gulp)
    assert gulp_layers(t(X), t(X))[0].item() < 1e-6


def test_eos_matches_loops(data):
    every_cell(eigenspace_overlap_layers, *data, loop_eos)


def test_eos_rank_deficient_uses_widths():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1, N, D1))
    X[0, :, -1] = X[0, :, 0] - 2 * X[0, :, 1]
    every_cell(eigenspace_overlap_layers, X, rng.normal(size=(1, N, D2)), loop_eos)
    values, meta = eigenspace_overlap_layers(t(X), t(X))
    assert values.item() == pytest.approx((D1 - 1) / D1, abs=1e-12) and meta["rank_x"] == [D1 - 1]


def test_eos_large_mean_offset():
    """Uncentred, so the mean direction dominates: the bases come from the layer's SVD (an eigendecomposition of
    RᵀR loses directions below ~1e-7 s_max and would score this layer against itself as less than 1)."""
    rng = np.random.default_rng(6)
    X = rng.normal(size=(1, N, D1)) * np.logspace(0, -3, D1) + 1e4
    every_cell(eigenspace_overlap_layers, X, rng.normal(size=(1, N, D2)) + 1e4, loop_eos)
    assert eigenspace_overlap_layers(t(X), t(X))[0].item() == pytest.approx(1.0, abs=1e-12)


# ---------- (2) identical inputs ----------

def test_identical_inputs(data):
    Xs = t(data[0])
    ones = torch.ones(L1, dtype=torch.float64)
    assert torch.allclose(rsa_layers(Xs, Xs)[0].diagonal(), ones, atol=1e-12)
    assert torch.all(rsm_norm_difference_layers(Xs, Xs)[0].diagonal() == 0)
    assert torch.all(rsm_norm_difference_layers(Xs, Xs, rsm="linear", norm="spectral")[0].diagonal() == 0)
    assert torch.allclose(dcor_layers(Xs, Xs)[0].diagonal(), ones, atol=1e-12)
    # d̂² is a difference of traces of size rank: rounding leaves ~1e-7 in its root
    assert gulp_layers(Xs, Xs)[0].diagonal().max() < 1e-6
    assert gulp_layers(Xs, Xs, lam=0.1)[0].diagonal().max() < 1e-6
    assert torch.allclose(eigenspace_overlap_layers(Xs, Xs)[0].diagonal(), ones, atol=1e-12)


# ---------- (3) worked examples by hand ----------

def test_rsa_by_hand():
    # 1-D points: distances (d01, d02, d12)
    X, Y = t([[[0.0], [1.0], [3.0]]]), t([[[0.0], [2.0], [3.0]]])  # (1, 3, 2) vs (2, 3, 1)
    assert rsa_layers(X, Y, rdm="euclidean")[0].item() == pytest.approx(0.5, abs=1e-12)  # 1 − 6·2/(3·8)
    tied = t([[[0.0], [1.0], [2.0]]])  # (1, 2, 1): ranks (1.5, 3, 1.5)
    assert rsa_layers(tied, Y, rdm="euclidean")[0].item() == pytest.approx(math.sqrt(3) / 2, abs=1e-12)


def test_rsm_norm_difference_by_hand():
    X, Y = t([[[0.0], [1.0]]]), t([[[0.0], [3.0]]])  # distances 1 and 3: difference 2 off the diagonal
    assert rsm_norm_difference_layers(X, Y)[0].item() == pytest.approx(2 * math.sqrt(2), abs=1e-12)
    assert rsm_norm_difference_layers(X, Y, norm="spectral")[0].item() == pytest.approx(2.0, abs=1e-12)
    X, Y = t([[[1.0], [0.0]]]), t([[[0.0], [1.0]]])  # R Rᵀ = diag(1, 0) and diag(0, 1)
    assert rsm_norm_difference_layers(X, Y, rsm="linear")[0].item() == pytest.approx(math.sqrt(2), abs=1e-12)
    assert rsm_norm_difference_layers(X, Y, rsm="linear", norm="spectral")[0].item() == pytest.approx(1.0, abs=1e-12)


def test_dcor_by_hand():
    # 9Ā = [[-10,2,8],[2,-4,2],[8,2,-10]], 9B̄ the same with rows/columns 1 and 2 swapped: dCor² = 252/360
    X, Y = t([[[0.0], [1.0], [2.0]]]), t([[[0.0], [2.0], [1.0]]])
    assert dcor_layers(X, Y)[0].item() == pytest.approx(math.sqrt(0.7), abs=1e-12)


def test_gulp_by_hand():
    # d = 1: P projects on the centred column, so d² = 2 − 2ρ²; centred (−1, 0, 1) and (−1, 1, 0) have ρ = 1/2
    X, Y = t([[[0.0], [1.0], [2.0]]]), t([[[0.0], [2.0], [1.0]]])
    assert gulp_layers(X, Y)[0].item() == pytest.approx(math.sqrt(1.5), abs=1e-12)


def test_eos_by_hand():
    e1 = t([[[1.0], [0.0], [0.0]]])
    assert eigenspace_overlap_layers(e1, t([[[1.0], [1.0], [0.0]]]))[0].item() == pytest.approx(0.5, abs=1e-12)
    plane = t([[[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]])  # overlap 1, divided by the larger width 2
    assert eigenspace_overlap_layers(plane, e1)[0].item() == pytest.approx(0.5, abs=1e-12)


# ---------- invariances at the default parameters ----------

def transforms(rng, d):
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    return {
        "PU": lambda X: X[:, rng.permutation(d)],
        "OT": lambda X: X @ Q,
        "IS": lambda X: 3.7 * X,
        "IL": lambda X: X @ (rng.normal(size=(d, d)) + 3 * np.eye(d)),
        "TR": lambda X: X + rng.normal(size=d) * 5,
    }


INVARIANT = {
    rsa_layers: {"PU", "IS"},
    rsm_norm_difference_layers: {"PU", "OT", "TR"},
    dcor_layers: {"PU", "OT", "IS", "TR"},
    gulp_layers: {"PU", "OT", "IS", "IL", "TR"},
    eigenspace_overlap_layers: {"PU", "OT", "IS", "IL"},
}


@pytest.mark.parametrize("f", list(INVARIANT), ids=lambda f: f.__name__)
def test_invariances(data, f):
    rng = np.random.default_rng(11)
    X, Y = data[0][0], data[1][1]
    base = f(t(X[None]), t(Y[None]))[0].item()
    for name, transform in transforms(rng, D1).items():
        moved = f(t(transform(X)[None]), t(Y[None]))[0].item()
        assert (abs(moved - base) < 1e-8 * max(1.0, abs(base))) == (name in INVARIANT[f]), name


# ---------- (4) errors ----------

@pytest.mark.parametrize("f, params, match", [
    (rsa_layers, {"rdm": "manhattan"}, "rdm"),
    (rsa_layers, {"outer": "kendall"}, "outer"),
    (rsm_norm_difference_layers, {"rsm": "cosine"}, "rsm"),
    (rsm_norm_difference_layers, {"norm": "nuclear"}, "norm"),
    (gulp_layers, {"lam": -1.0}, "lam"),
    (gulp_layers, {"lam": float("nan")}, "lam"),
    (gulp_layers, {"lam": "0.1"}, "lam"),
])
def test_bad_parameters(data, f, params, match):
    with pytest.raises(ValueError, match=match):
        f(t(data[0]), t(data[1]), **params)


def test_undefined_inputs(data):
    Xs, Ys = t(data[0]), t(data[1])
    constant_row = Xs.clone()
    constant_row[0, 3] = 0.1  # its mean across features is not exactly 0.1
    with pytest.raises(ValueError, match="correlation RDM"):
        rsa_layers(constant_row, Ys)
    zero_row = Xs.clone()
    zero_row[1, 5] = 0.0
    with pytest.raises(ValueError, match="cosine RDM"):
        rsa_layers(zero_row, Ys, rdm="cosine")
    with pytest.raises(ValueError, match="n ≥ 3"):
        rsa_layers(Xs[:, :2], Ys[:, :2])
    simplex = t(np.eye(3)[None])  # all three distances √2: the RDM has no ranking
    with pytest.raises(ValueError, match="constant"):
        rsa_layers(simplex, Ys[:1, :3], rdm="euclidean")
    same_rows = Xs.clone()
    same_rows[1] = same_rows[1, :1]
    with pytest.raises(ValueError, match="distance variance"):
        dcor_layers(same_rows, Ys)
    with pytest.raises(ValueError, match="gulp with lambda 0 needs n − 1 > d; got n=7, d=6"):
        gulp_layers(Xs[:, :7], Ys[:, :7])
    assert gulp_layers(Xs[:, :8], Ys[:, :8])[0].shape == (L1, L2)
    with pytest.raises(ValueError, match="total variance"):
        gulp_layers(same_rows, Ys)
    with pytest.raises(ValueError, match="eigenspace_overlap needs n > d; got n=6, d=6"):
        eigenspace_overlap_layers(Xs[:, :6], Ys[:, :6])
    with pytest.raises(ValueError, match="all zeros"):
        eigenspace_overlap_layers(torch.zeros_like(Xs), Ys)
    with pytest.raises(ValueError, match="same rows"):
        dcor_layers(Xs, Ys[:, :-1])
