"""Statistics-based distances: |s(X) − s(Y)| for a statistic s of each point cloud (rows), so the row
correspondence is not used (a row-permutation null of them is constant). Each layer's statistic is
computed once; the (L1, L2) differences by broadcasting. Symmetric; 0 on identical inputs.

- ReSi's magnitude_nrmse and concentricity_nrmse are not ported: as written they always return 0.5.
- ReSi computes uniformity on raw rows over all n² pairs (i = j included); reprsim on L2-normalised rows over
  distinct pairs, as Wang & Isola (2020) define it, because on raw hidden states with large norms every
  off-diagonal term underflows and u ≈ −log n for any representation (a difference ≈ 0 for any pair).
"""

from __future__ import annotations

import math

import torch

from reprsim.metrics._inputs import layers


def _differences(Xs, Ys, statistic) -> torch.Tensor:
    """(L1, L2) |statistic(X layer) − statistic(Y layer)|, each layer's statistic computed once."""
    Xs = layers(Xs, name="Xs")
    Ys = layers(Ys, Xs.device, name="Ys")
    return (statistic(Xs, "X")[:, None] - statistic(Ys, "Y")[None, :]).abs()


def _unit_rows(Zs: torch.Tensor, measure: str, side: str) -> torch.Tensor:
    norms = torch.linalg.vector_norm(Zs, dim=-1, keepdim=True)
    if (norms == 0).any():
        layer, row = (norms[..., 0] == 0).nonzero()[0].tolist()
        raise ValueError(f"{measure}: {side} layer {layer} row {row} is all zeros; its direction is undefined")
    return Zs / norms


def magnitude_difference_layers(Xs: torch.Tensor, Ys: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """|‖r̄_X‖ − ‖r̄_Y‖|, r̄ the mean row (the norm of the mean vector, as ReSi; the alternative reading,
    the mean of the row norms, "average vector length", is not what ReSi computes). Raw units."""
    values = _differences(Xs, Ys, lambda Zs, side: torch.linalg.vector_norm(Zs.mean(dim=-2), dim=-1))
    return values, {"magnitude": "norm of the mean row"}


def _concentricity(Zs: torch.Tensor, side: str) -> torch.Tensor:
    """(L,) mean over rows of cos(r_i, r̄), uncentred (centred, r̄ would be 0)."""
    mean = Zs.mean(dim=-2)
    mean_norm = torch.linalg.vector_norm(mean, dim=-1)
    if (mean_norm == 0).any():
        layer = int((mean_norm == 0).nonzero()[0])
        raise ValueError(f"concentricity: {side} layer {layer} has a zero mean row; the cosine to it is undefined")
    unit = _unit_rows(Zs, "concentricity", side)
    return (unit @ (mean / mean_norm[:, None])[..., None])[..., 0].mean(dim=-1)


def concentricity_difference_layers(Xs: torch.Tensor, Ys: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """|c(X) − c(Y)|, c = mean over rows of the cosine of each row to the mean row (conicity). In [0, 2)."""
    return _differences(Xs, Ys, _concentricity), {"centred": False}


def uniformity_difference_layers(Xs: torch.Tensor, Ys: torch.Tensor, t: float = 2.0) -> tuple[torch.Tensor, dict]:
    """|u(X) − u(Y)|, u = log mean_{i<j} exp(−t ‖r̂_i − r̂_j‖²) over distinct pairs of L2-normalised rows
    (Wang & Isola 2020), by logsumexp. u ∈ [−2t·n/(n − 1), 0]; ‖r̂_i − r̂_j‖² = 2 − 2 cos, one n×n cosine
    matrix per layer, one layer at a time."""
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf:
        raise ValueError(f"uniformity: t must be a finite number > 0; got t={t!r}")

    def uniformity(Zs: torch.Tensor, side: str) -> torch.Tensor:
        n = Zs.shape[1]
        if n < 2:
            raise ValueError(f"uniformity needs at least 2 rows (pairs); got n={n}")
        unit = _unit_rows(Zs, "uniformity", side)
        found = []
        for layer in unit:
            exponent = (layer @ layer.T).clamp_(max=1.0).mul_(2 * t)  # −t‖r̂_i − r̂_j‖² = 2t·cos − 2t
            exponent.fill_diagonal_(-math.inf)
            found.append(torch.logsumexp(exponent.flatten(), dim=0) - 2 * t - math.log(n * (n - 1)))
        return torch.stack(found)

    return _differences(Xs, Ys, uniformity), {"t": float(t), "rows": "L2-normalised", "pairs": "distinct"}
