"""CCA, SVCCA (Raghu et al. 2017) and PWCCA (Morcos et al. 2018), following docs/numerics.md.

Inputs are centred. When n ≤ d on a side, CCA of the raw spaces is trivially 1, so
each side must be reduced by PCA to its top min(n − 1, d, pca_dims) components: with
n ≤ d the caller has to name `pca_dims` (below n − 1), otherwise it is an error. Any
reduction is recorded in the meta (pca_x, pca_y, k_x, k_y). Orthonormal bases come from an SVD with a rank cut at relative
singular value 1e-10; canonical correlations are the singular values of Qxᵀ Qy.
"""

from __future__ import annotations

import torch

from reprsim.metrics import sample_size
from reprsim.metrics._inputs import centre

RANK_CUTOFF = 1e-10
DIRECTIONS = ("x", "y", "min")


def orthonormal_basis(Zc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """U, S, Vᵀ of centred Zc restricted to singular values above the relative cut-off."""
    U, S, Vt = torch.linalg.svd(Zc, full_matrices=False)
    keep = S > RANK_CUTOFF * S[0] if S.numel() and S[0] > 0 else torch.zeros_like(S, dtype=torch.bool)
    if not keep.any():
        raise ValueError("a representation is constant (rank 0); CCA is undefined")
    return U[:, keep], S[keep], Vt[keep]


def prepare(Z: torch.Tensor, pca_dims: int | None = None, variance: float | None = None) -> dict:
    """Centre Z, reduce it when needed (n ≤ d, SVCCA's variance threshold) and return its basis."""
    n, d = Z.shape
    if n <= d and variance is None and not (pca_dims and pca_dims < n - 1):
        raise ValueError(
            f"n={n} ≤ d={d}: CCA of the raw spaces is trivially 1; pass pca_dims < n − 1 "
            "to compare the top principal directions instead"
        )
    Zc = centre(Z)
    U, S, _ = orthonormal_basis(Zc)
    reduced_to = None
    limit = min(n - 1, d, pca_dims) if pca_dims else min(n - 1, d)
    if n <= d or (pca_dims and pca_dims < U.shape[1]):
        reduced_to = min(limit, U.shape[1])  # top principal directions: U is sorted by singular value
    if variance is not None:
        energy = torch.cumsum(S**2, 0) / torch.sum(S**2)
        k = int(torch.searchsorted(energy, torch.tensor(variance, dtype=energy.dtype, device=energy.device)).item()) + 1
        reduced_to = min(k, reduced_to or k)
    rank = U.shape[1]
    if reduced_to is not None:
        U = U[:, :reduced_to]
    return with_projection({"centred": Zc, "basis": U, "dims": int(U.shape[1]), "pca": U.shape[1] < rank})


def with_projection(prepared: dict) -> dict:
    """Adds Qᵀ Z (k × d): the neurons in the basis, which PWCCA's weights need. A row
    permutation of the centred data and its basis leaves it unchanged, so nulls reuse it."""
    return {**prepared, "projection": prepared["basis"].T @ prepared["centred"]}


def canonical(px: dict, py: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Canonical correlations ρ (descending) and the rotations A, B with Qxᵀ Qy = A diag(ρ) Bᵀ."""
    A, rho, Bt = torch.linalg.svd(px["basis"].T @ py["basis"], full_matrices=False)
    return rho.clamp(0.0, 1.0), A, Bt.T


def pwcca_weights(prepared: dict, rotation: torch.Tensor) -> torch.Tensor:
    """α_i = Σ_j |<h_i, z_j>| with h_i = Q a_i the orthonormal canonical variates and z_j the centred
    neurons: hᵢᵀ z_j = a_iᵀ (Qᵀ z_j), from the prepared projection."""
    return (rotation.T @ prepared["projection"]).abs().sum(dim=1)


def cca_from(px: dict, py: dict) -> tuple[float, dict]:
    rho = torch.linalg.svdvals(px["basis"].T @ py["basis"]).clamp(0.0, 1.0)  # no rotations needed
    return float(rho.mean()), {"mean_rho_squared": float((rho**2).mean()), "rho": rho.tolist()}


def pwcca_from(px: dict, py: dict, direction: str) -> tuple[float, dict]:
    (value, _), meta = pwcca_both_from(px, py, direction)
    return value, meta


def pwcca_sides(direction: str, d_x: int, d_y: int) -> tuple[str, str]:
    """Whose neurons weigh PWCCA(X→Y) and PWCCA(Y→X), as sides ("x", "y") of one X, Y computation.

    "min": the narrower side's in both directions; on a tie each direction weighs by its own X.
    """
    if direction == "x":
        return "x", "y"
    if direction == "y":
        return "y", "x"
    if d_x == d_y:
        return "x", "y"
    return ("x", "x") if d_x < d_y else ("y", "y")


def pwcca_both_from(px: dict, py: dict, direction: str) -> tuple[tuple[float, float], dict]:
    """PWCCA(X→Y) and PWCCA(Y→X) from one CCA (the correlations are shared; only the weights differ)."""
    rho, A, B = canonical(px, py)
    values = {}
    for side, prepared, rotation in (("x", px, A), ("y", py, B)):
        alpha = pwcca_weights(prepared, rotation[:, : rho.numel()])
        values[side] = float((alpha * rho).sum() / alpha.sum())
    forward, backward = pwcca_sides(direction, px["centred"].shape[1], py["centred"].shape[1])
    return (values[forward], values[backward]), {"weights_from": forward, "pwcca_x": values["x"],
                                                 "pwcca_y": values["y"], "rho": rho.tolist()}


def is_number(value) -> bool:
    """An int or float, not a bool (True is an int to Python, never a threshold to a user)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_pca_dims(pca_dims) -> None:
    if pca_dims is not None and (not isinstance(pca_dims, int) or isinstance(pca_dims, bool) or pca_dims < 1):
        raise ValueError(f"pca_dims must be a positive integer or None; got {pca_dims!r}")


def check_threshold(threshold) -> None:
    """SVCCA's variance threshold: a number in (0, 1]."""
    if not (is_number(threshold) and 0 < threshold <= 1):
        raise ValueError(f"svcca threshold must be a number in (0, 1]; got {threshold!r}")


def check_params(kind: str, params: dict) -> None:
    """Values the CCA family accepts, checked before any decomposition."""
    if kind == "svcca":
        check_threshold(params.get("threshold", 0.99))
    if kind == "pwcca" and params.get("direction", "min") not in DIRECTIONS:
        raise ValueError(f"pwcca direction must be one of {DIRECTIONS}; got {params.get('direction')!r}")
    check_pca_dims(params.get("pca_dims"))


def cca_prepared(kind: str, Xs: torch.Tensor, Ys: torch.Tensor, params: dict) -> tuple[list, list]:
    """Each layer of both sides centred, reduced (pca_dims, SVCCA's variance cut) and given a basis."""
    check_params(kind, params)
    variance = params.get("threshold", 0.99) if kind == "svcca" else None
    pca_dims = params.get("pca_dims")
    return ([prepare(X, pca_dims, variance) for X in Xs],
            [prepare(Y, pca_dims, variance) for Y in Ys])


def cca_pair(kind: str, a: dict, b: dict, params: dict, n: int) -> tuple[tuple[float, ...], dict]:
    """One CCA-family layer pair from two prepared sides: (value,) or, for PWCCA, (X→Y, Y→X) from
    one decomposition; NaN with the reason when k_x + k_y > n − 1."""
    k = a["dims"] + b["dims"]
    meta = {"k_x": a["dims"], "k_y": b["dims"], "pca_x": a["pca"], "pca_y": b["pca"], "k": k}
    if k > n - 1:
        meta["undefined"] = (f"k_x + k_y = {a['dims']} + {b['dims']} = {k} > n − 1 = {n - 1}: at least "
                             f"{k - (n - 1)} canonical correlation(s) are 1 whatever the data; set pca_dims "
                             f"≤ {(n - 1) // 2} to compare the top principal directions")
        return (float("nan"),) * (2 if kind == "pwcca" else 1), meta
    if message := sample_size.warning(n, k, "canonical correlations are inflated by chance at this sample size"):
        meta["warning"] = message
    if kind == "pwcca":
        values, extra = pwcca_both_from(a, b, params.get("direction", "min"))
    else:
        value, extra = cca_from(a, b)
        values = (value,)
    return values, {**{key: v for key, v in extra.items() if key != "rho"}, **meta}
