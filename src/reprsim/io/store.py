"""Activation stores written by the extract stage (:mod:`reprsim.stages.extract.activations`): how their
chunks are encoded, their checksums, and reading them (zarr and numpy only, no torch).

Integrity, from cheapest to dearest:

- every chunk ends in a CRC32C of its bytes (the `crc32c` codec), checked whenever it is decoded, so
  a damaged chunk fails the read that touches it (10-20 GB/s: about a tenth of a read's time);
- `attrs["checksums"]` records, per array, the sha256 of its files and their number; opening a store
  counts the files (a missing chunk would otherwise read as zeros);
- `verify_store` recomputes the sha256s (about 1.5 GB/s, as long as reading the whole store again):
  `reprsim verify` runs it, readers do not.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from reprsim.io.integrity import CorruptOutputError
from reprsim.io.provenance import hash_directory

# zarr's default compressor, then a CRC32C of the compressed bytes that every decode checks
COMPRESSORS = (ZstdCodec(level=0), Crc32cCodec())
# create_array settings of hidden-state arrays. zstd saves about a tenth of their bytes (MiniLM's: 782 -> 690 MB)
# for about 1.5 s of one core per GB, a fifth of a CPU forward pass's time (benchmarks/extract_rate.py), so they
# keep the CRC32C only; and every chunk is written (by default zarr first compares each chunk with the fill value,
# a pass over the data, to skip chunks of zeros, which hidden states never are)
ACTIVATION_ARRAY = {"compressors": (Crc32cCodec(),), "config": {"write_empty_chunks": True}}
CHECKSUMS = "checksums"  # the attrs key
# a damaged chunk or metadata file: a failed checksum or codec (ValueError, RuntimeError), an unreadable file
DAMAGED = (ValueError, RuntimeError, OSError)


@contextlib.contextmanager
def _ignoring_snakemake_marker():
    # Snakemake marks directory outputs with a .snakemake_timestamp file zarr does not know
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*snakemake_timestamp.*")
        yield


def array_names(group: zarr.Group | ActivationStore) -> list[str]:
    """Paths of every array in the group, at any depth (e.g. "pooled/mean")."""
    with _ignoring_snakemake_marker():
        return sorted(name for name, node in group.members(max_depth=None) if isinstance(node, zarr.Array))


def _file_count(directory: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(directory))


def array_checksums(path: str | Path) -> dict[str, dict[str, Any]]:
    """Per array of the store at `path`: the sha256 of its files (metadata and chunks) and their number."""
    path = Path(path)
    return {name: {"sha256": hash_directory(path / name, skip=()), "files": _file_count(path / name)}
            for name in array_names(zarr.open_group(path, mode="r"))}


class _CheckedArray:
    """A read-only zarr array whose reads fail with CorruptOutputError when a chunk does not decode."""

    def __init__(self, array: zarr.Array, store_path: Path, name: str):
        self._array, self._store_path, self._name = array, store_path, name

    def __getitem__(self, selection):
        return self._checked(self._array.__getitem__, selection)

    def decode_all(self) -> None:
        """Decode every chunk, one at a time (a token array need not fit in memory)."""
        for block in np.ndindex(*self._array.cdata_shape):
            self._checked(self._array.get_block_selection, block)

    def _checked(self, read, selection):
        try:
            return read(selection)
        except DAMAGED as error:
            raise CorruptOutputError(self._store_path / self._name,
                                     f"a chunk does not decode ({type(error).__name__}: {error})",
                                     self._store_path) from error

    def __len__(self) -> int:
        return len(self._array)

    def __getattr__(self, attribute: str):  # shape, dtype, chunks, ...
        return getattr(self._array, attribute)


class ActivationStore:
    """An opened store: a zarr group whose arrays read through `_CheckedArray` (attrs, `in`, arrays() as zarr's)."""

    def __init__(self, group: zarr.Group, path: Path):
        self._group, self.path = group, path

    def __getitem__(self, name: str):
        node = self._group[name]
        return _CheckedArray(node, self.path, name) if isinstance(node, zarr.Array) else node

    def __contains__(self, name: str) -> bool:
        return name in self._group

    def __getattr__(self, attribute: str):
        return getattr(self._group, attribute)


def open_store(path: str | Path) -> ActivationStore:
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"activation store {path} does not exist; run the extraction rule")
    with _ignoring_snakemake_marker():
        try:
            group = zarr.open_group(path, mode="r")
            recorded = dict(group.attrs.get(CHECKSUMS, {}))
        except DAMAGED as error:
            raise CorruptOutputError(path, f"not a readable zarr store ({type(error).__name__}: {error})") from error
    for name, record in recorded.items():
        found = _file_count(path / name)
        if found != record["files"]:
            raise CorruptOutputError(path / name, f"{found} files where the store recorded {record['files']} "
                                                  "(a chunk file is missing or extra)", path)
    return ActivationStore(group, path)


