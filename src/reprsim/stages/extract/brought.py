"""Activations a user brings (config `source: activations`): a model given as its stored pooled activations per
split instead of a network, imported into an activation store at the path extraction would write
(results/activations/<dataset>/<model>.zarr), in extraction's layout, so that every reader of stores (pair jobs,
model terms, aligners) takes it as it takes an extracted model's.

A split's activations (layers x rows x dims) come in one of four formats (reprsim.workflow.brought.source_format):

    npy          a directory with layer_0.npy, layer_1.npy, ... (each rows x dims) and row_ids.npy (rows,)
    npz          an .npz file with arrays of the same names
    safetensors  a .safetensors file with tensors of the same names
    zarr         a Zarr store in reprsim's activation-store layout (activations.py): pooled/<pooling> (layers, n, d),
                 examples/split, examples/row and attrs["split_names"]; the rows of that split are taken

Row ids are 0-based row positions in the prepared dataset's split (results/datasets/<dataset>/<split>.parquet):
what ties a vector to its sentence. Everything is checked before anything is written, and each refusal names the
model, split, file and what was expected (BroughtActivationsError): layer arrays numbered 0..L-1 without gaps, one
(rows, dims) shape for every layer, a float dtype (float16, float32, float64; integers are refused), no NaN or
infinite value (counted per layer), row ids integer, unique and within the split, and every row the workflow
compares present: the rows extraction takes of the split, its first extraction.max_examples rows
(collect_examples). Other rows are dropped and counted; the kept rows are put in the dataset's order.

The store holds pooled/<pooling> alone (the dtype brought: nothing is rounded), examples/split, row, label and
n_words (from the dataset), and attrs as extraction writes them (model, dataset, split_names, split_sizes,
poolings, dtype, n_layers, hidden_size, n_examples, the arrays' checksums), with attrs["brought"] = {split: {path,
format, sha256 (per file, or per array of a Zarr source), rows_given, rows_dropped}}. It has no tokens, words or
attention maps.

:func:`export_activations` writes one split of any activation store in any of the four formats (the rule
export_activations, `reprsim export-activations`).
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from reprsim.io.datasets import load_split
from reprsim.io.integrity import CorruptOutputError
from reprsim.io.outputs import atomic_directory, atomic_file
from reprsim.io.provenance import file_sha256, hash_directory, versions
from reprsim.io.store import (ACTIVATION_ARRAY, CHECKSUMS, COMPRESSORS, array_checksums, open_store, pooled_rows,
                               split_examples)
from reprsim.workflow.brought import ACTIVATIONS, FORMATS, LAYER, ROW_IDS, format_from_name, source_format

POOLINGS = ("mean", "cls", "last")
SAFETENSORS_FLOATS = {"F16": "float16", "F32": "float32", "F64": "float64"}
SHOWN = 5  # ids listed in a message


class BroughtActivationsError(ValueError):
    """Brought activations that cannot be imported; the message names the model, split, file and what was expected."""


@dataclass
class Split:
    """One brought split as read: `layers` (L, rows, d) in the file's row order, its `row_ids`, and the sha256 of
    what was read (file, or array of a Zarr store)."""

    path: Path
    format: str
    layers: np.ndarray
    row_ids: np.ndarray
    sha256: dict[str, str] = field(default_factory=dict)


def extracted_rows(length: int, max_examples: int | None) -> int:
    """Rows extraction takes of a split of `length` rows: its first max_examples (all with None), as
    reprsim.stages.extract.activations.collect_examples does."""
    return length if max_examples is None else min(length, max_examples)


def _shown(ids) -> str:
    ids = [int(i) for i in ids]
    return ", ".join(map(str, ids[:SHOWN])) + (f", ... ({len(ids)} in all)" if len(ids) > SHOWN else "")


class _Reader:
    """Reads one brought split, collecting what is wrong with it in `problems` (each a sentence)."""

    def __init__(self, path: Path, split: str, pooling: str, where: str):
        self.path, self.split, self.pooling, self.where = path, split, pooling, where

    def fail(self, problems: list[str]) -> None:
        if problems:
            listing = "\n".join(f"  - {p}" for p in problems)
            raise BroughtActivationsError(f"{self.where}: {len(problems)} problem(s):\n{listing}")

    # ------------------------------------------------------------- the four formats: name -> array
    def arrays(self, kind: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
        """{name: array} of a layer-file format and the sha256 of each file read."""
        if kind == "npy":
            files = sorted(self.path.glob("*.npy"))
            if not files:
                self.fail([f"the directory holds no .npy files; expected layer_0.npy, layer_1.npy, ... and "
                           f"{ROW_IDS}.npy"])
            arrays = {f.stem: self._load(f) for f in files}
            return arrays, {f.name: file_sha256(f) for f in files}
        if kind == "npz":
            try:
                with np.load(self.path, allow_pickle=False) as archive:
                    arrays = {name: archive[name] for name in archive.files}
            except (OSError, ValueError) as error:  # not a zip, a pickled (object) array
                self.fail([f"not a readable .npz ({type(error).__name__}: {error}); save it with numpy.savez "
                           "of numeric arrays"])
            return arrays, {self.path.name: file_sha256(self.path)}
        return self._safetensors(), {self.path.name: file_sha256(self.path)}

    def _load(self, path: Path) -> np.ndarray:
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError) as error:
            self.fail([f"{path.name} is not a readable .npy file ({type(error).__name__}: {error})"])

    def _safetensors(self) -> dict[str, np.ndarray]:
        """Its tensors, after checking the dtypes its header declares: numpy cannot hold bfloat16 (nor would an
        integer be an activation), so those are named before anything is loaded."""
        try:
            with open(self.path, "rb") as handle:
                header = json.loads(handle.read(struct.unpack("<Q", handle.read(8))[0]))
        except (OSError, ValueError, struct.error) as error:
            self.fail([f"not a readable .safetensors file ({type(error).__name__}: {error})"])
        header.pop("__metadata__", None)
        problems = [f"{name} is {entry['dtype']}; expected a float dtype (F16, F32 or F64)"
                    + (": bfloat16 has no numpy dtype, save float32" if entry["dtype"] == "BF16" else "")
                    for name, entry in sorted(header.items())
                    if LAYER.fullmatch(name) and entry.get("dtype") not in SAFETENSORS_FLOATS]
        if ROW_IDS in header and not str(header[ROW_IDS].get("dtype", "")).startswith(("I", "U")):
            problems.append(f"{ROW_IDS} is {header[ROW_IDS].get('dtype')}; expected an integer dtype (I64, I32, ...)")
        self.fail(problems)
        from safetensors.numpy import load_file

        return dict(load_file(str(self.path)))

    # ------------------------------------------------------------- checks
    def layer_files(self, arrays: dict[str, np.ndarray]) -> Split:
        """The layer arrays and row ids of a layer-file format, checked (module docstring)."""
        unit = "file" if self.path.is_dir() else "array"
        numbers = {int(LAYER.fullmatch(name).group(1)): name for name in arrays if LAYER.fullmatch(name)}
        unexpected = sorted(name for name in arrays if name != ROW_IDS and not LAYER.fullmatch(name))
        problems = []
        if unexpected:
            problems.append(f"unexpected {unit}(s) {', '.join(unexpected)}; expected only layer_0, layer_1, ... "
                            f"(no leading zeros) and {ROW_IDS}")
        if ROW_IDS not in arrays:
            problems.append(f"no {ROW_IDS} {unit}: the rows' 0-based positions in the dataset's {self.split} split")
        if not numbers:
            problems.append(f"no layer {unit}s; expected layer_0, layer_1, ... (each rows x dims)")
        else:
            gaps = sorted(set(range(max(numbers) + 1)) - set(numbers))
            if gaps:
                problems.append(f"the layer {unit}s are numbered with gaps: {', '.join(f'layer_{g}' for g in gaps)} "
                                f"missing (found {', '.join(numbers[n] for n in sorted(numbers))}); expected "
                                f"layer_0 ... layer_{max(numbers)} without gaps")
        self.fail(problems)
        layers = [arrays[numbers[n]] for n in sorted(numbers)]
        return Split(self.path, "", *self.checked(layers, arrays[ROW_IDS], [f"layer_{n}" for n in sorted(numbers)]))

    def checked(self, layers: list[np.ndarray], row_ids: np.ndarray, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Shapes, dtypes and values of the layers, and the row ids' kind and count: (layers stacked, row ids)."""
        problems = []
        for name, layer in zip(names, layers):
            if layer.ndim != 2:
                problems.append(f"{name} has shape {layer.shape}; expected (rows, dims)")
            if not (layer.dtype.kind == "f" and layer.dtype.itemsize in (2, 4, 8)):
                kind = "integer activations are refused" if layer.dtype.kind in "iub" else "not a float"
                problems.append(f"{name} is {layer.dtype} ({kind}); expected float16, float32 or float64")
        self.fail(problems)
        first = layers[0].shape
        problems = [f"{name} has shape {layer.shape} where {names[0]} has {first}; every layer must have the same "
                    "rows and dims" for name, layer in zip(names[1:], layers[1:]) if layer.shape != first]
        row_ids = np.asarray(row_ids)
        if row_ids.ndim != 1 or row_ids.dtype.kind not in "iu":
            problems.append(f"{ROW_IDS} is {row_ids.dtype} of shape {row_ids.shape}; expected a 1-D integer array "
                            "(0-based row positions in the dataset's split)")
        elif len(row_ids) != first[0]:
            problems.append(f"{ROW_IDS} holds {len(row_ids)} ids for {first[0]} rows; expected one id per row")
        self.fail(problems)
        for name, layer in zip(names, layers):
            nan, infinite = int(np.isnan(layer).sum()), int(np.isinf(layer).sum())
            if nan or infinite:
                problems.append(f"{name} holds {nan} NaN and {infinite} infinite value(s) (of {layer.size}); "
                                "expected finite activations")
        self.fail(problems)
        dtype = np.result_type(*(layer.dtype.newbyteorder("=") for layer in layers))
        return np.stack([layer.astype(dtype, copy=False) for layer in layers]), row_ids.astype(np.int64)

    def zarr_store(self) -> Split:
        """The rows of this split from a store in reprsim's layout."""
        try:
            store = open_store(self.path)
        except (CorruptOutputError, FileNotFoundError) as error:
            self.fail([f"not a readable activation store ({error})"])
        names = store.attrs.get("split_names")
        problems = []
        if not isinstance(names, list):
            problems.append("no attrs['split_names']; expected reprsim's activation-store layout")
        elif self.split not in names:
            problems.append(f"no rows of split {self.split!r} (its splits: {names})")
        missing = [a for a in (f"pooled/{self.pooling}", "examples/split", "examples/row") if a not in store]
        if missing:
            held = [f"pooled/{p}" for p in POOLINGS if f"pooled/{p}" in store]
            problems.append(f"no {', '.join(missing)} (it holds {', '.join(held) or 'no pooled arrays'}); expected "
                            f"pooled/{self.pooling} (models.*.pooling) and examples/split, examples/row")
        self.fail(problems)
        examples = split_examples(store, self.split)
        stack = store[f"pooled/{self.pooling}"]
        layers = stack[:, int(examples[0]):int(examples[-1]) + 1] if len(examples) else stack[:, :0]
        if len(examples) and not np.array_equal(examples, np.arange(examples[0], examples[-1] + 1)):
            layers = stack[:][:, examples]  # not stored contiguously: picked
        rows = store["examples/row"][:][examples]
        sha256 = {name: hash_directory(self.path / name, skip=())
                  for name in (f"pooled/{self.pooling}", "examples/split", "examples/row")}
        sha256["zarr.json"] = file_sha256(self.path / "zarr.json") if (self.path / "zarr.json").is_file() else ""
        names = [f"pooled/{self.pooling} layer {i}" for i in range(len(layers))]
        stacked, row_ids = self.checked(list(layers), rows, names)
        return Split(self.path, "zarr", stacked, row_ids, sha256)


