"""Measures built on each layer's n×n matrix of row (dis)similarities, or on its row space: RSA, RSM norm
difference, distance correlation, GULP and the eigenspace overlap score. Batched over layers: each layer's
matrix, ranks, spectrum or basis is built once per call; a layer pair costs one product or one subtraction.

Euclidean distances come from the Gram matrix of the layer less its column medians (a shift changes no distance
and keeps |x_i|² + |x_j|² − 2<x_i, x_j> from cancelling on large offsets; each median is one of its column's
values, so an integer-valued layer stays integer and its squared distances are exact while sums stay below 2^53;
unlike the mean, a median is not dragged by an outlying row), clamped at 0, diagonal set to 0; the root is
correctly rounded (`correctly_rounded_sqrt_`), so integer layers' distances are the same on every CPU. Everything
else is torch, on the inputs' device.

RSA with Spearman: average ranks, and entries that differ by float rounding only are tied. In sorted order an
entry at most TIE_TOLERANCE · s = 2⁻⁴⁰ s above the previous one joins its tie, s the size of the products the
entry sums (the larger of the two entries' s): 1 for the cosine and correlation RDMs (unit rows),
(|x_i − m|² + |x_j − m|²) / 2 for the Euclidean RDM, ranked by squared distance (m the column medians).
Rounding moves entries by ≤ 3γ_d·s in any summation order, so on any BLAS kernel (γ_d = d·u / (1 − d·u): below
2⁻⁴⁰ for d ≤ 2,730), and by ≤ 1.1e-14 s as measured at d ≤ 4096. Without the tolerance exact ties split (an integer
layer's 823 exact correlation distances are 831 floats in scipy's pdist) and ρ moves, by 2e-4 on the example
of docs/numerics.md; with it, exact values closer than 2⁻⁴⁰ s are tied too.

Where reprsim departs from ReSi (mklabunde/resi, repsim/measures) or the authors' code:
- RSM norm difference: ReSi takes np.linalg.norm(D − D', ord=2) of the n×n matrices, which is the spectral
  norm (by accident: its comment expects a condensed vector); reprsim defaults to the Frobenius norm, the
  norm of Yin & Shen's PIP loss, and offers norm="spectral" for ReSi's number.
- GULP: ReSi and the authors' predictor_dist return the squared plug-in distance d̂²; reprsim returns
  d̂ = sqrt(d̂²), the paper's d_λ, because only the root is a metric.
- GULP, λ = 0: the authors invert every eigenvalue > 0 of AAᵀ (rounding noise included); reprsim keeps the
  singular values of the layer above numpy matrix_rank's tolerance, so a rank-deficient layer has its true rank.
- GULP, λ = 0, and eigenspace overlap: ReSi returns a trivial value when n is too small for the width (GULP:
  0 for n − 1 ≤ d ≤ n; EOS: a ratio of ranks and widths); reprsim raises, as that value says nothing.
- RSA: ReSi (sklearn's cosine) gives a constant row correlation 0 silently; reprsim raises.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from reprsim.metrics._inputs import centre, layer_pair

RDMS = ("euclidean", "cosine", "correlation")
OUTERS = ("spearman", "pearson")
RSMS = ("euclidean", "linear")
NORMS = ("frobenius", "spectral")
TIE_TOLERANCE = 2.0**-40  # RSA's Spearman: sorted RDM entries this close (relative to their scale) are tied


_inputs = layer_pair


def _rows_all_equal(Zs: torch.Tensor) -> bool:
    """Whether some layer has all its rows equal (tested exactly: centring leaves rounding, not zeros)."""
    return bool((Zs == Zs[:, :1]).all(dim=(1, 2)).any())


def _choice(name: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}")


def _squared_distances(Zs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(L, n, n) squared Euclidean distances between the rows of each layer, and (L, n) the squared norms of the
    rows less their column medians, from whose Gram matrix they come: exact for integer-valued layers (every
    sum an integer < 2^53), otherwise off by a few 1e-16 (|x_i − m|² + |x_j − m|²)."""
    Zc = Zs - Zs.median(dim=-2, keepdim=True).values
    squared = Zc @ Zc.transpose(-1, -2)
    norms = squared.diagonal(dim1=-2, dim2=-1).clone()
    squared.mul_(-2).add_(norms[..., :, None]).add_(norms[..., None, :]).clamp_min_(0)
    squared.diagonal(dim1=-2, dim2=-1).zero_()
    return squared, norms


