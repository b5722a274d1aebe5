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
    examples/n_tokens       (n_examples,)                  t_i: tokens kept (special tokens included)
    examples/n_words        (n_examples,)                  w_i: words of the dataset's segmentation

Detail splits (extraction.detail_splits) also get, per example (others own zero entries):

    words/hidden            (n_layers+1, n_words, d)       one row per data word (reprsim.words), NaN
                                                           for a word no token reached (truncation)
    words/offsets           (n_examples+1,)
    attention/maps          (n_layers, heads, Σ t_i²)      with extraction.attention: layer l+1's maps of
    attention/offsets       (n_examples+1,)                example i, maps[l, :, o[i]:o[i+1]] = (heads, t_i, t_i)
    attention/word_maps     (n_layers, heads, Σ w_i²)      word-level maps (reprsim.words.aggregate_attention);
    attention/word_offsets  (n_examples+1,)                all NaN for an example with a word no token reached

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
from reprsim.words import aggregate_attention, aggregate_hidden, token_words

POOLINGS = ("mean", "cls", "last")
STORAGE_DTYPES = ("float16", "float32")


class TruncationWarning(UserWarning):
    """Examples longer than extraction.max_length tokens: their activations cover only their start."""


class _BlockWriter:
    """Buffer rows along `axis` (examples, tokens or words: 1; flattened attention maps: 2) and write
    them in chunk-aligned blocks (no partial-chunk rewrites)."""

    def __init__(self, array: zarr.Array, block: int, axis: int = 1):
        self.array, self.block, self.axis, self.position = array, block, axis, 0
        self.buffer: list[np.ndarray] = []
        self.buffered = 0

    def append(self, rows: np.ndarray) -> None:
        self.buffer.append(rows)
        self.buffered += rows.shape[self.axis]
        if self.buffered >= self.block:
            self._flush(final=False)

    def _along(self, start: int, stop: int | None) -> tuple:
        return (slice(None),) * self.axis + (slice(start, stop),)

    def _flush(self, final: bool) -> None:
        if not self.buffer:
            return
        data = np.concatenate(self.buffer, axis=self.axis)
        size = data.shape[self.axis]
        full = size if final else (size // self.block) * self.block
        if full:
            self.array[self._along(self.position, self.position + full)] = data[self._along(0, full)]
            self.position += full
        rest = data[self._along(full, None)]
        self.buffer = [rest] if rest.shape[self.axis] else []
        self.buffered = rest.shape[self.axis]

    def close(self) -> None:
        self._flush(final=True)
        if self.position != self.array.shape[self.axis]:
            raise RuntimeError(f"wrote {self.position} rows into an array of {self.array.shape[self.axis]}")


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


def tokenize(tokenizer, examples: pd.DataFrame, max_length: int) -> tuple[list[list[int]], list[np.ndarray]]:
    """Token ids (truncated to max_length, special tokens included) and each token's data word
    (reprsim.words.token_words on the dataset's word_spans: -1 for special tokens; all -1 when the
    tokenizer reports no character offsets or the dataset records no words)."""
    texts = examples["text"].tolist()
    pairs = examples["text_pair"].tolist() if examples["text_pair"].notna().any() else None
    offsets = bool(getattr(tokenizer, "is_fast", False)) and "word_spans" in examples
    encoded = tokenizer(texts, pairs, truncation=True, max_length=max_length, return_offsets_mapping=offsets)
    ids = encoded["input_ids"]
    if min(len(row) for row in ids) == 0:
        raise ValueError("an example tokenised to zero tokens; check the dataset's text column")
    if not offsets:
        return ids, [np.full(len(row), -1, dtype=np.int64) for row in ids]
    spans = examples["word_spans"].tolist()
    word_ids = [token_words(encoded["offset_mapping"][i], np.asarray(spans[i], dtype=np.int64).reshape(-1, 3),
                            encoded.sequence_ids(i)) for i in range(len(ids))]
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
    detail_splits: list[str] | None = None,
    word_pooling: str = "last",
    attention: bool = False,
    attention_dtype: str = "float16",
    attention_max_gb: float = 4.0,
    device: torch.device = torch.device("cpu"),
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the encoder over the dataset and write hidden states of every layer to `out_path`; for the
    examples of `detail_splits`, also word-level hidden states and (with `attention`) attention maps."""
    for name, value, allowed in (("dtype", dtype, STORAGE_DTYPES), ("attention_dtype", attention_dtype, STORAGE_DTYPES)):
        if value not in allowed:
            raise ValueError(f"storage {name} must be one of {allowed}; got {value!r}")
    unknown = sorted(set(poolings) - set(POOLINGS))
    if unknown:
        raise ValueError(f"unknown pooling(s) {unknown}; allowed: {', '.join(POOLINGS)}")
    detail_splits = list(detail_splits or [])
    if sorted(set(detail_splits) - set(splits)):
        raise ValueError(f"detail split(s) {sorted(set(detail_splits) - set(splits))} are not extracted "
                         f"(extraction.splits = {splits}); add them there or drop them from extraction.detail_splits")
    out_path = Path(out_path)
    tokenizer = load_tokenizer(model_dir)
    model = load_encoder(model_dir, device, attention=attention and bool(detail_splits))
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
    detail = _plan_detail(model, tokenizer, examples, splits, detail_splits, lengths, word_pooling,
                          attention, attention_dtype, attention_max_gb, f"{model_dir} on {dataset_dir}")

    with atomic_directory(out_path) as tmp:
        attrs = _write_store(tmp, model, tokenizer, examples, ids, word_ids, offsets, device=device, dtype=dtype,
                             poolings=poolings, tokens=tokens, batch_size=batch_size, chunk_rows=chunk_rows,
                             chunk_tokens=chunk_tokens, detail=detail, desc=f"extract {out_path.stem}")
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


class _Detail:
    """What the detail splits' examples get: word rows, and attention maps when `heads` is set."""

    def __init__(self, mask: np.ndarray, n_words: np.ndarray, lengths: np.ndarray, word_pooling: str,
                 heads: int | None, attention_dtype: str, splits: list[str]):
        self.mask, self.word_pooling, self.heads, self.attention_dtype, self.splits = (
            mask, word_pooling, heads, attention_dtype, splits)
        self.n_words = np.where(mask, n_words, 0)
        self.word_offsets = np.concatenate([[0], np.cumsum(self.n_words)])
        self.map_offsets = np.concatenate([[0], np.cumsum(np.where(mask, lengths, 0) ** 2)])
        self.word_map_offsets = np.concatenate([[0], np.cumsum(self.n_words ** 2)])
        self.missing = {"words": 0, "examples": 0}  # words no token reached, and their examples


def _plan_detail(model, tokenizer, examples: pd.DataFrame, splits, detail_splits, lengths, word_pooling,
                 attention, attention_dtype, attention_max_gb, what: str) -> _Detail | None:
    """The detail splits' word and attention layout, refused when its attention arrays would exceed
    attention_max_gb (the estimate is printed before anything is computed)."""
    if not detail_splits:
        return None
    if "word_spans" not in examples:
        raise ValueError(f"{what}: the dataset records no words (word_spans), which extraction.detail_splits "
                         "needs; it was prepared by an older reprsim: remake it with snakemake --forcerun "
                         "<its results/datasets directory>")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{what}: {type(tokenizer).__name__} reports no character offsets, so its tokens cannot "
                         "be mapped to the dataset's words; use a fast tokenizer or set extraction.detail_splits: []")
    mask = examples["split"].isin([splits.index(s) for s in detail_splits]).to_numpy()
    heads = int(model.config.num_attention_heads) if attention else None
    detail = _Detail(mask, examples["n_words"].to_numpy(dtype=np.int64), lengths, word_pooling, heads,
                     attention_dtype, list(detail_splits))
    if attention:
        entries = (detail.map_offsets[-1] + detail.word_map_offsets[-1]) * n_layers(model.config) * heads
        gigabytes = entries * np.dtype(attention_dtype).itemsize / 1e9
        print(f"{what}: attention maps of {int(mask.sum())} examples ({', '.join(detail_splits)}), {heads} heads x "
              f"{n_layers(model.config)} layers: {gigabytes:.3f} GB ({attention_dtype}), limit "
              f"extraction.attention_max_gb = {attention_max_gb:g}", flush=True)
        if gigabytes > attention_max_gb:
            raise ValueError(
                f"{what}: the attention maps would take {gigabytes:.2f} GB, above extraction.attention_max_gb = "
                f"{attention_max_gb:g}; raise that limit, store fewer examples (extraction.detail_splits, "
                "max_examples, max_length) or use attention_dtype float16")
    return detail


