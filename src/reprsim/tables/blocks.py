"""Block structure of a layer × layer similarity matrix (Phang et al. 2021, §3): two blocks of
consecutive layers, similar within and dissimilar across.

A library so that the finetune stage (layer views) and the findings stage (the two-block claim,
with its interval from replicates) compute it the same way.
"""

from __future__ import annotations

import warnings

import numpy as np


def block_structure(matrix: np.ndarray) -> dict[str, float | int]:
    """The split into two blocks of consecutive layers that best explains a symmetric layer×layer CKA matrix.

    For each split s (layers < s form the lower block, layers ≥ s the upper one), the contrast
    is the mean CKA over pairs of distinct layers within a block minus the mean over pairs
    across the blocks; the diagonal (always 1) is left out, and so are undefined (NaN) entries
    (layers whose rows are all one vector, reprsim.metrics._inputs.constant_layers). Returns the split with the largest contrast:
    {split, contrast, within, between}; split None and NaN values when no split has
    defined entries both within and across blocks.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    size = matrix.shape[0]
    if matrix.ndim != 2 or matrix.shape[1] != size or size < 3:
        raise ValueError(f"need a square layer x layer matrix with at least 3 layers; got shape {matrix.shape}")
    off_diagonal = ~np.eye(size, dtype=bool)
    best = None
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a block whose entries are all NaN
        for split in range(1, size):
            upper = np.arange(size) >= split
            same_block = (upper[:, None] == upper[None, :]) & off_diagonal
            across = upper[:, None] != upper[None, :]
            within, between = np.nanmean(matrix[same_block]), np.nanmean(matrix[across])
            if np.isnan(within - between):
                continue
            if best is None or within - between > best["contrast"]:
                best = {"split": split, "contrast": float(within - between), "within": float(within),
                        "between": float(between)}
    if best is None:  # too few defined layers: no split has entries both within and across
        best = {"split": None, "contrast": np.nan, "within": np.nan, "between": np.nan}
    return best