def correctly_rounded_sqrt_(values: torch.Tensor) -> torch.Tensor:
    """Square roots in place, correctly rounded (IEEE 754's sqrt), so equal squared distances give the same
    root on every CPU. torch's CPU sqrt goes through MKL's vector math: within an ulp of the root, by an
    algorithm MKL picks per CPU (on AVX-512 it rounds some integers' roots the other way; on an AMD EPYC with
    AVX2 it differs from the correctly rounded root on 1.2 % of random doubles). NumPy's sqrt is the CPU's sqrt
    instruction, and CUDA's sqrt is correctly rounded in both precisions."""
    if values.device.type != "cpu":
        return values.sqrt_()
    array = values.numpy()
    np.sqrt(array, out=array)
    return values


def euclidean_distances(Zs: torch.Tensor) -> torch.Tensor:
    """(L, n, n) Euclidean distances between the rows of each layer: for integer-valued layers the exact
    distances correctly rounded, on every BLAS kernel (the squared distances are exact integers)."""
    return correctly_rounded_sqrt_(_squared_distances(Zs)[0])


def _unit_rows(Zs: torch.Tensor, degenerate: torch.Tensor, measure: str, why: str) -> torch.Tensor:
    if degenerate.any():
        raise ValueError(f"{measure}: {int(degenerate.sum())} row(s) {why}")
    return Zs / torch.linalg.vector_norm(Zs, dim=-1, keepdim=True)


def dissimilarities(Zs: torch.Tensor, rdm: str) -> torch.Tensor:
    """(L, n, n) RDMs: Euclidean distance, cosine distance 1 − cos, or correlation distance 1 − Pearson r
    between rows (cosine of the rows centred across their features). Zero rows (cosine) and constant rows
    (correlation) are found exactly, before centring leaves rounding in place of zeros."""
    if rdm == "euclidean":
        return euclidean_distances(Zs)
    if rdm == "cosine":
        unit = _unit_rows(Zs, (Zs == 0).all(dim=-1), "rsa with the cosine RDM",
                          "are all zeros; their cosine is undefined")
    else:
        unit = _unit_rows(Zs - Zs.mean(dim=-1, keepdim=True), (Zs == Zs[..., :1]).all(dim=-1),
                          "rsa with the correlation RDM",
                          "are constant across features; their correlation is undefined")
    return 1 - unit @ unit.transpose(-1, -2)


def average_ranks(values: torch.Tensor, tolerance: float | torch.Tensor = 0.0) -> torch.Tensor:
    """Ranks 1..m along the last dimension, ties given the mean of the ranks they span (scipy.stats.rankdata
    'average'): in sorted order, the first and last positions of each run of equal values, averaged.
    tolerance: a sorted value at most this far above the previous one is equal to it (a run of such steps is one
    tie); a number, or a tensor of values' shape giving each value its own (a step takes the larger of its two
    values'). 0, the default: exact equality, as scipy."""
    ordered, order = torch.sort(values, dim=-1)
    m = values.shape[-1]
    positions = torch.arange(m, device=values.device).expand_as(ordered)
    starts = torch.ones_like(ordered, dtype=torch.bool)
    if isinstance(tolerance, torch.Tensor):  # steps within the largest one look up their own
        steps = ordered[..., 1:] - ordered[..., :-1]
        starts[..., 1:] = steps > tolerance.amax(dim=-1, keepdim=True)
        *rows, step = (~starts[..., 1:]).nonzero(as_tuple=True)
        allowed = torch.maximum(tolerance[(*rows, order[(*rows, step)])], tolerance[(*rows, order[(*rows, step + 1)])])
        starts[(*rows, step + 1)] = steps[(*rows, step)] > allowed
    elif tolerance > 0:
        starts[..., 1:] = ordered[..., 1:] - ordered[..., :-1] > tolerance
    else:
        starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    ends = torch.ones_like(starts)
    ends[..., :-1] = starts[..., 1:]
    first = torch.where(starts, positions, 0).cummax(dim=-1).values
    last = torch.where(ends, positions, m).flip(-1).cummin(dim=-1).values.flip(-1)
    return torch.empty_like(values).scatter_(-1, order, (first + last).to(values.dtype) / 2 + 1)