def read_split(path: str | Path, *, split: str, pooling: str, where: str) -> Split:
    """One brought split, read and checked (module docstring); `where` begins every message."""
    path = Path(path)
    where = f"{where} ({path})"
    try:
        kind = source_format(path)
    except ValueError as error:
        raise BroughtActivationsError(f"{where}: {error}") from None
    if not path.exists():
        raise BroughtActivationsError(f"{where}: no such {'directory' if kind in ('npy', 'zarr') else 'file'}; "
                                      "check the path (relative paths are taken from the working directory)")
    reader = _Reader(path, split, pooling, f"{where}, format {kind}")
    if kind == "zarr":
        return reader.zarr_store()
    arrays, sha256 = reader.arrays(kind)
    read = reader.layer_files(arrays)
    read.format, read.sha256 = kind, sha256
    return read


def kept_rows(read: Split, split_length: int, compared: int, where: str) -> np.ndarray:
    """Positions, in `read`'s row order, of the rows 0..compared-1 of the split (the dataset's order); refused when
    an id is out of the split or repeated, or a compared row is missing."""
    ids = read.row_ids
    problems = []
    outside = np.unique(ids[(ids < 0) | (ids >= split_length)])
    if len(outside):
        problems.append(f"{len(outside)} row id(s) outside the split's {split_length} rows (0..{split_length - 1}): "
                        f"{_shown(outside)}")
    values, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        problems.append(f"{int((counts > 1).sum())} row id(s) given more than once: {_shown(values[counts > 1])}; "
                        "expected each row once")
    missing = np.setdiff1d(np.arange(compared), ids)
    if len(missing):
        problems.append(f"{len(missing)} of the {compared} rows the workflow compares are missing: {_shown(missing)} "
                        f"(extraction takes the split's first {compared} rows: extraction.max_examples); bring them "
                        "all")
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems)
        raise BroughtActivationsError(f"{where} ({read.path}, format {read.format}): {len(problems)} problem(s):\n"
                                      f"{listing}")
    position = np.full(compared, -1, dtype=np.int64)
    inside = ids < compared
    position[ids[inside]] = np.flatnonzero(inside)
    return position


