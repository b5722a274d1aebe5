"""Neuron-level measures of Wu et al. (2020): neuronsim and mixedsim, X→Y (asymmetric)."""

from __future__ import annotations

import torch

from reprsim.metrics._inputs import centre, pair
from reprsim.metrics.cca import prepare


def _zscore(Z: torch.Tensor, name: str) -> torch.Tensor:
    Zc = centre(Z)
    std = Zc.pow(2).mean(dim=0).sqrt()
    if (std == 0).any():
        raise ValueError(f"{name} has {(std == 0).sum().item()} constant neuron(s); their correlation is undefined")
    return Zc / std


def neuronsim(X, Y) -> tuple[float, dict]:
    """Mean over X's neurons of the largest |Pearson r| with any neuron of Y."""
    X, Y = pair(X, Y)
    correlations = _zscore(X, "X").T @ _zscore(Y, "Y") / X.shape[0]
    return float(correlations.abs().max(dim=1).values.mean()), {"direction": "x->y"}


def mixedsim(X, Y, pca_dims: int | None = None) -> tuple[float, dict]:
    """Mean over X's neurons of ||P_Y x|| / ||x||, P_Y the least-squares projection on Y's centred neurons.

    In-sample; when n ≤ d_y Y is reduced by PCA first (as for CCA) and the meta says so.
    """
    X, Y = pair(X, Y)
    Xc = centre(X)
    norms = torch.linalg.vector_norm(Xc, dim=0)
    if (norms == 0).any():
        raise ValueError(f"X has {(norms == 0).sum().item()} constant neuron(s); mixedsim is undefined for them")
    py = prepare(Y, pca_dims)
    predicted = py["basis"] @ (py["basis"].T @ Xc)
    ratios = torch.linalg.vector_norm(predicted, dim=0) / norms
    return float(ratios.mean()), {"direction": "x->y", "k_y": py["dims"], "pca_y": py["pca"]}