def _standardised(vectors: torch.Tensor, what: str) -> torch.Tensor:
    """Rows centred and scaled to unit norm, so the Pearson r of two rows is their inner product."""
    centred = vectors - vectors.mean(dim=-1, keepdim=True)
    norms = torch.linalg.vector_norm(centred, dim=-1, keepdim=True)
    if (norms == 0).any():
        raise ValueError(f"rsa: a layer's {what} is constant; its correlation with another is undefined")
    return centred / norms


def _rsa_triangles(Zs: torch.Tensor, rdm: str, outer: str) -> torch.Tensor:
    """(L, n(n-1)/2) each layer's RDM entries i < j (row-major), ranked unless `outer` is pearson (average ranks;
    entries that differ by float rounding only are tied: the module docstring), and standardised, so that the
    Pearson r of two layers' triangles is their inner product."""
    n = Zs.shape[1]
    if n < 3:
        raise ValueError(f"rsa needs n ≥ 3 rows (at least 3 pairs of rows to correlate); got n={n}")
    upper = torch.triu_indices(n, n, 1, device=Zs.device)
    flat = upper[0] * n + upper[1]
    if outer == "pearson":
        entries = dissimilarities(Zs, rdm).flatten(1)[:, flat]
    elif rdm == "euclidean":  # squared distances rank as distances do; ties: the module docstring
        squared, norms = _squared_distances(Zs)
        scale = (norms[:, upper[0]] + norms[:, upper[1]]) / 2
        entries = average_ranks(squared.flatten(1)[:, flat], TIE_TOLERANCE * scale)
    else:
        entries = average_ranks(dissimilarities(Zs, rdm).flatten(1)[:, flat], TIE_TOLERANCE)
    return _standardised(entries, "RDM" if outer == "pearson" else "RDM's ranking")


def rsa_layers(Xs, Ys, rdm: str = "correlation", outer: str = "spearman") -> tuple[torch.Tensor, dict]:
    """RSA (Kriegeskorte et al. 2008): the Spearman (or Pearson) correlation between the entries i < j of the two
    layers' RDMs. Each layer's triangle is taken, ranked and standardised once (:func:`_rsa_triangles`); a pair
    is one inner product."""
    _choice("rdm", rdm, RDMS)
    _choice("outer", outer, OUTERS)
    Xs, Ys = _inputs(Xs, Ys)
    return (_rsa_triangles(Xs, rdm, outer) @ _rsa_triangles(Ys, rdm, outer).T).clamp(-1.0, 1.0), \
        {"rdm": rdm, "outer": outer}


def rsa_null_draws(Xs: torch.Tensor, Ys: torch.Tensor, perms: list[torch.Tensor], rdm: str = "correlation",
                   outer: str = "spearman") -> torch.Tensor:
    """(P, L1, L2) RSA with Y's rows permuted by each of `perms`, from each layer's triangle ranked once: permuting
    the rows permutes the RDM's entries (D -> D[p][:, p]) and leaves their values, hence their ranks, ties and
    standardisation, as they were, so a draw re-indexes Y's standardised triangle (entry i < j becomes the entry of
    rows p_i, p_j) and costs one gather and one product per layer pair instead of a sort."""
    _choice("rdm", rdm, RDMS)
    _choice("outer", outer, OUTERS)
    tx, ty = _rsa_triangles(Xs, rdm, outer), _rsa_triangles(Ys, rdm, outer)
    n = Xs.shape[1]
    upper = torch.triu_indices(n, n, 1, device=Xs.device)
    draws = []
    for p in perms:
        a, b = p[upper[0]], p[upper[1]]
        low, high = torch.minimum(a, b), torch.maximum(a, b)
        # the position of pair (low, high), low < high, among the i < j entries in row-major order
        position = low * n - low * (low + 1) // 2 + (high - low - 1)
        draws.append((tx @ ty[:, position].T).clamp(-1.0, 1.0))
    return torch.stack(draws)


def _similarity_matrices(Zs: torch.Tensor, rsm: str) -> torch.Tensor:
    return euclidean_distances(Zs) if rsm == "euclidean" else Zs @ Zs.transpose(-1, -2)


