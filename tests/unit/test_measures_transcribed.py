"""The measures reprsim had before the registry, each against a loop transcription of its paper's formula (plain
numpy, sums over rows and units written out; covariances and canonical correlations by Hotelling's definition,
not through reprsim's bases), to 1e-8 on every layer pair of fixed inputs. CKA's estimators have theirs in
test_cka.py; the measures added from ReSi, netrep and the soft-matching paper in test_measures_*.py."""

import numpy as np
import pytest

from reprsim.metrics import compute_layers

L1, L2, N, D1, D2 = 2, 3, 40, 6, 5


@pytest.fixture(scope="module")
def stacks():
    rng = np.random.default_rng(11)
    Xs = rng.normal(size=(L1, N, D1)) @ (rng.normal(size=(D1, D1)) + 2 * np.eye(D1)) + 1.5
    Ys = np.tanh(Xs[rng.integers(0, L1, L2)][:, :, :D2] / 2) + 0.4 * rng.normal(size=(L2, N, D2))
    return Xs, Ys


def _covariance(A, B):
    """Σ_AB[a, b] = (1/n) Σ_i (a_ia − ā_a)(b_ib − b̄_b), the sum over rows written out."""
    n = len(A)
    mean_a, mean_b = A.sum(axis=0) / n, B.sum(axis=0) / n
    out = np.zeros((A.shape[1], B.shape[1]))
    for i in range(n):
        out += np.outer(A[i] - mean_a, B[i] - mean_b)
    return out / n


def _inverse_sqrt(S):
    values, vectors = np.linalg.eigh(S)
    return vectors @ np.diag(values ** -0.5) @ vectors.T


def _canonical(X, Y):
    """Hotelling (1936): canonical correlations ρ (singular values of Σxx^{-1/2} Σxy Σyy^{-1/2}) and X's canonical
    variates (n × c, unit norm) from the whitened left singular vectors."""
    Wx, Wy = _inverse_sqrt(_covariance(X, X)), _inverse_sqrt(_covariance(Y, Y))
    U, rho, _ = np.linalg.svd(Wx @ _covariance(X, Y) @ Wy)
    c = min(X.shape[1], Y.shape[1])
    variates = (X - X.mean(axis=0)) @ Wx @ U[:, :c]
    return np.clip(rho[:c], 0, 1), variates / np.linalg.norm(variates, axis=0)


def _principal(Z, variance):
    """Z's top principal components keeping `variance` of the variance (Raghu et al.'s SVD step)."""
    Zc = Z - Z.mean(axis=0)
    U, S, _ = np.linalg.svd(Zc, full_matrices=False)
    share = np.cumsum(S ** 2) / np.sum(S ** 2)
    k = int(np.searchsorted(share, variance) + 1)
    return U[:, :k] * S[:k]


def _pwcca(X, Y):
    """Morcos et al. (2018): Σ_i α_i ρ_i / Σ α_i, α_i = Σ_j |⟨h_i, x_j⟩| over X's centred neurons."""
    rho, H = _canonical(X, Y)
    Xc = X - X.mean(axis=0)
    alpha = np.array([sum(abs(H[:, i] @ Xc[:, j]) for j in range(X.shape[1])) for i in range(H.shape[1])])
    return float((alpha * rho).sum() / alpha.sum())


def _procrustes(X, Y):
    """Williams et al. (2021), α = 1: arccos of the nuclear norm of the normalised centred cross-product."""
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    Xc, Yc = Xc / np.sqrt((Xc ** 2).sum()), Yc / np.sqrt((Yc ** 2).sum())
    cross = np.zeros((X.shape[1], Y.shape[1]))
    for i in range(len(X)):
        cross += np.outer(Xc[i], Yc[i])
    return float(np.arccos(min(1.0, np.linalg.svd(cross, compute_uv=False).sum())))


def _pearson(a, b):
    a, b = a - a.mean(), b - b.mean()
    return sum(a[i] * b[i] for i in range(len(a))) / np.sqrt((a ** 2).sum() * (b ** 2).sum())


