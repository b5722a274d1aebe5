"""Centered Kernel Alignment (Kornblith et al. 2019), every estimator in docs/numerics.md, batched over layers.

CKA(K, L) = HSIC(K, L) / sqrt(HSIC(K, K) · HSIC(L, L)) for Gram matrices K of X and L of Y.

- kernel="linear": K = X Xᵀ. kernel="rbf": K_ij = exp(−||x_i − x_j||² / (2σ²)) with
  σ = threshold · sqrt(median of the squared distances over distinct pairs i < j).
- estimator="biased": HSIC₀ = <HKH, HLH>_F (centring by subtracting row, column and grand
  means, never by multiplying with H). For the linear kernel and n > max(d1, d2) the
  feature-space form ||Xcᵀ Yc||_F² / (||Xcᵀ Xc||_F ||Ycᵀ Yc||_F) is used; the two agree.
- estimator="unbiased": Song et al.'s U-statistic HSIC₁ on Grams with zeroed diagonals;
  needs n ≥ 4; may be negative and is reported as is. For the linear kernel it has a feature form
  too (d×d products and the rows' squared norms), used by the same rule as the biased one.
- The Gram form keeps its n×n matrices within the working-memory budget (reprsim.metrics.memory):
  beyond it, a block of one side's layers at a time against the other side's, one layer at a time.
- minibatch_cka: Nguyen et al. (2021), HSIC₁ summed over equal-size row batches.

All accumulation is in float64 on the inputs' device. A degenerate layer (zero
self-similarity) gives NaN, never a number biased by an epsilon.
"""

from __future__ import annotations

import numpy as np
import torch

from reprsim.metrics._inputs import centre, layers, pair
from reprsim.metrics.memory import gram_layers_held, working_bytes

KERNELS = ("linear", "rbf")
ESTIMATORS = ("biased", "unbiased")


def check(kernel: str, estimator: str, n: int) -> None:
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}; got {kernel!r}")
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}; got {estimator!r}")
    if estimator == "unbiased" and n < 4:
        raise ValueError(f"the unbiased HSIC estimator needs n ≥ 4 rows; got n={n}")
    if n < 2:
        raise ValueError(f"CKA needs at least 2 rows; got n={n}")


