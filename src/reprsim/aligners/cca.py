"""CCA-family maps of Ren et al. (2023, §3.3): CCA, SVCCA and PWCCA read as linear bijections.

CCA finds weights Wx, Wy whose canonical variates Hx = Xc·Wx and Hy = Yc·Wy have orthonormal
columns and pairwise correlations ρ₁ ≥ … ≥ ρ_c (docs/numerics.md, CCA family; the decomposition
is reprsim.metrics.cca's). Ren et al. (Eq. 6) map X onto Y by Wx·Wy⁻¹: take x's canonical
variates as if they were y's and undo Y's projection. Decisions, since the paper gives no
more than that equation:

- Wy⁻¹ is the least-squares map from Y's c canonical variates back to Yc, Wy⁺ = Hyᵀ·Yc:
  it is Wy⁻¹ when Wy is square and invertible, and when c < d_y it reconstructs Y's part in
  its canonical subspace. Predictions are always in Y's original space, so every aligner's
  error is δ on the same Y (the paper scores SVCCA in its reduced space instead).
- "on the reduced spaces": each side is first reduced to its principal directions, to the
  top min(n − 1, d, pca_dims) when n ≤ d (else CCA is trivially perfect), and for SVCCA to
  the fewest directions holding `threshold` of the variance (s², Raghu et al. 2017).
- c, the number of canonical pairs used ("which has to be pre-determined", Ren §3.3), is
  `components`; None keeps all min(k_x, k_y).
- PWCCA: the paper says only that it learns the CCA mapping and then takes the projection
  weighted average over the coefficients (§4.1). The map here is the CCA map with every
  canonical pair's coefficient replaced by that average, ρ̄ = Σ αᵢρᵢ / Σ αᵢ with
  αᵢ = Σⱼ |⟨hᵢ, xⱼ⟩| over X's centred neurons (Eq. 7–9, weights from the source side X):
  g(x) = μy + ρ̄·(x − μx)·Wx·Wy⁺. It equals the CCA map when ρ̄ = 1 and shrinks towards the
  mean of Y as the correlations drop (the least-squares map uses ρᵢ per pair instead).

Validation rows are accepted and not used: nothing is selected. Arithmetic is float64.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from reprsim.aligners.linear import relative_error
from reprsim.metrics._inputs import as_float64
from reprsim.metrics.cca import (
    canonical,
    check_pca_dims,
    check_threshold,
    decompose,
    prepare,
    pwcca_weights,
)

VARIANTS = ("cca", "svcca", "pwcca")


def _to_basis(prepared: dict) -> torch.Tensor:
    """d × k matrix T with Zc·T = Q (the side's orthonormal basis): V_k·S_k⁻¹, read off Zcᵀ·Q = V_k·S_k."""
    scaled = prepared["centred"].T @ prepared["basis"]
    return scaled / (scaled**2).sum(dim=0)


def _side(Z: torch.Tensor, pca_dims: int | None, variance: float | None, kept: dict) -> tuple[dict, torch.Tensor]:
    """Z prepared (reprsim.metrics.cca.prepare) and its :func:`_to_basis`, taken from `kept` when an earlier fit on
    the same rows made them: `kept` holds Z's decomposition, which every reduction (pca_dims, SVCCA's variance
    cut) selects from, and each reduction asked for."""
    key = (pca_dims, variance)
    if key not in kept:
        if "decomposed" not in kept:
            kept["decomposed"] = decompose(Z)
        prepared = prepare(Z, pca_dims, variance, kept["decomposed"])
        kept[key] = prepared, _to_basis(prepared)
    return kept[key]


class CanonicalMap:
    """g(x) = μy + coefficient·(x − μx)·Wx·Wy⁺ for `variant` in cca, svcca, pwcca (see module docstring).

    components=None: all canonical pairs; components=1: only the best correlated pair.
    threshold (SVCCA only): fraction of variance each side keeps, 1.0 keeps every direction.
    """

    def __init__(self, variant: str = "cca", components: int | None = None, pca_dims: int | None = None,
                 threshold: float = 0.99):
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}; got {variant!r}")
        if components is not None and (not isinstance(components, int) or isinstance(components, bool)
                                       or components < 1):
            raise ValueError(f"components must be a positive integer or None; got {components!r}")
        check_pca_dims(pca_dims)
        check_threshold(threshold)
        self.variant, self.components, self.pca_dims, self.threshold = variant, components, pca_dims, threshold
        self.meta: dict = {}

    def fit(self, X: np.ndarray, Y: np.ndarray, X_val: np.ndarray | None = None,
            Y_val: np.ndarray | None = None, shared: tuple[dict, dict] | None = None) -> CanonicalMap:
        """`shared`: one dict for X's rows and one for Y's, kept by the caller across the fits on the same rows
        (cca, svcca, pwcca, either direction): each side is decomposed once (see :func:`_side`)."""
        started = time.perf_counter()
        X, Y = as_float64(X, "cpu", "X"), as_float64(Y, "cpu", "Y")
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X and Y must have the same rows; got {X.shape[0]} and {Y.shape[0]}")
        variance = self.threshold if self.variant == "svcca" else None
        kept_x, kept_y = shared if shared is not None else ({}, {})
        (px, to_basis_x), (py, to_basis_y) = (_side(X, self.pca_dims, variance, kept_x),
                                              _side(Y, self.pca_dims, variance, kept_y))
        rho, A, B = canonical(px, py)
        c = min(self.components or rho.numel(), rho.numel())
        rho, A, B = rho[:c], A[:, :c], B[:, :c]
        coefficient = 1.0
        if self.variant == "pwcca":
            alpha = pwcca_weights(px, A)
            coefficient = float((alpha * rho).sum() / alpha.sum())
        self.x_mean, self.y_mean = X.mean(dim=0).numpy(), Y.mean(dim=0).numpy()
        # forward: coordinates in X's basis → canonical variates → Y's basis → Y; inverse retraces it
        self.weight_x = (to_basis_x @ A).numpy()
        self.weight_y = (to_basis_y @ B).numpy()
        self.reconstruct_x = (A.T @ px["basis"].T @ px["centred"]).numpy()
        self.reconstruct_y = (B.T @ py["basis"].T @ py["centred"]).numpy()
        self.coefficient, self.rho_ = coefficient, rho.numpy()
        self.meta = {"variant": self.variant, "dims_x": px["dims"], "dims_y": py["dims"], "pca_x": px["pca"],
                     "pca_y": py["pca"], "components": c, "mean_rho": float(rho.mean()),
                     "coefficient": coefficient, "seconds": time.perf_counter() - started}
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        if not self.meta:
            raise RuntimeError("call fit before transform")
        variates = (np.asarray(X, dtype=np.float64) - self.x_mean) @ self.weight_x
        return self.y_mean + self.coefficient * variates @ self.reconstruct_y

    def inverse(self, Y: np.ndarray) -> np.ndarray:
        """x from y along the same canonical pairs; the exact inverse when c = d_x = d_y."""
        if not self.meta:
            raise RuntimeError("call fit before inverse")
        variates = (np.asarray(Y, dtype=np.float64) - self.y_mean) @ self.weight_y
        return self.x_mean + variates @ self.reconstruct_x / self.coefficient

    def score(self, X: np.ndarray, Y: np.ndarray) -> float:
        """Relative Frobenius error of the map on (X, Y); lower is better."""
        return relative_error(Y, self.transform(X))
