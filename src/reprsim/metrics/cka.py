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


def _check(kernel: str, estimator: str, n: int) -> None:
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


def gram(Xs: torch.Tensor, kernel: str = "linear", threshold: float = 1.0) -> torch.Tensor:
    """Gram matrices of (L, n, d) activations: (L, n, n)."""
    return _grams(Xs, range(Xs.shape[0]), kernel, threshold, {})


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
    return feature < gram or not grams_fit(x_shape, y_shape)


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


def _gram_form(Xs: torch.Tensor, Ys: torch.Tensor, kernel: str, estimator: str, threshold: float) -> torch.Tensor:
    """CKA of every layer pair from Gram matrices, within the working-memory budget (reprsim.metrics.memory).

    Both sides' Grams at once when they fit (L1 + L2 of them, plus scratch); otherwise tiled (gram_plan):
    the Grams of a block of layers of one side are held while the other side's are built one layer at a
    time, once per block (an RBF median is computed once per layer and reused). Every pair's HSIC terms
    are the same either way; the side held is the one that needs fewer Gram builds."""
    (L1, n, _), L2 = Xs.shape, Ys.shape[0]
    plan = gram_plan(L1, L2, n, kernel)
    if not plan["tiled"]:
        terms_x = _hsic_terms(gram(Xs, kernel, threshold), estimator)
        terms_y = _hsic_terms(gram(Ys, kernel, threshold), estimator)
        return _normalise(_hsic_cross(terms_x, terms_y, estimator, n), _hsic_self(terms_x, estimator, n),
                          _hsic_self(terms_y, estimator, n))
    if plan["swap"]:  # HSIC is symmetric in its two Grams
        return _gram_tiles(Ys, Xs, kernel, estimator, threshold, plan["held"]).T
    return _gram_tiles(Xs, Ys, kernel, estimator, threshold, plan["held"])


def _gram_tiles(Xs, Ys, kernel: str, estimator: str, threshold: float, block: int) -> torch.Tensor:
    (L1, n, _), L2 = Xs.shape, Ys.shape[0]
    medians_x, medians_y = {}, {}
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


def grams_fit(x_shape, y_shape) -> bool:
    """One side's (L, n, n) float64 Grams fit in GRAM_BYTES_LIMIT (then nulls and replicates reuse them)."""
    return max(x_shape[0], y_shape[0]) * x_shape[1] ** 2 * 8 <= GRAM_BYTES_LIMIT


def gram_null_draws(Xs, Ys, permutations: list[torch.Tensor], kernel: str = "linear", estimator: str = "biased",
                    threshold: float = 1.0) -> torch.Tensor:
    """CKA of every layer pair with Y's rows permuted, for each permutation: (P, L1, L2).

    Permuting Y's rows permutes its Gram matrices (K -> K[p][:, p], the RBF median included)
    and every HSIC term built from them (centred Gram, zeroed-diagonal Gram, row sums), so the
    terms are built once and a draw is one gather and one product, O(L n²).
    """
    n = Xs.shape[1]
    _check(kernel, estimator, n)
    terms_x = _hsic_terms(gram(Xs, kernel, threshold), estimator)
    self_x = _hsic_self(terms_x, estimator, n)
    terms_y = _hsic_terms(gram(Ys, kernel, threshold), estimator)
    self_y = _hsic_self(terms_y, estimator, n)  # invariant under permutation
    square_y = terms_y[0].reshape(-1, n, n)
    draws = []
    for p in permutations:
        flat = square_y[:, p[:, None], p[None, :]].reshape(len(square_y), -1)  # one gather, not two
        permuted = (flat,) if estimator == "biased" else (flat, terms_y[1], terms_y[2][:, p])
        draws.append(_normalise(_hsic_cross(terms_x, permuted, estimator, n), self_x, self_y))
    return torch.stack(draws)


def gram_subsample_draws(Xs, Ys, rows: list[torch.Tensor], kernel: str = "linear", estimator: str = "biased",
                         threshold: float = 1.0) -> torch.Tensor:
    """CKA of every layer pair on each subset of rows in `rows`: (R, L1, L2).

    Each Gram is built once on all rows and restricted to a subset (then centred again, by
    the estimator); the RBF bandwidth stays the one set on all rows, part of the kernel.
    """
    grams_x, grams_y = gram(Xs, kernel, threshold), gram(Ys, kernel, threshold)
    draws = []
    for idx in rows:
        m = len(idx)
        _check(kernel, estimator, m)
        terms_x = _hsic_terms(grams_x[:, idx][:, :, idx], estimator)
        terms_y = _hsic_terms(grams_y[:, idx][:, :, idx], estimator)
        draws.append(_normalise(_hsic_cross(terms_x, terms_y, estimator, m), _hsic_self(terms_x, estimator, m),
                                _hsic_self(terms_y, estimator, m)))
    return torch.stack(draws)


def cka_layers(
    Xs, Ys, kernel: str = "linear", estimator: str = "biased", threshold: float = 1.0
) -> tuple[torch.Tensor, dict]:
    """CKA for every layer pair: Xs (L1, n, d1), Ys (L2, n, d2) -> ((L1, L2) tensor, meta)."""
    Xs = layers(Xs, name="Xs")
    Ys = layers(Ys, Xs.device, name="Ys")
    n = Xs.shape[1]
    if Ys.shape[1] != n:
        raise ValueError(f"X and Y must have the same rows (inputs); got n={n} and n={Ys.shape[1]}")
    _check(kernel, estimator, n)
    feature = kernel == "linear" and _feature_form_is_cheaper(Xs.shape, Ys.shape)
    if feature:
        values = _feature_space_linear(centre(Xs), centre(Ys), estimator)
    else:
        values = _gram_form(Xs, Ys, kernel, estimator, threshold)
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
    _check(kernel, "unbiased", batch_size)
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
            _check(self.kernel, "unbiased", m)
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