def verify_store(path: str | Path) -> list[CorruptOutputError]:
    """Every problem of the store at `path`: unreadable, missing files, or an array whose sha256 differs
    from the one recorded. A store without checksums (written before they were recorded) has every
    chunk decoded instead."""
    path = Path(path)
    try:
        store = open_store(path)
        recorded, present = dict(store.attrs.get(CHECKSUMS, {})), array_names(store)
        if not recorded:
            for name in present:
                store[name].decode_all()
            return []
    except CorruptOutputError as error:
        return [error]
    problems = []
    for name in sorted(set(recorded) | set(present)):
        if name not in recorded:
            problem = "an array the store's checksums do not list"
        elif name not in present:
            problem = "an array the store's checksums list is missing"
        elif hash_directory(path / name, skip=()) != recorded[name]["sha256"]:
            problem = "content differs from its recorded sha256 (a damaged chunk or metadata file)"
        else:
            continue
        problems.append(CorruptOutputError(path / name, problem, path))
    return problems


def pooled_rows(store: ActivationStore, pooling: str, split: str | None = None) -> np.ndarray:
    """Pooled activations (layers, rows, d), optionally only the rows of one split."""
    if f"pooled/{pooling}" not in store:
        raise KeyError(f"store has no pooled/{pooling}; it holds {store.attrs['poolings']}")
    values = store[f"pooled/{pooling}"]
    if split is None:
        return values[:]
    rows = split_examples(store, split)
    return values[:, rows[0]:rows[-1] + 1]  # splits are stored contiguously


def split_examples(store: ActivationStore, split: str) -> np.ndarray:
    """Indices of the examples of `split` in the store (stored contiguously, in dataset row order)."""
    names = store.attrs["split_names"]
    if split not in names:
        raise KeyError(f"{store.path} has no rows of split {split!r}; extracted splits: {names}")
    return np.flatnonzero(store["examples/split"][:] == names.index(split))


def word_rows(store: ActivationStore, examples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Word-level hidden states (layers, words, d) of `examples` (sorted indices, e.g. from
    split_examples), and the example each word belongs to; NaN rows are words no token reached."""
    if "words/hidden" not in store:
        raise KeyError(f"{store.path} has no word-level hidden states; extract with the split in "
                       "extraction.detail_splits (a fast tokenizer and a dataset prepared with words)")
    offsets = store["words/offsets"][:]
    counts = offsets[examples + 1] - offsets[examples]
    if len(examples) and not counts.any():
        raise KeyError(f"{store.path} has no word rows for these examples; add their split to extraction.detail_splits")
    first, last = int(offsets[examples[0]]), int(offsets[examples[-1] + 1])
    block = store["words/hidden"][:, first:last]  # one contiguous read, then the wanted words
    keep = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in examples]) - first
    return block[:, keep], np.repeat(examples, counts)


ATTENTION_ARRAYS = {"token": ("attention/offsets", "attention/maps"),
                    "word": ("attention/word_offsets", "attention/word_maps")}


def attention_maps(store: ActivationStore, layer: int, examples: np.ndarray, level: str = "word") -> list[np.ndarray]:
    """Attention maps (heads, t, t) of attention layer `layer` (1-based: the maps of block `layer`) for
    the example indices `examples`, in their order: float32 (float64 when stored so), at `level`
    "word" (attention/word_maps: the dataset's words, special tokens dropped, rows renormalised; NaN
    rows where a word got no token) or "token" (attention/maps). Reads one contiguous span of columns,
    the one covering the examples. An example outside the extracted splits owns no entries: (heads, 0, 0).
    """
    if level not in ATTENTION_ARRAYS:
        raise ValueError(f"attention level must be one of {sorted(ATTENTION_ARRAYS)}; got {level!r}")
    offsets_name, maps_name = ATTENTION_ARRAYS[level]
    missing = [name for name in (offsets_name, maps_name) if name not in store]
    if missing:
        raise KeyError(f"activation store {store.path} has no {' or '.join(missing)}: its attention maps were "
                       "not extracted; extract with extraction.attention: true (and the split in "
                       "extraction.detail_splits)")
    maps = store[maps_name]
    if not 1 <= layer <= maps.shape[0]:
        raise ValueError(f"attention layer {layer} is outside 1..{maps.shape[0]} ({store.path})")
    examples = np.asarray(examples, dtype=np.int64).reshape(-1)
    if len(examples) == 0:
        return []
    offsets = store[offsets_name][:]
    if examples.min() < 0 or examples.max() >= len(offsets) - 1:
        raise IndexError(f"example indices must be in 0..{len(offsets) - 2} ({store.path})")
    starts, ends = offsets[examples], offsets[examples + 1]
    lengths = np.sqrt(ends - starts).round().astype(np.int64)
    if np.any(lengths * lengths != ends - starts):
        raise ValueError(f"{store.path}: {offsets_name} gives an example a number of entries that is not t²")
    first, last = int(starts.min()), int(ends.max())
    block = maps[layer - 1, :, first:last]
    dtype = np.float64 if block.dtype == np.float64 else np.float32
    heads = block.shape[0]
    return [block[:, s - first:e - first].reshape(heads, t, t).astype(dtype)
            for s, e, t in zip(starts.tolist(), ends.tolist(), lengths.tolist())]
