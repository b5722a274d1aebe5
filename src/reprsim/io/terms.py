"""Per-model terms stores (rule model_terms, reprsim.stages.compare.terms): named numpy arrays and attributes
in a zarr group, written atomically like every output, each chunk with its CRC32C and each array's sha256
recorded (`reprsim verify` checks them as it checks activation stores), read back through the same checked
reader (reprsim.io.store.open_store)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import zarr

from reprsim.io.integrity import CorruptOutputError
from reprsim.io.outputs import atomic_directory
from reprsim.io.store import ACTIVATION_ARRAY, CHECKSUMS, array_checksums, array_names, open_store


CHUNK_BYTES = 64 << 20


def write_terms(path: str | Path, arrays: dict[str, np.ndarray], attrs: dict) -> None:
    """Write `arrays` (name -> array; names may contain "/") and `attrs` to the zarr group at `path`, atomically.
    An array is one chunk up to CHUNK_BYTES, else chunked along its first axis (layers, half-samples)."""
    with atomic_directory(path) as tmp:
        root = zarr.open_group(tmp, mode="w")
        for name, array in arrays.items():
            array = np.ascontiguousarray(array)
            rows = max(1, CHUNK_BYTES // max(1, array[:1].nbytes)) if array.ndim and len(array) else 1
            chunks = (min(rows, max(1, len(array))), *array.shape[1:]) if array.ndim else None
            root.create_array(name, data=array, chunks=chunks, **ACTIVATION_ARRAY)
        root.attrs.update({**attrs, CHECKSUMS: array_checksums(tmp)})


def read_terms(path: str | Path) -> tuple[dict[str, np.ndarray], dict]:
    """Every array of the terms store at `path` and its attributes; a damaged chunk or a missing file is a
    CorruptOutputError naming the file and how to remake it."""
    store = open_store(path)
    attrs = dict(store.attrs)
    if CHECKSUMS not in attrs:
        raise CorruptOutputError(Path(path), "not a terms store (no recorded checksums)")
    return {name: np.asarray(store[name][...]) for name in array_names(store)}, attrs