def _detail_rows(hidden: torch.Tensor, attentions, example: int, token_words: np.ndarray, detail: _Detail,
                 dtype: str) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """One detail example's word rows (layers+1, w, d) and, with attention, its token maps (layers, H, t²)
    and word maps (layers, H, w²); `hidden` (layers+1, t, d) and `attentions` (layers, H, t, t) are its own
    tokens' (padding removed)."""
    words = int(detail.n_words[example])
    covered = np.unique(token_words[token_words >= 0])
    whole = len(covered) == words  # else some word lost all its tokens (truncation)
    if not whole:
        detail.missing["words"] += words - len(covered)
        detail.missing["examples"] += 1
    remap = np.full(words, -1, dtype=np.int64)
    remap[covered] = np.arange(len(covered))
    ids = np.where(token_words >= 0, remap[np.maximum(token_words, 0)], -1)
    word_rows = np.full((hidden.shape[0], words, hidden.shape[-1]), np.nan, dtype=np.float32)
    if len(covered):
        word_rows[:, covered] = aggregate_hidden(hidden.float(), ids, detail.word_pooling,
                                                 len(covered)).cpu().numpy()
    if attentions is None:
        return word_rows.astype(dtype), None, None
    layers, heads, t = attentions.shape[0], attentions.shape[1], attentions.shape[-1]
    maps = attentions.float().cpu().numpy()
    word_maps = np.full((layers, heads, words, words), np.nan)
    if whole and words:
        word_maps = aggregate_attention(maps.reshape(layers * heads, t, t), ids, words).reshape(word_maps.shape)
    return (word_rows.astype(dtype), maps.reshape(layers, heads, t * t).astype(detail.attention_dtype),
            word_maps.reshape(layers, heads, words * words).astype(detail.attention_dtype))


