"""Sample size, said aloud: n against the dimensions a measure compares (docs/numerics.md, rows needed).

Estimates of the CCA family, biased CKA, mixedsim and the aligners are biased upward when rows
are few relative to the dimensions compared. Each row records n and k; below n/k = 5 it carries
a `warning`. For the CCA family, when n − 1 < k_x + k_y (dimensions compared after any PCA) at
least k_x + k_y − (n − 1) canonical correlations are 1 whatever the data and PWCCA's weights
are not unique: the value is undefined (NaN, with the reason), unless `pca_dims` brings k under
(reprsim.metrics.cca.cca_pair). Torch-free, so the config check shares these constants.
"""

from __future__ import annotations

CCA_FAMILY = ("cca", "svcca", "pwcca")
RATIO = 5  # n / k below this: a warning on the row


def warning(n: int, k: int, what: str = "the estimate is inflated by chance at this sample size") -> str | None:
    if n >= RATIO * k:
        return None
    return f"n/k = {n}/{k} = {n / k:.2f} < {RATIO}: {what}; read it against null_mean"


def compared_dimensions(name: str, params: dict, d_x: int, d_y: int, meta: dict) -> int | None:
    """k for the measures whose bias grows with d/n outside the CCA family (per-pair there), else None.

    Biased CKA (linear or RBF): max(d_x, d_y); mixedsim: the largest k_y (Y after any PCA).
    """
    if name == "cka" and params.get("estimator", "biased") == "biased":
        return max(d_x, d_y)
    if name == "mixedsim":
        return max(meta["k_y"])
    return None
