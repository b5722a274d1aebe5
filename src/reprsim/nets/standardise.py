"""Per-feature standardisation, one rule for every user: z-score each feature with statistics of
the training rows; a constant feature is only centred (scale 1), never divided by zero."""

from __future__ import annotations

import numpy as np
import torch


class Standardiser:
    """Fit on train rows `Z` (a numpy array or a torch tensor, rows first), then applied to any rows.

    `ddof` sets the standard deviation's divisor n − ddof: the aligners use 1/n (ddof 0), the
    classifier heads on frozen features torch's default 1/(n − 1) (ddof 1).
    """

    def __init__(self, Z, ddof: int = 0):
        if isinstance(Z, torch.Tensor):
            self.mean, std = Z.mean(dim=0), Z.std(dim=0, correction=ddof)
            self.std = torch.where(std > 0, std, torch.ones_like(std))
        else:
            self.mean, std = Z.mean(axis=0), Z.std(axis=0, ddof=ddof)
            self.std = np.where(std > 0, std, 1.0)

    def forward(self, Z):
        return (Z - self.mean) / self.std

    def inverse(self, Z):
        return Z * self.std + self.mean


class Standardise(torch.nn.Module):
    """A :class:`Standardiser` as the first layer of a torch model: fixed buffers, not trained."""

    def __init__(self, features: torch.Tensor, ddof: int = 1):
        super().__init__()
        stats = Standardiser(features, ddof=ddof)
        self.register_buffer("mean", stats.mean)
        self.register_buffer("scale", stats.std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.scale