def _neuronsim(X, Y):
    """Wu et al. (2020): mean over X's neurons of the largest |Pearson r| with any neuron of Y."""
    return float(np.mean([max(abs(_pearson(X[:, i], Y[:, j])) for j in range(Y.shape[1]))
                          for i in range(X.shape[1])]))


def _mixedsim(X, Y):
    """Wu et al. (2020): mean over X's centred neurons of ‖least-squares prediction from Y's neurons‖ / ‖neuron‖."""
    Yc = Y - Y.mean(axis=0)
    ratios = []
    for i in range(X.shape[1]):
        x = X[:, i] - X[:, i].mean()
        coefficients, *_ = np.linalg.lstsq(Yc, x, rcond=None)
        ratios.append(np.linalg.norm(Yc @ coefficients) / np.linalg.norm(x))
    return float(np.mean(ratios))


def _mutual_knn(X, Y, k):
    """Huh et al. (2024): mean over rows of |N_k^X(i) ∩ N_k^Y(i)| / k, cosine neighbours, self excluded."""
    def neighbours(Z, i):
        cosines = [(Z[i] @ Z[j] / (np.linalg.norm(Z[i]) * np.linalg.norm(Z[j])), j) for j in range(len(Z)) if j != i]
        return {j for _, j in sorted(cosines, reverse=True)[:k]}

    return float(np.mean([len(neighbours(X, i) & neighbours(Y, i)) / k for i in range(len(X))]))


def _hsic_unbiased(K, L):
    """Song et al. (2012): HSIC₁ with zero diagonals, sums written out."""
    n = len(K)
    K, L = K.copy(), L.copy()
    np.fill_diagonal(K, 0)
    np.fill_diagonal(L, 0)
    trace = sum(K[i, j] * L[j, i] for i in range(n) for j in range(n))
    return (trace + K.sum() * L.sum() / ((n - 1) * (n - 2)) - 2 / (n - 2) * (K.sum(axis=0) @ L.sum(axis=1))) / (
        n * (n - 3))


def _minibatch_cka(X, Y, batch):
    """Nguyen et al. (2021): Σ_b HSIC₁(K_b, L_b) / sqrt(Σ_b HSIC₁(K_b, K_b) Σ_b HSIC₁(L_b, L_b)), linear kernels,
    consecutive batches."""
    xy = xx = yy = 0.0
    for start in range(0, len(X) - batch + 1, batch):
        Xb, Yb = X[start:start + batch], Y[start:start + batch]
        K, L = Xb @ Xb.T, Yb @ Yb.T
        xy, xx, yy = xy + _hsic_unbiased(K, L), xx + _hsic_unbiased(K, K), yy + _hsic_unbiased(L, L)
    return float(xy / np.sqrt(xx * yy))


TRANSCRIBED = {
    "cca": ({}, lambda X, Y: float(_canonical(X, Y)[0].mean())),
    "svcca": ({"threshold": 0.9}, lambda X, Y: float(_canonical(_principal(X, 0.9), _principal(Y, 0.9))[0].mean())),
    "pwcca": ({"direction": "x"}, _pwcca),
    "procrustes": ({}, _procrustes),
    "neuronsim": ({}, _neuronsim),
    "mixedsim": ({}, _mixedsim),
    "mutual_knn": ({"k": 5}, lambda X, Y: _mutual_knn(X, Y, 5)),
    "cka_minibatch": ({"batch_size": 10}, lambda X, Y: _minibatch_cka(X, Y, 10)),
}


@pytest.mark.parametrize("name", sorted(TRANSCRIBED))
def test_every_layer_pair_matches_the_papers_formula(name, stacks):
    params, formula = TRANSCRIBED[name]
    Xs, Ys = stacks
    values = compute_layers(name, Xs, Ys, **params).values
    for i in range(L1):
        for j in range(L2):
            assert values[i, j] == pytest.approx(formula(Xs[i], Ys[j]), rel=1e-8, abs=1e-10), (name, i, j)
