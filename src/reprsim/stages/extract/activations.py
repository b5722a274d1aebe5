"""Activation extraction into Zarr.

Store layout (layer 0 = embeddings, layer l = output of block l):

    pooled/{mean,cls,last}  (n_layers+1, n_examples, d)   mean excludes padding;
                                                          cls = first token; last = last non-padding token
    tokens/hidden           (n_layers+1, n_tokens, d)      every non-padding token, examples concatenated
    tokens/offsets          (n_examples+1,)                example i owns tokens[offsets[i]:offsets[i+1]]
    tokens/input_ids        (n_tokens,)
    tokens/word_ids         (n_tokens,)                    -1 for special tokens
    examples/split          (n_examples,)                  index into attrs["split_names"]
    examples/row            (n_examples,)                  row in that split's parquet file
    examples/label          (n_examples,)

The store is written under a temporary name and renamed into place when
complete, so an interrupted job never leaves a store that looks finished. Every chunk
carries a CRC32C and attrs["checksums"] the sha256 of every array (:mod:`reprsim.io.store`);
attrs["truncated"] counts, per split, the examples longer than max_length tokens.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import zarr

from reprsim.io.datasets import load_split
from reprsim.io.device import describe
from reprsim.io.logs import progress
from reprsim.io.outputs import atomic_directory
from reprsim.io.provenance import versions
from reprsim.io.store import CHECKSUMS, COMPRESSORS, array_checksums
from reprsim.nets.loading import load_encoder, load_tokenizer, n_layers

POOLINGS = ("mean", "cls", "last")
STORAGE_DTYPES = ("float16", "float32")


class TruncationWarning(UserWarning):
    """Examples longer than extraction.max_length tokens: their activations cover only their start."""


class _BlockWriter:
    """Buffer rows along axis 1 and write them in chunk-aligned blocks (no partial-chunk rewrites)."""

    def __init__(self, array: zarr.Array, block: int):
        self.array, self.block, self.position = array, block, 0
        self.buffer: list[np.ndarray] = []
        self.buffered = 0

    def append(self, rows: np.ndarray) -> None:
        self.buffer.append(rows)
        self.buffered += rows.shape[1]
        if self.buffered >= self.block:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        if not self.buffer:
            return
        data = np.concatenate(self.buffer, axis=1)
        full = data.shape[1] if final else (data.shape[1] // self.block) * self.block
        if full:
            self.array[:, self.position:self.position + full] = data[:, :full]
            self.position += full
        rest = data[:, full:]
        self.buffer = [rest] if rest.shape[1] else []
        self.buffered = rest.shape[1]

    def close(self) -> None:
        self._flush(final=True)
        if self.position != self.array.shape[1]:
            raise RuntimeError(f"wrote {self.position} rows into an array of {self.array.shape[1]}")


def collect_examples(dataset_dir: str | Path, splits: list[str], max_examples: int | None) -> pd.DataFrame:
    """Rows of the requested splits, in split order, with their split and row index."""
    frames = []
    for code, split in enumerate(splits):
        frame = load_split(dataset_dir, split)
        if max_examples is not None:
            frame = frame.iloc[:max_examples]
        frames.append(frame.assign(split=code, row=np.arange(len(frame))))
    examples = pd.concat(frames, ignore_index=True)
    if examples.empty:
        raise ValueError(f"no examples in splits {splits} of {dataset_dir}")
    return examples


def tokenize(tokenizer, examples: pd.DataFrame, max_length: int) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids (truncated to max_length, special tokens included) and word ids per example."""
    texts = examples["text"].tolist()
    pairs = examples["text_pair"].tolist() if examples["text_pair"].notna().any() else None
    encoded = tokenizer(texts, pairs, truncation=True, max_length=max_length)
    ids = encoded["input_ids"]
    try:
        word_ids = [[-1 if w is None else w for w in encoded.word_ids(i)] for i in range(len(ids))]
    except (ValueError, AttributeError):  # slow tokenizers do not track words
        word_ids = [[-1] * len(row) for row in ids]
    if min(len(row) for row in ids) == 0:
        raise ValueError("an example tokenised to zero tokens; check the dataset's text column")
    return ids, word_ids


def truncated_per_split(tokenizer, examples: pd.DataFrame, splits: list[str], max_length: int) -> dict[str, int]:
    """How many examples of each split have more than `max_length` tokens (special tokens included),
    so were cut by `tokenize`; a second tokenisation without truncation, cheap beside the forward passes."""
    texts = examples["text"].tolist()
    pairs = examples["text_pair"].tolist() if examples["text_pair"].notna().any() else None
    full = tokenizer(texts, pairs, truncation=False, verbose=False)["input_ids"]  # verbose: no over-length warning
    cut = np.array([len(row) > max_length for row in full])
    return {split: int(cut[examples["split"].to_numpy() == code].sum()) for code, split in enumerate(splits)}


