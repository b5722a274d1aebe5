"""Orthogonal Procrustes angular distance (Williams et al. 2021).

Centre, scale each side to unit Frobenius norm, d = arccos(||Xcᵀ Yc||_*). When d1 ≠ d2
the narrower side is zero-padded, which leaves the nuclear norm unchanged, so it is
computed directly. 0 for X vs XQ with Q orthogonal; symmetric; at most π/2.
"""

from __future__ import annotations

import math

import torch

from reprsim.metrics._inputs import centre, pair


def procrustes(X, Y) -> tuple[float, dict]:
    X, Y = pair(X, Y)
    Xc, Yc = centre(X), centre(Y)
    norms = torch.linalg.matrix_norm(Xc), torch.linalg.matrix_norm(Yc)
    if norms[0] == 0 or norms[1] == 0:
        raise ValueError("a representation is constant; the Procrustes distance is undefined")
    nuclear = torch.linalg.matrix_norm((Xc / norms[0]).T @ (Yc / norms[1]), ord="nuc")
    return math.acos(min(1.0, float(nuclear))), {"zero_padded": X.shape[1] != Y.shape[1]}