def _median(values: torch.Tensor) -> torch.Tensor:
    """Median as numpy defines it (mean of the two middle values for an even count): the same middle
    values a sort gives, selected (kthvalue: O(k), and no sorted copy beside the values)."""
    k = values.numel()
    if k % 2:
        return values.kthvalue((k + 1) // 2).values
    return (values.kthvalue(k // 2).values + values.kthvalue(k // 2 + 1).values) / 2


def _upper_triangle(square: torch.Tensor) -> torch.Tensor:
    """The entries above the diagonal of an (n, n) matrix, row by row, gathered a block of rows at a time
    (masked_select of the whole matrix would index it with n² int64s)."""
    n = square.shape[0]
    out = torch.empty(n * (n - 1) // 2, dtype=square.dtype, device=square.device)
    columns = torch.arange(n, device=square.device)
    step, filled = -(-n // 32), 0
    for start in range(0, n, step):
        rows = torch.arange(start, min(n, start + step), device=square.device)
        chosen = square[start:start + len(rows)].masked_select(columns[None, :] > rows[:, None])
        out[filled:filled + chosen.numel()] = chosen
        filled += chosen.numel()
    return out


def gram(Xs: torch.Tensor, kernel: str = "linear", threshold: float = 1.0, medians: dict | None = None) -> torch.Tensor:
    """Gram matrices of (L, n, d) activations: (L, n, n); RBF medians per layer as in :func:`_grams`."""
    return _grams(Xs, range(Xs.shape[0]), kernel, threshold, {} if medians is None else dict(medians))


def rbf_medians(Zs: torch.Tensor, threshold: float = 1.0) -> dict:
    """Each layer's RBF median squared distance over all its rows (one layer's matrix at a time): the bandwidth
    a subsample's Grams keep when they are rebuilt on its rows (the half-sample interval, recompute route)."""
    medians = {}
    for layer in range(Zs.shape[0]):
        _grams(Zs, [layer], "rbf", threshold, medians)
    return medians


def _grams(Zs: torch.Tensor, layers, kernel: str, threshold: float, medians: dict) -> torch.Tensor:
    """Gram matrices of the given layers of Zs, one layer at a time (a layer's scratch, not the stack's).
    `medians` maps a layer to its RBF median squared distance: filled on first use, reused when a
    layer's Gram is built again (the tiled Gram form), so a rebuild is the same matrix."""
    if kernel == "rbf" and threshold <= 0:
        raise ValueError(f"rbf threshold must be > 0; got {threshold}")
    layers = list(layers)
    n = Zs.shape[-2]
    out = torch.empty(len(layers), n, n, dtype=Zs.dtype, device=Zs.device)
    for position, layer in enumerate(layers):
        torch.matmul(Zs[layer], Zs[layer].T, out=out[position])
        if kernel == "rbf":
            medians[layer] = _rbf_in_place(out[position], threshold, medians.get(layer))
    return out


def _rbf_in_place(inner: torch.Tensor, threshold: float, median: torch.Tensor | None) -> torch.Tensor:
    """One layer's inner products (n, n) -> its RBF Gram, in place, with the same operations in the same
    order as on a whole stack: squared distances (|x_i|² + |x_j|²) − 2<x_i, x_j> clamped at 0, the median
    over pairs i < j (unless given), exp(−squared / (2 threshold² median)). Returns the median."""
    n = inner.shape[0]
    norms = torch.diagonal(inner).clone()
    inner.mul_(2)
    step = -(-n // 4)
    for start in range(0, n, step):  # a quarter of the rows at a time: no second n×n matrix
        rows = slice(start, start + step)
        block = norms[rows, None] + norms[None, :]
        inner[rows] = block.sub_(inner[rows])
    inner.clamp_min_(0)
    if median is None:
        median = _median(_upper_triangle(inner))
        if median == 0:
            raise ValueError("rbf kernel: the median squared distance is 0 (most rows identical); σ is undefined")
    inner.neg_().div_(2 * threshold**2 * median).exp_()
    return median


def centre_gram(K: torch.Tensor) -> torch.Tensor:
    """HKH in O(n²): subtract row and column means, add the grand mean."""
    return K - K.mean(dim=-1, keepdim=True) - K.mean(dim=-2, keepdim=True) + K.mean(dim=(-2, -1), keepdim=True)


def _centre_gram_(K: torch.Tensor) -> torch.Tensor:
    """centre_gram in place (the same operations in the same order)."""
    row, column, grand = K.mean(dim=-1, keepdim=True), K.mean(dim=-2, keepdim=True), K.mean(dim=(-2, -1), keepdim=True)
    return K.sub_(row).sub_(column).add_(grand)


def _hsic_terms(Ks: torch.Tensor, estimator: str) -> tuple[torch.Tensor, ...]:
    """Per-layer pieces from which HSIC of any pair is one batched product. Consumes Ks (a fresh
    stack of Grams): centred, or its diagonal zeroed, in place."""
    if estimator == "biased":
        return (_centre_gram_(Ks).flatten(1),)
    Ks.diagonal(dim1=-2, dim2=-1).zero_()
    rows = Ks.sum(dim=-1)
    return Ks.flatten(1), rows.sum(dim=-1), rows


def _hsic_cross(a: tuple, b: tuple, estimator: str, n: int) -> torch.Tensor:
    """HSIC for every pair of layers (La, Lb) from their terms; HSIC₀ without its 1/(n−1)² (it cancels)."""
    if estimator == "biased":
        return a[0] @ b[0].T
    flat_a, total_a, rows_a = a
    flat_b, total_b, rows_b = b
    trace = flat_a @ flat_b.T  # tr(K̃ L̃) for symmetric Grams
    return (
        trace + torch.outer(total_a, total_b) / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (rows_a @ rows_b.T)
    ) / (n * (n - 3))


def _hsic_self(a: tuple, estimator: str, n: int) -> torch.Tensor:
    if estimator == "biased":
        return (a[0] ** 2).sum(dim=1)
    flat, total, rows = a
    return ((flat**2).sum(dim=1) + total**2 / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (rows**2).sum(dim=1)) / (
        n * (n - 3)
    )


def _normalise(cross: torch.Tensor, self_x: torch.Tensor, self_y: torch.Tensor) -> torch.Tensor:
    denominator = torch.sqrt(torch.outer(self_x, self_y))  # NaN when an unbiased self term is negative
    return torch.where(denominator > 0, cross / denominator, torch.full_like(cross, float("nan")))


def _feature_space_linear(Xc: torch.Tensor, Yc: torch.Tensor, estimator: str = "biased") -> torch.Tensor:
    """Linear CKA via d×d products, all layer pairs: biased ||Xcᵀ Yc||_F² / (||Xcᵀ Xc||_F ||Ycᵀ Yc||_F), or
    unbiased (HSIC₁ of the centred Grams, which is HSIC₁ of the raw ones: see _unbiased_from_features)."""
    # squared, like HSIC(K, K) = ||Xcᵀ Xc||_F² in the Gram form
    self_x = torch.linalg.matrix_norm(Xc.transpose(-1, -2) @ Xc) ** 2
    self_y = torch.linalg.matrix_norm(Yc.transpose(-1, -2) @ Yc) ** 2
    L2, n, d2 = Yc.shape
    Y_all = Yc.permute(1, 0, 2).reshape(n, L2 * d2)  # every Y layer side by side: one GEMM per X layer
    cross = torch.stack([((X.T @ Y_all).reshape(-1, L2, d2) ** 2).sum(dim=(0, 2)) for X in Xc])
    if estimator == "biased":
        return _normalise(cross, self_x, self_y)
    a, b = (Xc**2).sum(dim=-1), (Yc**2).sum(dim=-1)  # the Grams' diagonals (L, n)
    return _normalise(_unbiased_from_features(cross, a @ b.T, a.sum(dim=1)[:, None], b.sum(dim=1)[None, :], n),
                      _unbiased_from_features(self_x, (a**2).sum(dim=1), a.sum(dim=1), a.sum(dim=1), n),
                      _unbiased_from_features(self_y, (b**2).sum(dim=1), b.sum(dim=1), b.sum(dim=1), n))


def _unbiased_from_features(trace: torch.Tensor, diagonals: torch.Tensor, total_a: torch.Tensor,
                            total_b: torch.Tensor, n: int) -> torch.Tensor:
    """HSIC₁ of K = Xc Xcᵀ and L = Yc Ycᵀ from d×d products. HSIC₁ is unchanged by K -> K + f1ᵀ + 1fᵀ + c11ᵀ
    (Song et al. 2012), and centring is such a change, so this is HSIC₁ of the raw Grams. With Xcᵀ1 = 0 and
    a, b the diagonals of K and L: tr(K̃L̃) = ||Xcᵀ Yc||_F² − aᵀb (`trace` − `diagonals`), 1ᵀK̃1 = −Σa
    (`total_a`), K̃1 = −a, so (K̃1)ᵀ(L̃1) = aᵀb."""
    return (trace - diagonals + total_a * total_b / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * diagonals) / (n * (n - 3))


GRAM_BYTES_LIMIT = 1 << 30  # one side's (L, n, n) float64 Grams; above it the feature form is used


def _feature_form_is_cheaper(x_shape, y_shape) -> bool:
    """docs/numerics.md: the feature form needs n > max(d1, d2); among the two forms take the one with fewer
    multiply-adds for all layer pairs, unless the Gram form would not fit in GRAM_BYTES_LIMIT."""
    (L1, n, d1), (L2, _, d2) = x_shape, y_shape
    if n <= max(d1, d2):
        return False
    feature = L1 * L2 * n * d1 * d2 + n * (L1 * d1**2 + L2 * d2**2)
    gram = n**2 * (L1 * d1 + L2 * d2) + L1 * L2 * n**2
    return feature < gram or not one_side_fits(x_shape, y_shape)


# scratch n×n matrices beside the Grams held: a layer's self term (its squared entries), and for RBF the
# median's pairs (half a matrix) and their selection (a copy with int64 positions)
GRAM_SCRATCH = {"linear": 1.0, "rbf": 2.0}


def gram_plan(L1: int, L2: int, n: int, kernel: str) -> dict:
    """How the Gram form computes L1 x L2 layer pairs of n rows under the working-memory budget: `held`
    Grams of one side at a time (`swap`: Y's side), the other side's built one at a time per block;
    `builds` Gram matrices built in all; `peak_grams`, the n×n float64 matrices at once, scratch included."""
    scratch = GRAM_SCRATCH[kernel]
    stacked = L1 + L2 + max(scratch, L1, L2)  # both sides' Grams, and the squares of one side's for its self terms
    if stacked * 8 * n * n <= working_bytes():
        return {"tiled": False, "swap": False, "held": L1, "builds": L1 + L2, "peak_grams": stacked}
    options = []
    for swap, (held_side, streamed) in ((False, (L1, L2)), (True, (L2, L1))):
        held = gram_layers_held(n, held_side, scratch)
        options.append((held_side + -(-held_side // held) * streamed, swap, held))
    builds, swap, held = min(options)  # fewer builds; on a tie X's side held
    return {"tiled": True, "swap": swap, "held": held, "builds": builds, "peak_grams": held + 1 + scratch}


def _gram_form(Xs: torch.Tensor, Ys: torch.Tensor, kernel: str, estimator: str, threshold: float,
               medians: tuple[dict, dict] | None = None) -> torch.Tensor:
    """CKA of every layer pair from Gram matrices, within the working-memory budget (reprsim.metrics.memory).

    Both sides' Grams at once when they fit (L1 + L2 of them, plus scratch); otherwise tiled (gram_plan):
    the Grams of a block of layers of one side are held while the other side's are built one layer at a
    time, once per block (an RBF median is computed once per layer and reused). Every pair's HSIC terms
    are the same either way; the side held is the one that needs fewer Gram builds. `medians` (X's, Y's):
    RBF medians given per layer (set on other rows), else each layer's own."""
    (L1, n, _), L2 = Xs.shape, Ys.shape[0]
    medians_x, medians_y = ({}, {}) if medians is None else (dict(medians[0]), dict(medians[1]))
    plan = gram_plan(L1, L2, n, kernel)
    if not plan["tiled"]:
        terms_x = _hsic_terms(gram(Xs, kernel, threshold, medians_x), estimator)
        terms_y = _hsic_terms(gram(Ys, kernel, threshold, medians_y), estimator)
        return _normalise(_hsic_cross(terms_x, terms_y, estimator, n), _hsic_self(terms_x, estimator, n),
                          _hsic_self(terms_y, estimator, n))
    if plan["swap"]:  # HSIC is symmetric in its two Grams
        return _gram_tiles(Ys, Xs, kernel, estimator, threshold, plan["held"], medians_y, medians_x).T
    return _gram_tiles(Xs, Ys, kernel, estimator, threshold, plan["held"], medians_x, medians_y)


def _gram_tiles(Xs, Ys, kernel: str, estimator: str, threshold: float, block: int, medians_x: dict,
                medians_y: dict) -> torch.Tensor:
    (L1, n, _), L2 = Xs.shape, Ys.shape[0]
    options = {"dtype": torch.float64, "device": Xs.device}
    cross, self_x, self_y = torch.empty(L1, L2, **options), torch.empty(L1, **options), torch.empty(L2, **options)
    for start in range(0, L1, block):
        held = range(start, min(L1, start + block))
        terms_x = _hsic_terms(_grams(Xs, held, kernel, threshold, medians_x), estimator)
        # one layer at a time: its squares are the scratch
        self_x[start:held.stop] = torch.cat([_hsic_self(tuple(t[i:i + 1] for t in terms_x), estimator, n)
                                             for i in range(len(held))])
        for j in range(L2):
            terms_y = _hsic_terms(_grams(Ys, [j], kernel, threshold, medians_y), estimator)
            if start == 0:
                self_y[j] = _hsic_self(terms_y, estimator, n)[0]
            cross[start:held.stop, j] = _hsic_cross(terms_x, terms_y, estimator, n)[:, 0]
            del terms_y
        del terms_x
    return _normalise(cross, self_x, self_y)


def one_side_fits(x_shape, y_shape) -> bool:
    """One side's (L, n, n) float64 Grams fit in GRAM_BYTES_LIMIT (the value's Gram form, without tiling)."""
    return max(x_shape[0], y_shape[0]) * x_shape[1] ** 2 * 8 <= GRAM_BYTES_LIMIT


def grams_fit(x_shape, y_shape) -> bool:
    """Both sides' (L, n, n) float64 centred Grams fit in half the working-memory budget (reprsim.metrics.memory;
    the other half for the permuted and masked blocks): then CKA's value, null and interval come from them
    (reprsim.metrics.prepared), else every draw recomputes the measure."""
    return (x_shape[0] + y_shape[0]) * x_shape[1] ** 2 * 8 <= working_bytes() // 2


# ---------------------------------------------------------------- one model's Gram terms, and a pair's
# What CKA's value, permutation null and half-sample replicates need of one model's layers depends on that
# model's rows alone: its centred Grams Kc = HKH, their diagonals and squared norms, and per half-sample r of
# rows idx_r the restricted Gram K_r = Kc[idx_r][:, idx_r]'s row sums and squared norm (a "side",
# reprsim.metrics.prepared). HSIC of any two Grams is then a function of a few inner products:
#
#   with cross = <K, L>, u = K1, v = L1, t = 1ᵀK1, a = diag K (and b, s for L), over m rows:
#   biased   HSIC₀ = <HKH, HLH> = cross − (2/m) uᵀv + t_K t_L / m²
#   unbiased HSIC₁ = [cross − aᵀb + (t_K − Σa)(t_L − Σb)/((m−1)(m−2)) − 2/(m−2)·(u − a)ᵀ(v − b)] / (m(m−3))
#
# (HSIC₁ of K̃ = K − diag(a), written out.) Both are unchanged by K -> K + f1ᵀ + 1fᵀ + c11ᵀ (Song et al. 2012),
# and restricting Kc to rows differs from restricting K by such a term, so the centred Grams serve every
# subsample; on all rows of a centred Gram u = 0 and t = 0. Permuting Y's rows permutes L, b and nothing else.


def hsic_from_inner(estimator: str, m: int, cross, uv, ub, av, ab, t_x, t_y, sa_x, sa_y):
    """HSIC (biased without its 1/(m−1)², which cancels in CKA; or unbiased) from the inner products above."""
    if estimator == "biased":
        return cross - (2.0 / m) * uv + t_x * t_y / m**2
    return (cross - ab + (t_x - sa_x) * (t_y - sa_y) / ((m - 1) * (m - 2))
            - 2.0 / (m - 2) * (uv - ub - av + ab)) / (m * (m - 3))


def centred_grams(Zs: torch.Tensor, kernel: str = "linear", threshold: float = 1.0) -> torch.Tensor:
    """(L, n, n) centred Gram matrices HKH of the layers (L, n, d): Zc Zcᵀ for the linear kernel (the same
    matrix, without n² centring passes), the RBF Gram centred in place otherwise (its bandwidth from all rows)."""
    if kernel == "rbf":
        return _centre_gram_(gram(Zs, "rbf", threshold))
    Zc = centre(Zs)
    L, n, _ = Zs.shape
    out = torch.empty(L, n, n, dtype=Zs.dtype, device=Zs.device)
    for layer in range(L):
        torch.matmul(Zc[layer], Zc[layer].T, out=out[layer])
    return out


def indicator(indices: torch.Tensor, n: int) -> torch.Tensor:
    """(n, R) float64 0/1 matrix: column r marks the rows of half-sample r (indices (R, m))."""
    marks = torch.zeros(indices.shape[0], n, dtype=torch.float64, device=indices.device)
    return marks.scatter_(1, indices, 1.0).T.contiguous()


def gram_side(kc: torch.Tensor, indices: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """One model's Gram terms from its centred Grams kc (L, n, n): diag (L, n) and sq (L,) = ‖Kc‖²_F, and for
    the half-samples `indices` (R, m): rep_rows (R, L, m), the row sums of Kc[idx_r][:, idx_r], and rep_sq (R, L),
    its squared Frobenius norm. Each is a product with the half-samples' indicator (O(L n² R))."""
    L, n, _ = kc.shape
    terms = {"diag": kc.diagonal(dim1=-2, dim2=-1).clone(),
             "sq": torch.stack([torch.linalg.vector_norm(k) ** 2 for k in kc])}
    if indices is None:
        return terms
    marks = indicator(indices, n)
    R, m = indices.shape
    rows = torch.empty(R, L, m, dtype=kc.dtype, device=kc.device)
    squares = torch.empty(R, L, dtype=kc.dtype, device=kc.device)
    for layer in range(L):
        rows[:, layer] = (kc[layer] @ marks).T.gather(1, indices)
        squares[:, layer] = ((kc[layer] * kc[layer]) @ marks).T.gather(1, indices).sum(dim=1)
    return {**terms, "rep_rows": rows, "rep_sq": squares}


def _self_hsic(side: dict, estimator: str, n: int) -> torch.Tensor:
    """HSIC(K, K) of every layer on all rows (L,)."""
    a = side["diag"]
    aa, sa = (a * a).sum(dim=-1), a.sum(dim=-1)
    zero = torch.zeros_like(aa)
    return hsic_from_inner(estimator, n, side["sq"], zero, zero, zero, aa, zero, zero, sa, sa)


def _restricted(side: dict, indices: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per half-sample and layer (R, L, m): row sums u_r and diagonal a_r of the restricted Gram (a side may hold
    more half-samples than a measure asks for: the first R are the same draws)."""
    return side["rep_rows"][:len(indices)], side["diag"][:, indices].transpose(0, 1)


def _self_hsic_replicates(side: dict, indices: torch.Tensor, estimator: str) -> torch.Tensor:
    """HSIC(K_r, K_r) of every half-sample and layer (R, L)."""
    m = indices.shape[1]
    u, a = _restricted(side, indices)
    t, sa = u.sum(dim=-1), a.sum(dim=-1)
    ua = (u * a).sum(dim=-1)
    return hsic_from_inner(estimator, m, side["rep_sq"][:len(indices)], (u * u).sum(dim=-1), ua, ua,
                           (a * a).sum(dim=-1), t, t, sa, sa)


def _permutation_block(count: int, grams: int, n: int) -> int:
    """Permutations gathered at once: their permuted Grams within a quarter of the working budget (at most 256 MiB)."""
    return max(1, min(count, int(min(working_bytes() // 4, 1 << 28) // (grams * n * n * 8))))


CHUNK = 1 << 15  # columns of a flattened Gram per product: both operands' rows stay in cache while it runs


def flat_inner(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """a (A, N) @ b (B, N)ᵀ for long rows N (flattened Grams), a block of columns at a time: a plain product of
    this shape reads its operands at a fraction of the memory's rate (BLAS blocks for square shapes)."""
    out = torch.zeros(a.shape[0], b.shape[0], dtype=a.dtype, device=a.device) if out is None else out.zero_()
    if a.device.type != "cpu":
        return out.addmm_(a, b.T)
    for start in range(0, a.shape[1], CHUNK):
        out.addmm_(a[:, start:start + CHUNK], b[:, start:start + CHUNK].T)
    return out


PERMUTE_ROWS = 64  # rows of a Gram permuted at once on a CPU: their scratch stays in the core's cache


def permuted_inner(kc_x: torch.Tensor, kc_y: torch.Tensor, permutations: list[torch.Tensor]) -> torch.Tensor:
    """<Kc_x[l], P Kc_y[l'] Pᵀ> for every permutation (Y's rows permuted by p) and layer pair: (P, L1, L2).

    The side with fewer layers is gathered (Y's by p, or X's by p⁻¹: the same sums) and multiplied with the other
    side's Grams. On a CPU both are symmetric, so only the upper triangle is gathered and multiplied, the other side
    weighted 2 off the diagonal, 1 on it: a block of rows at a time (rows a..b, columns a..n), every permutation
    of the block into one buffer, one product per block (see :func:`_upper_permuted_inner`)."""
    swap = kc_x.shape[0] < kc_y.shape[0]
    fixed, moved = (kc_y, kc_x) if swap else (kc_x, kc_y)
    if swap:
        permutations = [torch.argsort(p) for p in permutations]
    if fixed.device.type == "cpu":
        draws = _upper_permuted_inner(fixed, moved, permutations)
    else:
        n = fixed.shape[-1]
        flat = fixed.reshape(len(fixed), n * n)
        block = _permutation_block(len(permutations), len(moved), n)
        draws = torch.empty(len(permutations), len(fixed), len(moved), dtype=moved.dtype, device=moved.device)
        for start in range(0, len(permutations), block):
            chosen = permutations[start:start + block]
            gathered = torch.stack([moved[:, p][:, :, p] for p in chosen]).reshape(len(chosen) * len(moved), n * n)
            draws[start:start + len(chosen)] = (flat @ gathered.T).reshape(len(fixed), len(chosen),
                                                                           len(moved)).permute(1, 0, 2)
    return draws.transpose(1, 2) if swap else draws


def _upper_permuted_inner(fixed: torch.Tensor, moved: torch.Tensor, permutations: list[torch.Tensor]) -> torch.Tensor:
    """permuted_inner on a CPU, over upper triangles. For the rows a..b of a block, each permutation's Grams are
    gathered for columns a..n only (rows p[a:b] into a scratch that stays in cache, then their columns p[a:]; numpy's
    take, several times torch's indexing here) into one buffer of every permutation, and multiplied with the fixed
    side's block, weighted 2 above the diagonal, 1 on it, 0 below. Buffers are allocated once, so no page is
    touched for the first time per draw."""
    (Lf, n, _), Lm, P = fixed.shape, len(moved), len(permutations)
    source, positions = moved.numpy(), [p.numpy() for p in permutations]
    columns = np.arange(n)
    per = max(1, min(P, int(min(working_bytes() // 4, 1 << 28) // (Lm * PERMUTE_ROWS * n * 8))))
    pool = np.empty(per * Lm * PERMUTE_ROWS * n)
    weighted = np.empty(Lf * PERMUTE_ROWS * n)
    scratch = np.empty((PERMUTE_ROWS, n))
    draws = torch.zeros(P * Lm, Lf, dtype=fixed.dtype)
    for a in range(0, n, PERMUTE_ROWS):
        b = min(n, a + PERMUTE_ROWS)
        rows, width = b - a, n - a
        weights = np.where(columns[None, a:] > columns[a:b, None], 2.0, (columns[None, a:] == columns[a:b, None]) * 1.0)
        block = weighted[:Lf * rows * width].reshape(Lf, rows, width)
        np.multiply(fixed.numpy()[:, a:b, a:], weights, out=block)
        block = torch.from_numpy(block.reshape(Lf, -1))
        buffer = pool[:per * Lm * rows * width].reshape(per, Lm, rows, width)
        for start in range(0, P, per):
            chosen = positions[start:start + per]
            for d, p in enumerate(chosen):  # mode "clip": a permutation is in range, no bounds check per element
                for layer in range(Lm):
                    np.take(source[layer], p[a:b], axis=0, out=scratch[:rows], mode="clip")
                    np.take(scratch[:rows], p[a:], axis=1, out=buffer[d, layer], mode="clip")
            gathered = torch.from_numpy(buffer[:len(chosen)].reshape(len(chosen) * Lm, -1))
            draws[start * Lm:(start + len(chosen)) * Lm].addmm_(gathered, block.T)
    return draws.reshape(P, Lm, Lf).transpose(1, 2)


def restricted_inner(kc_x: torch.Tensor, kc_y: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """<Kc_x[l][idx_r][:, idx_r], Kc_y[l'][idx_r][:, idx_r]> for every half-sample r and layer pair: (R, L1, L2),
    as s_rᵀ (Kc_x[l] ∘ Kc_y[l']) s_r with s_r the half-sample's indicator: one product per layer pair, taken as
    Sᵀ Eᵀ (the half-samples as rows: several times faster than E S in float64 for this shape)."""
    (L1, n, _), L2, R = kc_x.shape, kc_y.shape[0], indices.shape[0]
    marks = indicator(indices, n)
    rows = marks.T.contiguous()  # (R, n)
    out = torch.empty(R, L1, L2, dtype=kc_x.dtype, device=kc_x.device)
    per_block = max(1, min(L2, int(min(working_bytes() // 4, 1 << 28) // (2 * n * n * 8))))
    product = torch.empty(per_block, n, n, dtype=kc_x.dtype, device=kc_x.device)
    summed = torch.empty(R, per_block * n, dtype=kc_x.dtype, device=kc_x.device)
    for i in range(L1):
        for start in range(0, L2, per_block):
            ys = kc_y[start:start + per_block]
            block = len(ys)
            torch.mul(kc_x[i], ys, out=product[:block])
            # row r, column (l', j): Σ_k s_r[k] E[l', j, k] = (E s_r)_j, E being symmetric
            torch.mm(rows, product[:block].reshape(block * n, n).T, out=summed[:, :block * n])
            out[:, i, start:start + block] = (summed[:, :block * n].reshape(R, block, n) * rows[:, None, :]).sum(dim=-1)
    return out


def gram_statistics(side_x: dict, side_y: dict, estimators, n: int, permutations=None, indices=None,
                    cache: dict | None = None) -> dict:
    """CKA of every layer pair from two sides (:func:`gram_side`, each with its centred Grams "kc"), for each
    estimator: "value" (L1, L2), "null" (P, L1, L2) with Y's rows permuted by each of `permutations`, and
    "replicates" (R, L1, L2) on each half-sample of `indices` (the sides' rep terms rest on the same ones).

    The inner products are shared by the estimators (and kept in `cache`, so that a second CKA label of the pair
    job with as many or fewer draws costs nothing more)."""
    cache = {} if cache is None else cache
    kc_x, kc_y = side_x["kc"], side_y["kc"]
    if "value" not in cache:
        cache["value"] = (flat_inner(kc_x.reshape(len(kc_x), -1), kc_y.reshape(len(kc_y), -1)),
                          side_x["diag"] @ side_y["diag"].T)
    sa_x, sa_y = side_x["diag"].sum(dim=-1)[:, None], side_y["diag"].sum(dim=-1)[None, :]
    out = {}
    for estimator in estimators:
        self_x, self_y = _self_hsic(side_x, estimator, n), _self_hsic(side_y, estimator, n)
        cross, ab = cache["value"]
        zero = torch.zeros_like(cross)
        out[estimator] = {"value": _normalise(hsic_from_inner(estimator, n, cross, zero, zero, zero, ab, zero, zero,
                                                              sa_x, sa_y), self_x, self_y)}
        if permutations is not None:
            count = len(permutations)
            if cache.get("null") is None or cache["null"][0].shape[0] < count:
                cache["null"] = (permuted_inner(kc_x, kc_y, permutations),
                                 torch.stack([side_x["diag"] @ side_y["diag"][:, p].T for p in permutations]))
            cross, ab = (term[:count] for term in cache["null"])
            zero = torch.zeros_like(cross)
            out[estimator]["null"] = _normalise(hsic_from_inner(estimator, n, cross, zero, zero, zero, ab, zero, zero,
                                                                sa_x, sa_y), self_x, self_y)
        if indices is not None:
            R, m = indices.shape
            if cache.get("replicates") is None or cache["replicates"][0].shape[0] < R:
                u, a = _restricted(side_x, indices)
                v, b = _restricted(side_y, indices)
                products = [torch.einsum("rim,rjm->rij", left, right)
                            for left, right in ((u, v), (u, b), (a, v), (a, b))]
                cache["replicates"] = (restricted_inner(kc_x, kc_y, indices), *products)
            terms = [term[:R] for term in cache["replicates"]]
            u, a = _restricted(side_x, indices)
            v, b = _restricted(side_y, indices)
            value = hsic_from_inner(estimator, m, *terms, u.sum(dim=-1)[..., :, None], v.sum(dim=-1)[..., None, :],
                                    a.sum(dim=-1)[..., :, None], b.sum(dim=-1)[..., None, :])
            out[estimator]["replicates"] = torch.stack([
                _normalise(value[r], sx, sy) for r, (sx, sy) in
                enumerate(zip(_self_hsic_replicates(side_x, indices, estimator),
                              _self_hsic_replicates(side_y, indices, estimator)))])
    return out


def gram_null_draws(Xs, Ys, permutations: list[torch.Tensor], kernel: str = "linear", estimator: str = "biased",
                    threshold: float = 1.0) -> torch.Tensor:
    """CKA of every layer pair with Y's rows permuted, for each permutation: (P, L1, L2).

    Permuting Y's rows permutes its centred Gram matrices (K -> K[p][:, p], the RBF median included)
    and their diagonals, so the Grams are built once and a draw is one gather and one product, O(L n²).
    """
    n = Xs.shape[1]
    check(kernel, estimator, n)
    side_x, side_y = ({"kc": kc, **gram_side(kc, None)} for kc in (centred_grams(Xs, kernel, threshold),
                                                                   centred_grams(Ys, kernel, threshold)))
    return gram_statistics(side_x, side_y, [estimator], n, permutations=permutations)[estimator]["null"]


def gram_subsample_draws(Xs, Ys, rows: list[torch.Tensor], kernel: str = "linear", estimator: str = "biased",
                         threshold: float = 1.0) -> torch.Tensor:
    """CKA of every layer pair on each subset of rows in `rows` (equal sizes): (R, L1, L2).

    Each centred Gram is built once on all rows; a subset's CKA is that of the Grams restricted to its rows
    (centred again, by the estimator); the RBF bandwidth stays the one set on all rows, part of the kernel.
    """
    indices = torch.stack(list(rows))
    check(kernel, estimator, indices.shape[1])
    side_x, side_y = ({"kc": kc, **gram_side(kc, indices)} for kc in (centred_grams(Xs, kernel, threshold),
                                                                      centred_grams(Ys, kernel, threshold)))
    return gram_statistics(side_x, side_y, [estimator], Xs.shape[1], indices=indices)[estimator]["replicates"]


def cka_layers(
    Xs, Ys, kernel: str = "linear", estimator: str = "biased", threshold: float = 1.0,
    medians: tuple[dict, dict] | None = None,
) -> tuple[torch.Tensor, dict]:
    """CKA for every layer pair: Xs (L1, n, d1), Ys (L2, n, d2) -> ((L1, L2) tensor, meta). `medians` (RBF only:
    X's and Y's median squared distance per layer, :func:`rbf_medians`) keeps a bandwidth set on other rows."""
    Xs = layers(Xs, name="Xs")
    Ys = layers(Ys, Xs.device, name="Ys")
    n = Xs.shape[1]
    if Ys.shape[1] != n:
        raise ValueError(f"X and Y must have the same rows (inputs); got n={n} and n={Ys.shape[1]}")
    check(kernel, estimator, n)
    feature = kernel == "linear" and _feature_form_is_cheaper(Xs.shape, Ys.shape)
    if feature:
        values = _feature_space_linear(centre(Xs), centre(Ys), estimator)
    else:
        values = _gram_form(Xs, Ys, kernel, estimator, threshold, medians)
    meta = {"kernel": kernel, "estimator": estimator, "form": "feature" if feature else "gram"}
    if kernel == "rbf":
        meta.update(threshold=threshold, sigma="threshold * sqrt(median squared distance over pairs i < j)")
    if torch.isnan(values).any():
        meta["nan_reason"] = ("a layer with zero self-similarity (constant representation)"
                              + (" or a non-positive unbiased self-HSIC" if estimator == "unbiased" else ""))
    return values, meta


def minibatch_cka_layers(Xs, Ys, batch_size: int, kernel: str = "linear", threshold: float = 1.0
                         ) -> tuple[torch.Tensor, dict]:
    """Nguyen et al. (2021): Σ_b HSIC₁(K_b, L_b) / sqrt(Σ_b HSIC₁(K_b, K_b) · Σ_b HSIC₁(L_b, L_b)).

    Rows are split in order into k = n // batch_size batches of equal size; the
    remainder is dropped and reported.
    """
    Xs = layers(Xs, name="Xs")
    Ys = layers(Ys, Xs.device, name="Ys")
    n = Xs.shape[1]
    if Ys.shape[1] != n:
        raise ValueError(f"X and Y must have the same rows (inputs); got n={n} and n={Ys.shape[1]}")
    check(kernel, "unbiased", batch_size)
    batches = n // batch_size
    if batches < 1:
        raise ValueError(f"batch_size {batch_size} is larger than n={n}")
    accumulator = MinibatchHSIC(kernel, threshold)
    for b in range(batches):
        rows = slice(b * batch_size, (b + 1) * batch_size)
        accumulator.add(Xs[:, rows], Ys[:, rows])
    meta = {"kernel": kernel, "estimator": "unbiased-minibatch", "batch_size": batch_size,
            "n_batches": batches, "dropped_rows": n - batches * batch_size}
    return accumulator.cka(), meta


class MinibatchHSIC:
    """Running sums of HSIC₁ over equal-size batches (Nguyen et al. 2021), for all layer pairs.

    Feed batches with `add` (each (L, m, d) for both sides, the same m every time) and
    read `cka()`; memory is that of one batch, so token-level data can stream from disk.

    With `keep_batches`, every batch's own HSIC₁ terms are kept too ((La, Lb) cross and (La,), (Lb,)
    self terms each, in float64 on the CPU), so that the CKA of any subset of the batches (a half-sample
    of them, for an interval) is a sum away: `cka(batches)`, `kept()`. `terms` and `pair_hsic` pair one
    batch's Grams with another batch of the other side (a shifted pairing, for a chance level) without
    building either Gram twice.
    """

    def __init__(self, kernel: str = "linear", threshold: float = 1.0, keep_batches: bool = False):
        self.kernel, self.threshold = kernel, threshold
        self.cross = self.self_x = self.self_y = 0
        self.batch_size: int | None = None
        self.batches = 0
        self.keep_batches = keep_batches
        self._kept: dict[str, list[torch.Tensor]] = {"cross": [], "self_x": [], "self_y": []}

    def _size(self, m: int) -> None:
        if self.batch_size is None:
            check(self.kernel, "unbiased", m)
            self.batch_size = m

    def terms(self, Zs, device=None, name: str = "Xs") -> tuple[torch.Tensor, ...]:
        """The HSIC₁ terms of one side's batch (L, m, d): what `add_terms` and `pair_hsic` take."""
        Zs = layers(Zs, device, name=name)
        self._size(Zs.shape[1])
        if Zs.shape[1] != self.batch_size:
            raise ValueError(f"minibatch CKA needs equal batches of {self.batch_size} rows; got {Zs.shape[1]}")
        return _hsic_terms(gram(Zs, self.kernel, self.threshold), "unbiased")

    def pair_hsic(self, terms_x: tuple, terms_y: tuple) -> torch.Tensor:
        """HSIC₁ of every layer pair (La, Lb) of two batches, from their `terms`."""
        return _hsic_cross(terms_x, terms_y, "unbiased", self.batch_size)

    def add(self, Xs, Ys) -> None:
        Xs = layers(Xs, name="Xs")
        Ys = layers(Ys, Xs.device, name="Ys")
        m = Xs.shape[1]
        self._size(m)
        if m != self.batch_size or Ys.shape[1] != m:
            raise ValueError(f"minibatch CKA needs equal batches of {self.batch_size} rows; got {m} and {Ys.shape[1]}")
        self.add_terms(self.terms(Xs), self.terms(Ys, name="Ys"))

    def add_terms(self, terms_x: tuple, terms_y: tuple) -> None:
        """Add one batch given both sides' `terms`."""
        if self.batch_size is None:
            raise ValueError("terms come from MinibatchHSIC.terms, which fixes the batch size")
        cross = self.pair_hsic(terms_x, terms_y)
        self_x = _hsic_self(terms_x, "unbiased", self.batch_size)
        self_y = _hsic_self(terms_y, "unbiased", self.batch_size)
        self.cross, self.self_x, self.self_y = self.cross + cross, self.self_x + self_x, self.self_y + self_y
        if self.keep_batches:
            for key, value in (("cross", cross), ("self_x", self_x), ("self_y", self_y)):
                self._kept[key].append(value.detach().to("cpu", torch.float64))
        self.batches += 1

    def kept(self) -> dict[str, torch.Tensor]:
        """Every batch's terms, stacked: cross (batches, La, Lb), self_x (batches, La), self_y (batches, Lb)."""
        if not self.keep_batches:
            raise ValueError("per-batch terms were not kept; make the accumulator with keep_batches=True")
        if not self.batches:
            raise ValueError("no batches were added")
        return {key: torch.stack(values) for key, values in self._kept.items()}

    def cka(self, batches=None) -> torch.Tensor:
        """CKA over every batch added, or over the batches whose positions (in the order added) are `batches`
        (needs keep_batches; a position listed twice counts twice)."""
        if not self.batches:
            raise ValueError("no batches were added")
        if batches is None:
            return _normalise(self.cross, self.self_x, self.self_y)
        kept = self.kept()
        index = torch.as_tensor(np.asarray(batches, dtype=np.int64))
        return _normalise(*(kept[key][index].sum(dim=0) for key in ("cross", "self_x", "self_y")))


def cka(X, Y, kernel: str = "linear", estimator: str = "biased", threshold: float = 1.0) -> float:
    """CKA of X (n, d1) and Y (n, d2)."""
    X, Y = pair(X, Y)
    return float(cka_layers(X[None], Y[None], kernel, estimator, threshold)[0][0, 0])


# numpy in, numpy out: the pairwise workflow jobs' entry points
def linear_cka_layers(Xs, Ys) -> np.ndarray:
    """Biased linear CKA for every layer pair (numpy (L1, n, d1), (L2, n, d2) -> (L1, L2))."""
    return cka_layers(Xs, Ys)[0].cpu().numpy()


def linear_cka(X, Y) -> float:
    """Biased linear CKA of X (n, d1) and Y (n, d2)."""
    return cka(X, Y)
