"""The conditioners: each configured feature conditioning (reprsim.design.conditioning) applied to a layer's rows, on the
rows' device, before a measure (the pair engine's conditioned measures)."""

from __future__ import annotations

import torch


def row_quantiles(A: torch.Tensor, q: float) -> torch.Tensor:
    """The q-quantile of each row of A, interpolated linearly between order statistics (torch.quantile's
    default), by a sort: torch.quantile refuses inputs of more than 2^24 values, a layer of 16,384 rows × 1,024."""
    ordered = A.sort(dim=1).values
    position = q * (A.shape[1] - 1)
    low = int(position)
    high = min(low + 1, A.shape[1] - 1)
    return ordered[:, low] + (position - low) * (ordered[:, high] - ordered[:, low])


def condition_layer(Z: torch.Tensor, conditioning: dict) -> torch.Tensor:
    """One layer's rows (n, d) conditioned; a new tensor (the input is left as it is)."""
    method = conditioning["method"]
    if method == "none":
        return Z
    if method == "standardise":
        centred = Z - Z.mean(dim=0)
        std = centred.pow(2).mean(dim=0).sqrt()
        return centred / std.where(std > 0, 1.0)
    if method == "clip":
        threshold = row_quantiles(Z.abs(), float(conditioning["quantile"])).mean()
        return Z.clamp(-threshold, threshold)
    centred = Z - Z.mean(dim=0)
    k = min(int(conditioning["components"]), min(centred.shape))
    # the top right singular vectors of the centred rows are the top principal directions
    _, _, Vh = torch.linalg.svd(centred, full_matrices=False)
    top = Vh[:k].T
    return centred - (centred @ top) @ top.T


def condition_stack(stack: torch.Tensor, conditioning: dict) -> torch.Tensor:
    """Every layer of a stack (layers, n, d) conditioned alike; the stack itself when the method is none."""
    if conditioning["method"] == "none":
        return stack
    return torch.stack([condition_layer(layer, conditioning) for layer in stack])
