"""Sample size, said aloud: n against the dimensions a measure compares (docs/numerics.md, rows needed).

Estimates of the CCA family, biased CKA, mixedsim and the aligners are biased upward when rows
are few relative to the dimensions compared. Each row records n and k; below n/k = 5 it carries
a `warning`. For the CCA family, when n − 1 < k_x + k_y (dimensions compared after any PCA) at
least k_x + k_y − (n − 1) canonical correlations are 1 whatever the data and PWCCA's weights
are not unique: the value is undefined (NaN, with the reason), unless `pca_dims` brings k under.
"""

from __future__ import annotations

import torch

from reprsim.metrics import cca as cca_family

CCA_FAMILY = ("cca", "svcca", "pwcca")
RATIO = 5  # n / k below this: a warning on the row


def warning(n: int, k: int, what: str = "the estimate is inflated by chance at this sample size") -> str | None:
    if n >= RATIO * k:
        return None
    return f"n/k = {n}/{k} = {n / k:.2f} < {RATIO}: {what}; read it against null_mean"


def cca_prepared(kind: str, Xs: torch.Tensor, Ys: torch.Tensor, params: dict) -> tuple[list, list]:
    """Each layer of both sides centred, reduced (pca_dims, SVCCA's variance cut) and given a basis."""
    cca_family.check_params(kind, params)
    variance = params.get("threshold", 0.99) if kind == "svcca" else None
    pca_dims = params.get("pca_dims")
    return ([cca_family.prepare(X, pca_dims, variance) for X in Xs],
            [cca_family.prepare(Y, pca_dims, variance) for Y in Ys])


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
    if message := warning(n, k, "canonical correlations are inflated by chance at this sample size"):
        meta["warning"] = message
    if kind == "pwcca":
        values, extra = cca_family.pwcca_both_from(a, b, params.get("direction", "min"))
    else:
        value, extra = cca_family.cca_from(a, b)
        values = (value,)
    return values, {**{key: v for key, v in extra.items() if key != "rho"}, **meta}


def compared_dimensions(name: str, params: dict, d_x: int, d_y: int, meta: dict) -> int | None:
    """k for the measures whose bias grows with d/n outside the CCA family (per-pair there), else None.

    Biased CKA (linear or RBF): max(d_x, d_y); mixedsim: the largest k_y (Y after any PCA).
    """
    if name == "cka" and params.get("estimator", "biased") == "biased":
        return max(d_x, d_y)
    if name == "mixedsim":
        return max(meta["k_y"])
    return None
