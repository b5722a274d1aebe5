"""Reading activation stores written by the extract stage (:mod:`reprsim.stages.extract.activations`) (zarr and numpy only, no torch)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import zarr


def open_store(path: str | Path) -> zarr.Group:
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"activation store {path} does not exist; run the extraction rule")
    with warnings.catch_warnings():
        # Snakemake marks directory outputs with a .snakemake_timestamp file zarr does not know
        warnings.filterwarnings("ignore", message=".*snakemake_timestamp.*")
        return zarr.open_group(path, mode="r")


def pooled_rows(store: zarr.Group, pooling: str, split: str | None = None) -> np.ndarray:
    """Pooled activations (layers, rows, d), optionally only the rows of one split."""
    if f"pooled/{pooling}" not in store:
        raise KeyError(f"store has no pooled/{pooling}; it holds {store.attrs['poolings']}")
    values = store[f"pooled/{pooling}"]
    if split is None:
        return values[:]
    names = store.attrs["split_names"]
    if split not in names:
        raise KeyError(f"store has no rows of split {split!r}; extracted splits: {names}")
    codes = store["examples/split"][:]
    rows = np.flatnonzero(codes == names.index(split))
    return values[:, rows[0]:rows[-1] + 1]  # splits are stored contiguously


CONSTANT = 1e-5  # relative spread below float32 rounding of stored activations


def constant_layers(rep: np.ndarray) -> np.ndarray:
    """Boolean mask over the layers of `rep` (layers, rows, d) whose rows are one vector up to
    rounding: ||X − mean||_F ≤ CONSTANT · ||X||_F.

    BERT-style models' first token at the embedding layer is such a layer (same token, same
    position for every example): similarity to it is undefined (docs/numerics.md: a degenerate input
    gives NaN with a reason), not rounding noise dressed up as a number.
    """
    def constant(layer: np.ndarray) -> bool:
        # one layer at a time: a float64 copy of the whole stack would double a pair job's memory
        layer = np.asarray(layer, dtype=np.float64)
        return np.linalg.norm(layer - layer.mean(axis=0)) <= CONSTANT * np.linalg.norm(layer)

    return np.array([constant(layer) for layer in rep], dtype=bool)