def import_activations(sources: dict[str, str | Path], dataset_dir: str | Path, out_path: str | Path, *, model: str,
                       pooling: str, splits: list[str], max_examples: int | None = None, chunk_rows: int = 1024,
                       provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """Read, check and import the brought splits `sources` (split -> path) of `model` into an activation store at
    `out_path`, the splits in the order `splits` (extraction.splits) gives them, each holding the rows extraction
    would take of the prepared dataset at `dataset_dir` (first max_examples). Returns the store's attrs."""
    if pooling not in POOLINGS:
        raise BroughtActivationsError(f"model {model!r}: pooling {pooling!r}; expected one of {', '.join(POOLINGS)}")
    unknown = sorted(set(sources) - set(splits))
    if unknown or not sources:
        raise BroughtActivationsError(f"model {model!r}: brought split(s) {unknown or '(none)'}; expected some of the "
                                      f"extracted splits {splits}")
    started = time.perf_counter()
    order = [s for s in splits if s in sources]
    blocks, rows, labels, words, brought = [], [], [], [], {}
    for split in order:
        where = f"brought activations of model {model!r}, split {split!r}"
        read = read_split(sources[split], split=split, pooling=pooling, where=where)
        frame = load_split(dataset_dir, split)
        compared = extracted_rows(len(frame), max_examples)
        position = kept_rows(read, len(frame), compared, where)
        if blocks and read.layers.shape[::2] != blocks[0].shape[::2]:
            raise BroughtActivationsError(
                f"{where} ({read.path}): {read.layers.shape[0]} layers of width {read.layers.shape[2]}, where split "
                f"{order[0]!r} has {blocks[0].shape[0]} of width {blocks[0].shape[2]}; every split must have the same")
        blocks.append(read.layers[:, position])
        rows.append(np.arange(compared, dtype=np.int64))
        labels.append(frame["label"].to_numpy(dtype=np.int64)[:compared])
        words.append(frame["n_words"].to_numpy(dtype=np.int64)[:compared] if "n_words" in frame
                     else np.zeros(compared, np.int64))
        brought[split] = {"path": str(sources[split]), "format": read.format, "sha256": read.sha256,
                          "rows_given": int(len(read.row_ids)), "rows_dropped": int(len(read.row_ids) - compared)}
        print(f"{model}: {split} from {sources[split]} ({read.format}): {read.layers.shape[0]} layers x "
              f"{len(read.row_ids)} rows x {read.layers.shape[2]} ({read.layers.dtype}); {compared} kept, "
              f"{brought[split]['rows_dropped']} dropped", flush=True)
    dtype = np.result_type(*blocks)
    layers, width = blocks[0].shape[0], blocks[0].shape[2]
    n = sum(block.shape[1] for block in blocks)
    with atomic_directory(out_path) as tmp:
        root = zarr.open_group(tmp, mode="w")
        pooled = root.create_group("pooled").create_array(pooling, shape=(layers, n, width),
                                                          chunks=(1, max(1, min(chunk_rows, n)), width), dtype=dtype,
                                                          **ACTIVATION_ARRAY)
        for layer in range(layers):
            pooled[layer] = np.concatenate([block[layer] for block in blocks]).astype(dtype, copy=False)
        group = root.create_group("examples")
        per_example = {"split": np.concatenate([np.full(len(r), code, np.int64) for code, r in enumerate(rows)]),
                       "row": np.concatenate(rows), "label": np.concatenate(labels), "n_words": np.concatenate(words)}
        for name, values in per_example.items():
            group.create_array(name, shape=(n,), chunks=(max(1, n),), dtype="int64",
                               compressors=COMPRESSORS)[:] = values
        seconds = round(time.perf_counter() - started, 3)
        attrs = {
            "source": ACTIVATIONS,
            "layer_axis": "as brought: layer l = the file's layer_l (for a transformer, usually 0 = embeddings)",
            "n_layers": layers - 1, "n_examples": n, "hidden_size": width, "dtype": str(dtype),
            "poolings": [pooling], "tokens": False, "detail_splits": [], "word_pooling": None, "words": None,
            "attention": None, "truncated": {}, "split_names": order,
            "split_sizes": {split: int(len(r)) for split, r in zip(order, rows)},
            "max_length": None, "batch_size": None, "batching": None, "tokenizer": None,
            "device": "none (brought activations: no forward pass)", "seconds": seconds,
            "examples_per_second": None, "tokens_per_second": None, "brought": brought, "versions": versions(),
            CHECKSUMS: array_checksums(tmp), "model": model, **(provenance or {}),
        }
        zarr.open_group(tmp, mode="r+").attrs.update(attrs)
    return attrs


# ----------------------------------------------------------------- export
def write_split(out: str | Path, layers: np.ndarray, row_ids: np.ndarray, *, split: str, pooling: str,
                format: str | None = None) -> Path:
    """Write `layers` (L, rows, d) and their `row_ids` as one brought split in `format` (None: from `out`'s name,
    see reprsim.workflow.brought.source_format; a name without a known suffix is a directory of .npy files),
    atomically."""
    out = Path(out)
    if format is None:
        format = format_from_name(out) or "npy"
    if format not in FORMATS:
        raise ValueError(f"format {format!r}; expected one of {', '.join(FORMATS)}")
    arrays = {f"layer_{i}": np.ascontiguousarray(layer) for i, layer in enumerate(layers)}
    arrays[ROW_IDS] = np.ascontiguousarray(row_ids, dtype=np.int64)
    out.parent.mkdir(parents=True, exist_ok=True)
    if format == "npz":
        with atomic_file(out) as tmp, open(tmp, "wb") as handle:  # a handle: savez would append .npz to a name
            np.savez(handle, **arrays)
    elif format == "safetensors":
        from safetensors.numpy import save_file

        with atomic_file(out) as tmp:
            save_file(arrays, str(tmp))
    elif format == "npy":
        with atomic_directory(out) as tmp:
            for name, values in arrays.items():
                np.save(tmp / f"{name}.npy", values)
    else:
        with atomic_directory(out) as tmp:
            root = zarr.open_group(tmp, mode="w")
            stack = np.ascontiguousarray(layers)
            root.create_group("pooled").create_array(pooling, shape=stack.shape, chunks=(1, *stack.shape[1:]),
                                                     dtype=stack.dtype, **ACTIVATION_ARRAY)[:] = stack
            group = root.create_group("examples")
            for name, values in (("split", np.zeros(len(row_ids), np.int64)), ("row", arrays[ROW_IDS])):
                group.create_array(name, shape=values.shape, chunks=(max(1, len(values)),), dtype="int64",
                                   compressors=COMPRESSORS)[:] = values
            root.attrs.update({"split_names": [split], "poolings": [pooling], CHECKSUMS: array_checksums(tmp)})
    return out


def export_activations(store_path: str | Path, out: str | Path, *, split: str, pooling: str,
                       format: str | None = None) -> Path:
    """One split's pooled rows of the activation store at `store_path`, with their row ids (examples/row), written
    as a brought split at `out` (:func:`write_split`)."""
    store = open_store(store_path)
    rows = store["examples/row"][:][split_examples(store, split)]
    return write_split(out, pooled_rows(store, pooling, split), rows, split=split, pooling=pooling, format=format)
