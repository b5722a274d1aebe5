"""Angular CKA distances (Williams et al. 2021; Brown et al. 2023): numpy only, usable without torch."""

from __future__ import annotations

import numpy as np


def arccos_distance(value: float) -> float:
    """Angular CKA distance arccos(CKA) (Williams et al. 2021): 0 for identical representations."""
    if not -1.0 - 1e-12 <= value <= 1.0 + 1e-12:
        raise ValueError(f"arccos distance needs CKA in [-1, 1]; got {value}")
    return float(np.arccos(np.clip(value, -1.0, 1.0)))


def model_distance(cka_per_layer) -> float:
    """Brown et al. (2023, eq. 2): sqrt(Σ_l arccos(CKA(X_l, Y_l))²) over aligned layers of equal-depth models."""
    return float(np.sqrt(sum(arccos_distance(float(v)) ** 2 for v in np.asarray(cka_per_layer).ravel())))
