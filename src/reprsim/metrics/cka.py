"""Centered Kernel Alignment (Kornblith et al. 2019), every estimator in docs/numerics.md, batched over layers.

CKA(K, L) = HSIC(K, L) / sqrt(HSIC(K, K) · HSIC(L, L)) for Gram matrices K of X and L of Y.

- kernel="linear": K = X Xᵀ. kernel="rbf": K_ij = exp(−||x_i − x_j||² / (2σ²)) with
  σ = threshold · sqrt(median of the squared distances over distinct pairs i < j).
- estimator="biased": HSIC₀ = <HKH, HLH>_F (centring by subtracting row, column and grand
  means, never by multiplying with H). For the linear kernel and n > max(d1, d2) the
  feature-space form ||Xcᵀ Yc||_F² / (||Xcᵀ Xc||_F ||Ycᵀ Yc||_F) is used; the two agree.
- estimator="unbiased": Song et al.'s U-statistic HSIC₁ on Grams with zeroed diagonals;
  needs n ≥ 4; may be negative and is reported as is.
- minibatch_cka: Nguyen et al. (2021), HSIC₁ summed over equal-size row batches.

All accumulation is in float64 on the inputs' device. A degenerate layer (zero
self-similarity) gives NaN, never a number biased by an epsilon.
"""

from __future__ import annotations

import numpy as np
import torch

from reprsim.metrics._inputs import centre, layers, pair

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
    """Median as numpy defines it (mean of the two middle values for an even count)."""
    ordered = values.sort().values
    k = ordered.numel()
    return ordered[(k - 1) // 2] if k % 2 else (ordered[k // 2 - 1] + ordered[k // 2]) / 2


def gram(Xs: torch.Tensor, kernel: str = "linear", threshold: float = 1.0) -> torch.Tensor:
    """Gram matrices of (L, n, d) activations: (L, n, n)."""
    inner = Xs @ Xs.transpose(-1, -2)
    if kernel == "linear":
        return inner
    if threshold <= 0:
        raise ValueError(f"rbf threshold must be > 0; got {threshold}")
    norms = torch.diagonal(inner, dim1=-2, dim2=-1)
    squared = (norms[..., :, None] + norms[..., None, :] - 2 * inner).clamp_min(0)
    n = Xs.shape[-2]
    upper = torch.triu_indices(n, n, offset=1, device=Xs.device)
    grams = []
    for layer in squared:
        median = _median(layer[upper[0], upper[1]])
        if median == 0:
            raise ValueError("rbf kernel: the median squared distance is 0 (most rows identical); σ is undefined")
        grams.append(torch.exp(-layer / (2 * threshold**2 * median)))
    return torch.stack(grams)


def centre_gram(K: torch.Tensor) -> torch.Tensor:
    """HKH in O(n²): subtract row and column means, add the grand mean."""
    return K - K.mean(dim=-1, keepdim=True) - K.mean(dim=-2, keepdim=True) + K.mean(dim=(-2, -1), keepdim=True)


def _hsic_terms(Ks: torch.Tensor, estimator: str) -> tuple[torch.Tensor, ...]:
    """Per-layer pieces from which HSIC of any pair is one batched product."""
    if estimator == "biased":
        return (centre_gram(Ks).flatten(1),)
    K = Ks.clone()
    K.diagonal(dim1=-2, dim2=-1).zero_()
    rows = K.sum(dim=-1)
    return K.flatten(1), rows.sum(dim=-1), rows


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


def _feature_space_linear(Xc: torch.Tensor, Yc: torch.Tensor) -> torch.Tensor:
    """Biased linear CKA via d×d products: ||Xcᵀ Yc||_F² / (||Xcᵀ Xc||_F ||Ycᵀ Yc||_F), all layer pairs."""
    # squared, like HSIC(K, K) = ||Xcᵀ Xc||_F² in the Gram form
    self_x = torch.linalg.matrix_norm(Xc.transpose(-1, -2) @ Xc) ** 2
    self_y = torch.linalg.matrix_norm(Yc.transpose(-1, -2) @ Yc) ** 2
    L2, n, d2 = Yc.shape
    Y_all = Yc.permute(1, 0, 2).reshape(n, L2 * d2)  # every Y layer side by side: one GEMM per X layer
    cross = torch.stack([((X.T @ Y_all).reshape(-1, L2, d2) ** 2).sum(dim=(0, 2)) for X in Xc])
    return _normalise(cross, self_x, self_y)


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
    feature = kernel == "linear" and estimator == "biased" and _feature_form_is_cheaper(Xs.shape, Ys.shape)
    if feature:
        values = _feature_space_linear(centre(Xs), centre(Ys))
    else:
        terms_x = _hsic_terms(gram(Xs, kernel, threshold), estimator)
        terms_y = _hsic_terms(gram(Ys, kernel, threshold), estimator)
        values = _normalise(
            _hsic_cross(terms_x, terms_y, estimator, n),
            _hsic_self(terms_x, estimator, n),
            _hsic_self(terms_y, estimator, n),
        )
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