def pool(hidden: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Pooled views of hidden states (layers, batch, tokens, d) under attention mask (batch, tokens)."""
    weights = mask.to(hidden.dtype)[None, :, :, None]
    lengths = mask.sum(dim=1)
    last = lengths - 1
    batch = torch.arange(hidden.shape[1], device=hidden.device)
    return {
        "mean": (hidden * weights).sum(dim=2) / lengths.to(hidden.dtype)[None, :, None],
        "cls": hidden[:, :, 0],
        "last": hidden[:, batch, last],
    }


def extract_activations(
    model_dir: str | Path,
    dataset_dir: str | Path,
    out_path: str | Path,
    *,
    splits: list[str],
    max_examples: int | None = None,
    batch_size: int = 32,
    max_length: int = 128,
    dtype: str = "float32",
    poolings: list[str] = list(POOLINGS),
    tokens: bool = True,
    chunk_rows: int = 1024,
    chunk_tokens: int = 4096,
    device: torch.device = torch.device("cpu"),
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the encoder over the dataset and write hidden states of every layer to `out_path`."""
    if dtype not in STORAGE_DTYPES:
        raise ValueError(f"storage dtype must be one of {STORAGE_DTYPES}; got {dtype!r}")
    unknown = sorted(set(poolings) - set(POOLINGS))
    if unknown:
        raise ValueError(f"unknown pooling(s) {unknown}; allowed: {', '.join(POOLINGS)}")
    out_path = Path(out_path)
    tokenizer = load_tokenizer(model_dir)
    model = load_encoder(model_dir, device)
    max_positions = getattr(model.config, "max_position_embeddings", None) or max_length
    max_length = min(max_length, max_positions)
    examples = collect_examples(dataset_dir, splits, max_examples)
    ids, word_ids = tokenize(tokenizer, examples, max_length)
    truncated = truncated_per_split(tokenizer, examples, splits, max_length)
    split_sizes = {s: int((examples["split"] == i).sum()) for i, s in enumerate(splits)}
    if any(truncated.values()):
        counts = ", ".join(f"{n} of {split_sizes[split]} {split}" for split, n in truncated.items() if n)
        warnings.warn(f"{model_dir} on {dataset_dir}: {counts} examples are longer than max_length {max_length} "
                      "tokens and were truncated; raise extraction.max_length to keep them whole",
                      TruncationWarning, stacklevel=2)
    lengths = np.array([len(row) for row in ids], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])

    with atomic_directory(out_path) as tmp:
        attrs = _write_store(tmp, model, tokenizer, examples, ids, word_ids, offsets, device=device, dtype=dtype,
                             poolings=poolings, tokens=tokens, batch_size=batch_size, chunk_rows=chunk_rows,
                             chunk_tokens=chunk_tokens, desc=f"extract {out_path.stem}")
        attrs.update({
            CHECKSUMS: array_checksums(tmp),  # the arrays are complete: nothing writes them after this
            "truncated": truncated,
            "split_names": list(splits),
            "split_sizes": split_sizes,
            "max_length": int(max_length),
            "batch_size": int(batch_size),
            "tokenizer": type(tokenizer).__name__,
            "device": describe(device),
            "versions": versions(),
            **(provenance or {}),
        })
        zarr.open_group(tmp, mode="r+").attrs.update(attrs)
    return attrs


def _write_store(tmp: Path, model, tokenizer, examples: pd.DataFrame, ids, word_ids, offsets, *, device, dtype,
                 poolings, tokens, batch_size, chunk_rows, chunk_tokens, desc) -> dict[str, Any]:
    """Write arrays into the group at `tmp`; return the attrs describing what was written."""
    n, layers, width = len(ids), n_layers(model.config) + 1, int(model.config.hidden_size)
    root = zarr.open_group(tmp, mode="w")
    pooled_group = root.create_group("pooled")
    writers = {
        name: _BlockWriter(
            pooled_group.create_array(name, shape=(layers, n, width), chunks=(1, min(chunk_rows, n), width),
                                      dtype=dtype, compressors=COMPRESSORS),
            chunk_rows,
        )
        for name in poolings
    }
    if tokens:
        token_group = root.create_group("tokens")
        n_tokens = int(offsets[-1])
        token_writer = _BlockWriter(
            token_group.create_array(
                "hidden", shape=(layers, n_tokens, width), chunks=(1, min(chunk_tokens, n_tokens), width), dtype=dtype,
                compressors=COMPRESSORS,
            ),
            chunk_tokens,
        )
        for name, values in (
            ("offsets", offsets),
            ("input_ids", np.concatenate([np.asarray(r, dtype=np.int64) for r in ids])),
            ("word_ids", np.concatenate([np.asarray(r, dtype=np.int64) for r in word_ids])),
        ):
            token_group.create_array(name, shape=values.shape, chunks=(max(1, min(len(values), 1 << 20)),), dtype="int64",
                                     compressors=COMPRESSORS)[:] = values
    example_group = root.create_group("examples")
    for name in ("split", "row", "label"):
        values = examples[name].to_numpy(dtype=np.int64)
        example_group.create_array(name, shape=(n,), chunks=(n,), dtype="int64", compressors=COMPRESSORS)[:] = values

    started = time.perf_counter()
    bar = progress(total=n, unit="ex", desc=desc)
    with torch.inference_mode():
        for start in range(0, n, batch_size):
            batch_ids = ids[start:start + batch_size]
            batch = tokenizer.pad({"input_ids": batch_ids}, padding=True, return_tensors="pt")
            batch = {k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
            output = model(**batch, output_hidden_states=True)
            hidden = torch.stack(output.hidden_states)  # (layers, batch, tokens, d)
            mask = batch["attention_mask"]
            for name, view in pool(hidden, mask).items():
                if name in writers:
                    writers[name].append(view.float().cpu().numpy().astype(dtype))
            if tokens:
                flat = hidden[:, mask.bool()]  # row-major over (batch, tokens): example order kept
                token_writer.append(flat.float().cpu().numpy().astype(dtype))
            bar.update(len(batch_ids))
    bar.close()
    for writer in writers.values():
        writer.close()
    if tokens:
        token_writer.close()
    seconds = time.perf_counter() - started
    return {
        "layer_axis": "0 = embeddings, l = output of block l",
        "n_layers": layers - 1,
        "n_examples": n,
        "hidden_size": width,
        "dtype": dtype,
        "poolings": list(poolings),
        "tokens": bool(tokens),
        "seconds": round(seconds, 3),
        "examples_per_second": round(n / max(seconds, 1e-9), 2),
    }