def rsm_norm_difference_layers(Xs, Ys, rsm: str = "euclidean", norm: str = "frobenius") -> tuple[torch.Tensor, dict]:
    """‖S − S'‖ for the layers' n×n RSMs S: Euclidean distances between rows (default), or the linear kernel
    R Rᵀ of the uncentred rows (Yin & Shen's PIP loss). Frobenius norm of the full n×n difference by default.

    ReSi computes np.linalg.norm(D − D', ord=2) on the n×n matrix, the spectral norm (largest singular value),
    by accident; norm="spectral" gives that number (the difference is symmetric: its largest |eigenvalue|,
    O(n³) per pair). A distance; 0 for identical inputs."""
    _choice("rsm", rsm, RSMS)
    _choice("norm", norm, NORMS)
    Xs, Ys = _inputs(Xs, Ys)
    Sx, Sy = _similarity_matrices(Xs, rsm), _similarity_matrices(Ys, rsm)
    if norm == "frobenius":
        values = torch.stack([torch.linalg.matrix_norm(S - Sy) for S in Sx])
    else:
        values = torch.stack([torch.linalg.eigvalsh(S - Sy).abs().amax(dim=-1) for S in Sx])
    return values, {"rsm": rsm, "norm": norm}


def _double_centred(Zs: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Each layer's double-centred distance matrix, flattened (L, n²), and its dVar² = mean of its squares."""
    if _rows_all_equal(Zs):
        raise ValueError(f"dcor: a layer of {name} has all rows equal; its distance variance is 0 and dCor undefined")
    A = euclidean_distances(Zs)
    A = A - A.mean(dim=-1, keepdim=True) - A.mean(dim=-2, keepdim=True) + A.mean(dim=(-2, -1), keepdim=True)
    flat = A.flatten(1)
    return flat, flat.pow(2).mean(dim=1)


def dcor_layers(Xs, Ys) -> tuple[torch.Tensor, dict]:
    """Distance correlation (Székely, Rizzo & Bakirov 2007), V-statistic: dCor = sqrt(dCov² / sqrt(dVar²_X
    dVar²_Y)) with dCov² = mean(Ā ⊙ B̄) over all n² entries of the double-centred Euclidean distance matrices.
    Returns dCor, not dCor², in [0, 1]; 1 for identical inputs."""
    Xs, Ys = _inputs(Xs, Ys)
    n = Xs.shape[1]
    if n < 2:
        raise ValueError(f"dcor needs n ≥ 2 rows; got n={n}")
    Ax, dvar_x = _double_centred(Xs, "Xs")
    By, dvar_y = _double_centred(Ys, "Ys")
    dcov = (Ax @ By.T) / n**2
    values = (dcov.clamp_min(0) / torch.sqrt(torch.outer(dvar_x, dvar_y))).sqrt()
    return values.clamp_max(1.0), {"estimator": "V-statistic", "squared": False}


def _left_singular(Zs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each layer's economy SVD left vectors U (L, n, k), squared singular values μ (L, k) (the eigenvalues of
    ZᵀZ), and a 0/1 mask of those above numpy matrix_rank's tolerance s_max · max(n, d) · eps. From the SVD of
    Z, not an eigendecomposition of ZᵀZ: that resolves only s ≳ 1e-7 s_max, and an uncentred layer's mean
    direction alone can push real directions below that."""
    U, s, _ = torch.linalg.svd(Zs, full_matrices=False)
    mask = (s > s[:, :1] * max(Zs.shape[1:]) * torch.finfo(s.dtype).eps).to(s.dtype)
    return U, s**2, mask


def _gulp_side(Zs: torch.Tensor, lam: float, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A layer's hat matrix P = Z (ZᵀZ + nλI)⁺ Zᵀ = W Wᵀ for the centred, total-variance-1 layer Z: returns
    W = U diag(√w) (L, n, k) and tr P² = Σ w² (L,), w = μ / (μ + nλ) on the rank (1 there at λ = 0)."""
    n = Zs.shape[1]
    if _rows_all_equal(Zs):
        raise ValueError(f"gulp: a layer of {name} has all rows equal; its total variance is 0")
    Zc = centre(Zs)
    Zc = Zc * torch.sqrt(n / Zc.pow(2).sum(dim=(1, 2)))[:, None, None]
    U, mu, mask = _left_singular(Zc)
    weights = mask * mu / (mu + n * lam) if lam > 0 else mask
    return U * weights.sqrt()[:, None, :], (weights**2).sum(dim=1)


def _overlaps(Wx: torch.Tensor, Wy: torch.Tensor) -> torch.Tensor:
    """‖Wxᵀ Wy‖_F² for every layer pair: one product per X layer against all Y layers side by side."""
    L2, n, k2 = Wy.shape
    Y_all = Wy.permute(1, 0, 2).reshape(n, L2 * k2)
    return torch.stack([((W.T @ Y_all).reshape(-1, L2, k2) ** 2).sum(dim=(0, 2)) for W in Wx])


def gulp_layers(Xs, Ys, lam: float = 0.0) -> tuple[torch.Tensor, dict]:
    """GULP (Boix-Adserà et al. 2022): d_λ = ‖P_X − P_Y‖_F for the λ-ridge hat matrices of the centred layers
    scaled to total variance tr Σ = 1 (the authors' normalisation), i.e. the plug-in
    d̂² = tr[(Σ_X G_X)²] + tr[(Σ_Y G_Y)²] − 2 tr[G_X Σ_XY G_Y Σ_YX], G = (Σ + λI)⁺, computed as
    tr P_X² + tr P_Y² − 2‖W_Xᵀ W_Y‖_F² from each layer's SVD (the eigendecomposition of Σ; P = W Wᵀ).

    Returns d̂ = sqrt(d̂²) (tiny negative rounding clipped to 0); ReSi and the authors return d̂². Identical
    inputs give 0 up to rounding (d̂² is a difference of traces of size rank: about 1e-7 in d̂).
    λ = 0 needs n − 1 > d: otherwise both hat matrices are the centring projector (or one is) and the
    distance is the same for any pair. λ > 0 works at any width."""
    if isinstance(lam, bool) or not isinstance(lam, numbers.Real) or not lam >= 0 or lam == float("inf"):
        raise ValueError(f"lam must be a finite number ≥ 0; got {lam!r}")
    Xs, Ys = _inputs(Xs, Ys)
    n, d1, d2 = Xs.shape[1], Xs.shape[2], Ys.shape[2]
    if lam == 0 and n - 1 <= max(d1, d2):
        raise ValueError(f"gulp with lambda 0 needs n − 1 > d; got n={n}, d={max(d1, d2)}")
    Wx, self_x = _gulp_side(Xs, float(lam), "Xs")
    Wy, self_y = _gulp_side(Ys, float(lam), "Ys")
    squared = self_x[:, None] + self_y[None, :] - 2 * _overlaps(Wx, Wy)
    return squared.clamp_min(0).sqrt(), {"lam": float(lam), "squared": False}


def _column_space(Zs: torch.Tensor, name: str) -> tuple[torch.Tensor, list[int]]:
    """Orthonormal bases (L, n, k) of the uncentred layers' column spaces (columns beyond the rank zeroed), ranks."""
    U, _, mask = _left_singular(Zs)
    ranks = mask.sum(dim=1).to(torch.int64).tolist()
    if 0 in ranks:
        raise ValueError(f"eigenspace_overlap: a layer of {name} is all zeros; it has no column space")
    return U * mask[:, None, :], ranks


def eigenspace_overlap_layers(Xs, Ys) -> tuple[torch.Tensor, dict]:
    """Eigenspace overlap score (May et al. 2019): ‖UᵀU'‖_F² / max(d, d') for orthonormal bases U, U' of the
    column spaces of the uncentred layers. Divided by the widths, not the ranks, as ReSi does: a rank-deficient
    layer against itself scores rank/d. Needs n > max(d, d'): with n ≤ d a full-rank layer's columns span all of
    ℝⁿ, and the score is then a ratio of ranks and widths whatever the other layer is."""
    Xs, Ys = _inputs(Xs, Ys)
    n, d1, d2 = Xs.shape[1], Xs.shape[2], Ys.shape[2]
    if n <= max(d1, d2):
        raise ValueError(f"eigenspace_overlap needs n > d; got n={n}, d={max(d1, d2)}")
    Ux, ranks_x = _column_space(Xs, "Xs")
    Uy, ranks_y = _column_space(Ys, "Ys")
    return _overlaps(Ux, Uy) / max(d1, d2), {"normaliser": "max(d1, d2)", "rank_x": ranks_x, "rank_y": ranks_y}
