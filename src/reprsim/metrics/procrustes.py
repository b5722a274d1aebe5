"""Orthogonal Procrustes angular distance (Williams et al. 2021).

Centre, scale each side to unit Frobenius norm, d = arccos(||Xcᵀ Yc||_*). When d1 ≠ d2
the narrower side is zero-padded, which leaves the nuclear norm unchanged, so it is
computed directly. 0 for X vs XQ with Q orthogonal; symmetric; at most π/2.
"""

from __future__ import annotations

import torch

from reprsim.metrics._inputs import centre


def _unit(Zs: torch.Tensor) -> torch.Tensor:
    Zc = centre(Zs)
    norms = torch.linalg.matrix_norm(Zc, keepdim=True)
    if (norms == 0).any():
        raise ValueError("a representation is constant; the Procrustes distance is undefined")
    return Zc / norms


def procrustes_layers(Xs: torch.Tensor, Ys: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """Procrustes distance for all layer pairs; each layer centred and normalised once."""
    Xn, Yn = _unit(Xs), _unit(Ys)
    nuclear = torch.stack([torch.linalg.matrix_norm(X.T @ Yn, ord="nuc") for X in Xn])
    return torch.arccos(nuclear.clamp(max=1.0)), {"zero_padded": Xs.shape[-1] != Ys.shape[-1]}
