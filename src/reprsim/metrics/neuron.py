"""Neuron-level measures of Wu et al. (2020): neuronsim and mixedsim, X→Y (asymmetric).

The *_layers forms do each layer's work (z-scoring, Y's basis) once and compare
all layer pairs with one matrix product per X layer.
"""

from __future__ import annotations

import torch

from reprsim.metrics._inputs import centre
from reprsim.metrics.cca import prepare


def _zscore(Z: torch.Tensor, name: str) -> torch.Tensor:
    """Neurons (columns) z-scored with the 1/n normaliser; (..., n, d)."""
    Zc = centre(Z)
    std = Zc.pow(2).mean(dim=-2, keepdim=True).sqrt()
    if (std == 0).any():
        raise ValueError(f"{name} has {int((std == 0).sum())} constant neuron(s); their correlation is undefined")
    return Zc / std


def neuronsim_layers(Xs: torch.Tensor, Ys: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """Mean over X's neurons of the largest |Pearson r| with any neuron of Y, for all layer pairs."""
    values, meta = neuronsim_both_layers(Xs, Ys)
    return values[0], {**meta, "direction": "x->y"}


def neuronsim_both_layers(Xs: torch.Tensor, Ys: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """neuronsim(X→Y) and neuronsim(Y→X)ᵀ, (2, L1, L2), from one correlation matrix per layer pair:
    the largest |r| over Y's neurons for each of X's, and over X's for each of Y's."""
    Zx, Zy = _zscore(Xs, "X"), _zscore(Ys, "Y")
    L2, n, d2 = Zy.shape
    Y_all = Zy.permute(1, 0, 2).reshape(n, L2 * d2)
    forward, backward = [], []
    for Zx_layer in Zx:
        correlations = (Zx_layer.T @ Y_all / n).abs().reshape(-1, L2, d2)  # (d1, L2, d2)
        forward.append(correlations.amax(dim=2).mean(dim=0))
        backward.append(correlations.amax(dim=0).mean(dim=1))
    return torch.stack([torch.stack(forward), torch.stack(backward)]), {"directions": ["x->y", "y->x"]}


def mixedsim_layers(Xs: torch.Tensor, Ys: torch.Tensor, pca_dims: int | None = None) -> tuple[torch.Tensor, dict]:
    """Mean over X's neurons of ||P_Y x|| / ||x|| (least-squares fit from Y's centred neurons), all layer pairs.

    In-sample; when n ≤ d_y Y must be reduced by PCA first (pca_dims), as for CCA.
    """
    Xc = centre(Xs)
    norms = torch.linalg.vector_norm(Xc, dim=-2)
    if (norms == 0).any():
        raise ValueError(f"X has {int((norms == 0).sum())} constant neuron(s); mixedsim is undefined for them")
    bases = [prepare(Y, pca_dims) for Y in Ys]
    values = torch.stack([
        torch.stack([(torch.linalg.vector_norm(b["basis"].T @ X, dim=0) / norm).mean() for b in bases])
        for X, norm in zip(Xc, norms)
    ])
    return values, {"direction": "x->y", "k_y": [b["dims"] for b in bases], "pca_y": [b["pca"] for b in bases]}