def _write_store(tmp: Path, model, tokenizer, examples: pd.DataFrame, ids, word_ids, offsets, *, device, dtype,
                 poolings, tokens, batch_size, chunk_rows, chunk_tokens, detail, desc) -> dict[str, Any]:
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
    per_example = {name: examples[name].to_numpy(dtype=np.int64) for name in ("split", "row", "label")}
    per_example["n_tokens"] = np.diff(offsets)
    per_example["n_words"] = examples["n_words"].to_numpy(dtype=np.int64) if "n_words" in examples else np.zeros(n, int)
    for name, values in per_example.items():
        example_group.create_array(name, shape=(n,), chunks=(n,), dtype="int64", compressors=COMPRESSORS)[:] = values
    detail_writers = _detail_writers(root, detail, layers, n_layers(model.config), width, dtype, chunk_tokens)

    started = time.perf_counter()
    bar = progress(total=n, unit="ex", desc=desc)
    with torch.inference_mode():
        for start in range(0, n, batch_size):
            batch_ids = ids[start:start + batch_size]
            batch = tokenizer.pad({"input_ids": batch_ids}, padding=True, return_tensors="pt")
            batch = {k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
            rows = range(start, start + len(batch_ids))
            chosen = [] if detail is None else [r for r in rows if detail.mask[r]]
            maps_wanted = bool(chosen) and detail.heads is not None
            output = model(**batch, output_hidden_states=True, output_attentions=maps_wanted)
            hidden = torch.stack(output.hidden_states)  # (layers, batch, tokens, d)
            mask = batch["attention_mask"]
            for r in chosen:
                keep = mask[r - start].bool()
                maps = None
                if maps_wanted:  # (layers, heads, t, t) over this example's own tokens
                    maps = torch.stack([a[r - start][:, keep][:, :, keep] for a in output.attentions])
                for name, values in zip(("words", "maps", "word_maps"),
                                        _detail_rows(hidden[:, r - start, keep], maps, r, np.asarray(word_ids[r]),
                                                     detail, dtype)):
                    if values is not None:
                        detail_writers[name].append(values)
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
    for writer in detail_writers.values():
        writer.close()
    seconds = time.perf_counter() - started
    return {
        "layer_axis": "0 = embeddings, l = output of block l",
        "n_layers": layers - 1,
        "n_examples": n,
        "hidden_size": width,
        "dtype": dtype,
        "poolings": list(poolings),
        "tokens": bool(tokens),
        "detail_splits": [] if detail is None else detail.splits,
        "word_pooling": None if detail is None else detail.word_pooling,
        "words": None if detail is None else {
            "words": int(detail.word_offsets[-1]), "without_token": detail.missing["words"],
            "examples_with_missing_words": detail.missing["examples"]},
        "attention": None if detail is None or detail.heads is None else {
            "layers": n_layers(model.config), "heads": detail.heads, "dtype": detail.attention_dtype,
            "splits": detail.splits, "layer_axis": "0 = block 1"},
        "seconds": round(seconds, 3),
        "examples_per_second": round(n / max(seconds, 1e-9), 2),
    }


def _detail_writers(root: zarr.Group, detail: _Detail | None, layers: int, blocks: int, width: int, dtype: str,
                    chunk: int) -> dict[str, _BlockWriter]:
    """Ragged arrays of the detail examples (module docstring) and writers filling them in example order."""
    if detail is None:
        return {}
    arrays = {"words": ("words", "hidden", (layers, int(detail.word_offsets[-1]), width), dtype, detail.word_offsets)}
    if detail.heads is not None:
        arrays["maps"] = ("attention", "maps", (blocks, detail.heads, int(detail.map_offsets[-1])),
                          detail.attention_dtype, detail.map_offsets)
        arrays["word_maps"] = ("attention", "word_maps", (blocks, detail.heads, int(detail.word_map_offsets[-1])),
                               detail.attention_dtype, detail.word_map_offsets)
    writers = {}
    for key, (group, name, shape, kind, offsets) in arrays.items():
        g = root.require_group(group)
        axis = len(shape) - 1 if key != "words" else 1
        chunks = list(shape)
        chunks[0] = 1
        chunks[axis] = max(1, min(chunk * (64 if key != "words" else 1), shape[axis]))
        array = g.create_array(name, shape=shape, chunks=tuple(chunks), dtype=kind, compressors=COMPRESSORS)
        offset_name = "offsets" if name in ("hidden", "maps") else "word_offsets"
        g.create_array(offset_name, shape=offsets.shape, chunks=offsets.shape, dtype="int64",
                       compressors=COMPRESSORS)[:] = offsets
        writers[key] = _BlockWriter(array, chunks[axis], axis=axis)
    return writers

