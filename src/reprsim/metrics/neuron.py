"""Neuron-level measures of Wu et al. (2020): neuronsim and mixedsim, X→Y (asymmetric).

The *_layers forms do each layer's work (z-scoring, Y's basis) once and compare
all layer pairs with one matrix product per X layer.

Units constant up to rounding (reprsim.metrics._inputs.constant_units) are left out where a measure divides
by their spread: neuronsim on both sides, mixedsim on X's (Y enters through its basis, whose rank cut drops a
direction without spread, as CCA's). `constant` passes the masks decided on all rows to the null's and the
interval's draws; the meta counts the units left out ("excluded_units", per pair "units_note").
"""

from __future__ import annotations

import torch

from reprsim.metrics._inputs import centre, excluded_meta, kept_units
from reprsim.metrics.cca import prepare


def _zscore(Z: torch.Tensor, excluded: torch.Tensor) -> torch.Tensor:
    """Neurons (columns) z-scored with the 1/n normaliser, (..., n, d); the `excluded` ones (..., d) all zeros."""
    Zc = centre(Z)
    std = Zc.pow(2).mean(dim=-2, keepdim=True).sqrt()
    return Zc / std.masked_fill(excluded.unsqueeze(-2), torch.inf)


def neuronsim_layers(Xs: torch.Tensor, Ys: torch.Tensor, constant: tuple | None = None) -> tuple[torch.Tensor, dict]:
    """Mean over X's neurons of the largest |Pearson r| with any neuron of Y, for all layer pairs."""
    values, meta = neuronsim_both_layers(Xs, Ys, constant)
    return values[0], {**meta, "direction": "x->y"}


def neuronsim_both_layers(Xs: torch.Tensor, Ys: torch.Tensor, constant: tuple | None = None
                          ) -> tuple[torch.Tensor, dict]:
    """neuronsim(X→Y) and neuronsim(Y→X)ᵀ, (2, L1, L2), from one correlation matrix per layer pair:
    the largest |r| over Y's neurons for each of X's, and over X's for each of Y's. Constant neurons are left
    out of both the maximum and the mean (their z-scores are zeros; the means divide by the kept counts)."""
    excluded_x = kept_units(Xs, None if constant is None else constant[0], "X", "neuronsim")
    excluded_y = kept_units(Ys, None if constant is None else constant[1], "Y", "neuronsim")
    Zx, Zy = _zscore(Xs, excluded_x), _zscore(Ys, excluded_y)
    L2, n, d2 = Zy.shape
    kept_x, kept_y = (~excluded_x).sum(dim=-1), (~excluded_y).sum(dim=-1)
    Y_all = Zy.permute(1, 0, 2).reshape(n, L2 * d2)
    forward, backward = [], []
    for Zx_layer, count in zip(Zx, kept_x.tolist()):
        correlations = (Zx_layer.T @ Y_all / n).abs().reshape(-1, L2, d2)  # (d1, L2, d2)
        # an excluded neuron's correlations are 0: no maximum changes, only the means' counts
        nearest = correlations.amax(dim=2)
        forward.append(nearest.mean(dim=0) if count == len(nearest) else nearest.sum(dim=0) / count)
        nearest = correlations.amax(dim=0)
        backward.append(torch.where(kept_y == d2, nearest.mean(dim=1), nearest.sum(dim=1) / kept_y))
    return (torch.stack([torch.stack(forward), torch.stack(backward)]),
            {"directions": ["x->y", "y->x"], **excluded_meta(excluded_x, excluded_y)})


def mixedsim_layers(Xs: torch.Tensor, Ys: torch.Tensor, pca_dims: int | None = None, constant: tuple | None = None
                    ) -> tuple[torch.Tensor, dict]:
    """Mean over X's neurons of ||P_Y x|| / ||x|| (least-squares fit from Y's centred neurons), all layer pairs.

    In-sample; when n ≤ d_y Y must be reduced by PCA first (pca_dims), as for CCA. X's constant neurons are left
    out of the mean; Y's need no exclusion (its basis has a rank cut).
    """
    excluded = kept_units(Xs, None if constant is None else constant[0], "X", "mixedsim")
    Xc = centre(Xs)
    norms = torch.linalg.vector_norm(Xc, dim=-2)
    bases = [prepare(Y, pca_dims) for Y in Ys]
    values = torch.stack([
        torch.stack([(torch.linalg.vector_norm(b["basis"].T @ X, dim=0) / norm).mean() for b in bases])
        if not out.any() else
        torch.stack([(torch.linalg.vector_norm(b["basis"].T @ X[:, ~out], dim=0) / norm[~out]).mean() for b in bases])
        for X, norm, out in zip(Xc, norms, excluded)
    ])
    return values, {"direction": "x->y", "k_y": [b["dims"] for b in bases], "pca_y": [b["pca"] for b in bases],
                    **excluded_meta(excluded, torch.zeros(Ys.shape[0], Ys.shape[-1], dtype=torch.bool,
                                                          device=Ys.device))}
