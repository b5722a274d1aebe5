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

    words/hidden            (n_layers+1, n_words, d)       one row per data word (reprsim.text.words), NaN
                                                           for a word no token reached (truncation)
    words/offsets           (n_examples+1,)
    attention/maps          (n_layers, heads, Σ t_i²)      with extraction.attention: layer l+1's maps of
    attention/offsets       (n_examples+1,)                example i, maps[l, :, o[i]:o[i+1]] = (heads, t_i, t_i)
    attention/word_maps     (n_layers, heads, Σ w_i²)      word-level maps (reprsim.text.words.aggregate_attention);
    attention/word_offsets  (n_examples+1,)                all NaN for an example with a word no token reached

The store is written under a temporary name and renamed into place when
complete, so an interrupted job never leaves a store that looks finished. Every chunk
carries a CRC32C and attrs["checksums"] the sha256 of every array (:mod:`reprsim.io.store`);
attrs["truncated"] counts, per split, the examples longer than max_length tokens.

Speed (the forward passes' rate): examples run in batches sorted by token length within windows of
extraction.sort_window consecutive examples (reprsim.stages.extract.batching), so batches carry little
padding; a background thread (reprsim.stages.extract.writer) puts each window's outputs back in example
order, casts them to the storage dtype and makes the chunk-aligned Zarr writes while the next batches
run. The store is the one unsorted batching gives, up to float rounding (padding changes the order of
sums only). On CUDA the outputs reach the host by non-blocking copies into pinned memory, which the
writer reads after their CUDA event; extraction.autocast runs the forward passes in bfloat16/float16
(CUDA only). attrs["batching"] records the windows, autocast and the padding computed versus unsorted
batching; attrs["timing"] how long the writer was busy and the forward passes waited for it.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
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
from reprsim.io.store import ACTIVATION_ARRAY, CHECKSUMS, COMPRESSORS, array_checksums
from reprsim.nets.loading import load_encoder, load_tokenizer, n_layers
from reprsim.nets.pooling import POOLINGS, pool
from reprsim.stages.extract.batching import (
    batch_inputs,
    padding_summary,
    plan_windows,
    sorting,
)
from reprsim.stages.extract.writer import BackgroundWriter
from reprsim.text.words import aggregate_attention, aggregate_hidden, token_words

STORAGE_DTYPES = ("float16", "float32")


class TruncationWarning(UserWarning):
    """Examples longer than extraction.max_length tokens: their activations cover only their start."""


class _BlockWriter:
    """Write rows along `axis` (examples, tokens or words: 1; flattened attention maps: 2) in chunk-aligned
    blocks (no partial-chunk rewrites). Whole blocks of what is appended are written at once; only the
    remainder (less than a block) is kept, as a copy, so the caller may reuse the array it appended."""

    def __init__(self, array: zarr.Array, block: int, axis: int = 1):
        self.array, self.block, self.axis, self.position = array, block, axis, 0
        self.buffer: list[np.ndarray] = []
        self.buffered = 0

    def _along(self, start: int, stop: int | None) -> tuple:
        return (slice(None),) * self.axis + (slice(start, stop),)

    def _write(self, data: np.ndarray) -> None:
        size = data.shape[self.axis]
        self.array[self._along(self.position, self.position + size)] = data
        self.position += size

    def append(self, rows: np.ndarray) -> None:
        size = rows.shape[self.axis]
        if self.buffered + size < self.block:
            self.buffer.append(np.array(rows, copy=True))
            self.buffered += size
            return
        used = 0
        if self.buffer:  # complete the partial block first
            used = self.block - self.buffered
            self._write(np.concatenate([*self.buffer, rows[self._along(0, used)]], axis=self.axis))
            self.buffer, self.buffered = [], 0
        full = (size - used) // self.block * self.block
        if full:
            self._write(rows[self._along(used, used + full)])
        if size - used - full:
            self.buffer = [np.array(rows[self._along(used + full, None)], copy=True)]
            self.buffered = size - used - full

    def close(self) -> None:
        if self.buffer:
            self._write(self.buffer[0] if len(self.buffer) == 1 else np.concatenate(self.buffer, axis=self.axis))
            self.buffer, self.buffered = [], 0
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
    (reprsim.text.words.token_words on the dataset's word_spans: -1 for special tokens; all -1 when the
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
    sort_window: int | None = 1024,
    sort_window_mb: float = 512.0,
    autocast: str | None = None,
    device: torch.device = torch.device("cpu"),
    provenance: dict[str, Any] | None = None,
    background_writer: bool | None = None,
) -> dict[str, Any]:
    """Run the encoder over the dataset and write hidden states of every layer to `out_path`; for the
    examples of `detail_splits`, also word-level hidden states and (with `attention`) attention maps.
    With `attention` the encoder runs in eager attention, the implementation that returns the maps, even
    when `detail_splits` is empty (the workflow stores detail only for the models some job reads it of):
    every model of a run then has its hidden states from the same attention kernels.

    Examples run in batches sorted by token length within windows of `sort_window` consecutive examples
    (capped at `sort_window_mb` of outputs; batching.plan_windows), and are written back in example
    order. `background_writer`: the writes run on a background thread while the next batches run
    (True), or in the main thread between batches (False); None: a thread on CUDA, where the host is
    otherwise idle while the GPU computes, the main thread on a CPU, where torch's threads already use
    the job's cores and a writer thread only contends with them (measured: README, Extraction speed).
    `autocast` (bfloat16, float16) runs the forward passes under CUDA autocast; asked for on another
    device, it is refused: the numbers would silently differ from a full-precision run's."""
    for name, value, allowed in (("dtype", dtype, STORAGE_DTYPES), ("attention_dtype", attention_dtype, STORAGE_DTYPES)):
        if value not in allowed:
            raise ValueError(f"storage {name} must be one of {allowed}; got {value!r}")
    unknown = sorted(set(poolings) - set(POOLINGS))
    if unknown:
        raise ValueError(f"unknown pooling(s) {unknown}; allowed: {', '.join(POOLINGS)}")
    check_autocast(autocast, device)
    if sort_window is not None and sort_window < 1 or not sort_window_mb > 0:
        raise ValueError(f"extraction.sort_window must be null or at least 1 (got {sort_window}) and "
                         f"extraction.sort_window_mb positive (got {sort_window_mb})")
    detail_splits = list(detail_splits or [])
    if sorted(set(detail_splits) - set(splits)):
        raise ValueError(f"detail split(s) {sorted(set(detail_splits) - set(splits))} are not extracted "
                         f"(extraction.splits = {splits}); add them there or drop them from extraction.detail_splits")
    if background_writer is None:
        background_writer = device.type == "cuda"
    out_path = Path(out_path)
    tokenizer = load_tokenizer(model_dir)
    model = load_encoder(model_dir, device, attention=attention)
    max_positions = getattr(model.config, "max_position_embeddings", None) or max_length
    if max_positions <= 0:  # XLNet's -1: relative positions, no length limit
        max_positions = max_length
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
    layers, width = n_layers(model.config) + 1, int(model.config.hidden_size)
    held = window_bytes(lengths, layers, width, dtype, len(poolings), tokens, detail)
    windows = plan_windows(lengths, batch_size, sort_window, held, sort_window_mb * 1e6)
    schedule = {
        "sort_window": int(sort_window) if sorting(sort_window, batch_size) else None,
        "sort_window_mb": float(sort_window_mb),
        "windows": len(windows),
        "window_mb_max": round(max(float(held[w.start:w.stop].sum()) for w in windows) / 1e6, 3),
        "padding": padding_summary(lengths, windows, batch_size),
        "autocast": autocast,
        "pinned_memory": device.type == "cuda",
        "writer": "background thread" if background_writer else "main thread",
    }

    with atomic_directory(out_path) as tmp:
        attrs = _write_store(tmp, model, examples, ids, word_ids, offsets, windows, device=device, dtype=dtype,
                             poolings=poolings, tokens=tokens, chunk_rows=chunk_rows, chunk_tokens=chunk_tokens,
                             detail=detail, autocast=autocast, background_writer=background_writer,
                             pad_id=int(tokenizer.pad_token_id), desc=f"extract {out_path.stem}")
        hashing = time.perf_counter()
        checksums = array_checksums(tmp)  # the arrays are complete: nothing writes them after this
        attrs["timing"]["checksum_seconds"] = round(time.perf_counter() - hashing, 3)
        attrs.update({
            CHECKSUMS: checksums,
            "truncated": truncated,
            "split_names": list(splits),
            "split_sizes": split_sizes,
            "max_length": int(max_length),
            "batch_size": int(batch_size),
            "batching": schedule,
            "tokenizer": type(tokenizer).__name__,
            "device": describe(device),
            "versions": versions(),
            **(provenance or {}),
        })
        zarr.open_group(tmp, mode="r+").attrs.update(attrs)
    return attrs


AUTOCAST = {None: None, "bfloat16": torch.bfloat16, "float16": torch.float16}


def check_autocast(autocast: str | None, device: torch.device) -> None:
    """Autocast is CUDA's only: on a CPU, bfloat16 matmuls are often slower than float32 and the numbers
    would differ from a full-precision run's without anyone having chosen so (device: auto falls back to
    the CPU where no GPU is found); refused, naming the key."""
    if autocast not in AUTOCAST:
        raise ValueError(f"extraction.autocast must be null, bfloat16 or float16; got {autocast!r}")
    if autocast is not None and device.type != "cuda":
        raise ValueError(f"extraction.autocast: {autocast} runs the forward passes in reduced precision on a CUDA "
                         f"device, but this job runs on {describe(device)}; set extraction.autocast: null for "
                         "full precision here (or run the job where device resolves to cuda)")


def window_bytes(lengths: np.ndarray, layers: int, width: int, dtype: str, n_poolings: int, tokens: bool,
                 detail: _Detail | None) -> np.ndarray:
    """Bytes each example's outputs take in the writer's window buffers (storage dtypes): its token rows,
    pooled rows, and the detail examples' word rows and attention maps."""
    rows = n_poolings + (lengths if tokens else np.zeros_like(lengths))
    if detail is not None:
        rows = rows + detail.n_words
    held = (rows * layers * width * np.dtype(dtype).itemsize).astype(np.float64)
    if detail is not None and detail.heads is not None:
        entries = (np.diff(detail.map_offsets) + np.diff(detail.word_map_offsets)) * (layers - 1) * detail.heads
        held += entries * np.dtype(detail.attention_dtype).itemsize
    return held


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


STORAGE = {"float16": torch.float16, "float32": torch.float32}
HOST_DTYPES = (torch.float16, torch.float32, torch.float64)  # what numpy can view
WRITER_QUEUE = 2  # batches waiting for the writer thread: bounds the memory the forward passes can run ahead by


@dataclass
class _Batch:
    """One batch's outputs on the host, as the writer thread gets them: `hidden` (one (batch, tokens, d) array
    per layer, padded; None without tokens) and `pooled` (name -> (layers, batch, d)) for the examples `rows`
    (in batch order, `lengths` tokens each); `detail`: (example, its word rows and maps); on CUDA, `event`
    completes when the non-blocking copies into the pinned arrays have landed (`keep`: their tensors)."""

    rows: np.ndarray
    lengths: np.ndarray
    hidden: list[np.ndarray] | None
    pooled: dict[str, np.ndarray]
    detail: list[tuple[int, tuple]]
    event: Any = None
    keep: Any = None


def _host_batch(rows, lengths, hidden, pooled, detail, tokens: bool, dtype: str, device) -> _Batch:
    """Outputs to the host. On CUDA: cast to the storage dtype on the device, copied without blocking into
    pinned memory, an event recorded after the copies. On the CPU: views of the tensors themselves; the
    writer casts them as it copies them into its window."""
    if device.type != "cuda":
        arrays = [(h if h.dtype in HOST_DTYPES else h.float()).numpy() for h in hidden] if tokens else None
        return _Batch(rows, lengths, arrays, {k: v.numpy() for k, v in pooled.items()}, detail, keep=hidden)
    storage = STORAGE[dtype]
    keep = {}
    if tokens:
        keep["hidden"] = torch.empty((len(hidden), *hidden[0].shape), dtype=storage, pin_memory=True)
        for layer, values in zip(keep["hidden"], hidden):
            layer.copy_(values.to(storage), non_blocking=True)
    for name, values in pooled.items():
        keep[name] = torch.empty(values.shape, dtype=storage, pin_memory=True)
        keep[name].copy_(values.to(storage), non_blocking=True)
    event = torch.cuda.Event()
    event.record()
    return _Batch(rows, lengths, list(keep["hidden"].numpy()) if tokens else None,
                  {name: keep[name].numpy() for name in pooled}, detail, event, keep)


class _WindowSink:
    """The writer's side (its background thread, or the main thread between batches). Holds one window's
    outputs in the storage dtype (buffers sized for the largest window and reused), puts each batch's rows at
    their examples' places, and hands the window, in example order, to the chunk-aligned writers, whose Zarr
    writes compress the chunks."""

    def __init__(self, pooled_writers: dict[str, _BlockWriter], token_writer: _BlockWriter | None,
                 detail_writers: dict[str, _BlockWriter], offsets: np.ndarray, windows, layers: int, width: int,
                 dtype: str):
        self.pooled_writers, self.token_writer, self.detail_writers = pooled_writers, token_writer, detail_writers
        self.offsets = offsets
        most_examples = max(w.stop - w.start for w in windows)
        most_tokens = max(int(offsets[w.stop] - offsets[w.start]) for w in windows)
        self.pooled = {name: np.empty((layers, most_examples, width), dtype) for name in pooled_writers}
        self.tokens = None if token_writer is None else np.empty((layers, most_tokens, width), dtype)
        self.start = self.stop = 0
        self.details: dict[int, tuple] = {}

    def begin(self, start: int, stop: int) -> None:
        self.start, self.stop, self.details = start, stop, {}

    def batch(self, batch: _Batch) -> None:
        if batch.event is not None:
            batch.event.synchronize()  # the copies into pinned memory have landed
        local = batch.rows - self.start
        for name, values in batch.pooled.items():
            self.pooled[name][:, local] = values
        if self.tokens is not None:
            places = list(zip((self.offsets[batch.rows] - self.offsets[self.start]).tolist(), batch.lengths.tolist()))
            for window_layer, layer in zip(self.tokens, batch.hidden):
                for row, (start, length) in enumerate(places):
                    window_layer[start:start + length] = layer[row, :length]
        self.details.update(batch.detail)

    def end(self) -> None:
        size = self.stop - self.start
        for name, writer in self.pooled_writers.items():
            writer.append(self.pooled[name][:, :size])
        if self.token_writer is not None:
            self.token_writer.append(self.tokens[:, :int(self.offsets[self.stop] - self.offsets[self.start])])
        for example in range(self.start, self.stop):
            for name, values in zip(("words", "maps", "word_maps"), self.details.pop(example, ())):
                if values is not None:
                    self.detail_writers[name].append(values)

    def close(self) -> None:
        for writer in (*self.pooled_writers.values(), *filter(None, [self.token_writer]), *self.detail_writers.values()):
            writer.close()


def _write_store(tmp: Path, model, examples: pd.DataFrame, ids, word_ids, offsets, windows, *, device, dtype,
                 poolings, tokens, chunk_rows, chunk_tokens, detail, autocast, background_writer, pad_id,
                 desc) -> dict[str, Any]:
    """Write arrays into the group at `tmp`; return the attrs describing what was written."""
    n, layers, width = len(ids), n_layers(model.config) + 1, int(model.config.hidden_size)
    root = zarr.open_group(tmp, mode="w")
    pooled_group = root.create_group("pooled")
    writers = {
        name: _BlockWriter(
            pooled_group.create_array(name, shape=(layers, n, width), chunks=(1, min(chunk_rows, n), width),
                                      dtype=dtype, **ACTIVATION_ARRAY),
            chunk_rows,
        )
        for name in poolings
    }
    token_writer = None
    if tokens:
        token_group = root.create_group("tokens")
        n_tokens = int(offsets[-1])
        token_writer = _BlockWriter(
            token_group.create_array(
                "hidden", shape=(layers, n_tokens, width), chunks=(1, min(chunk_tokens, n_tokens), width), dtype=dtype,
                **ACTIVATION_ARRAY,
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
    sink = _WindowSink(writers, token_writer, detail_writers, offsets, windows, layers, width, dtype)
    lengths = np.diff(offsets)
    nonfinite = torch.zeros((), dtype=torch.bool, device=device)

    started = time.perf_counter()
    bar = progress(total=n, unit="ex", desc=desc)
    with torch.inference_mode(), BackgroundWriter(WRITER_QUEUE, threaded=background_writer) as writer:
        for window in windows:
            writer.submit(sink.begin, window.start, window.stop)
            for rows in window.batches:
                inputs = batch_inputs(ids, rows, pad_id, device)
                mask = inputs["attention_mask"]
                chosen = [] if detail is None else [(p, int(r)) for p, r in enumerate(rows) if detail.mask[r]]
                maps_wanted = bool(chosen) and detail.heads is not None
                with torch.autocast(device.type, dtype=AUTOCAST[autocast], enabled=autocast is not None):
                    output = model(**inputs, output_hidden_states=True, output_attentions=maps_wanted)
                hidden = output.hidden_states  # one (batch, tokens, d) per layer
                views = pool(hidden, mask, poolings if autocast is None else {*poolings, "mean"})
                if autocast is not None:  # a NaN or inf in any token reaches its example's mean
                    nonfinite |= ~torch.isfinite(views["mean"]).all()
                rows_detail = []
                for p, r in chosen:  # this example's own tokens (right padding: the first t)
                    t = int(lengths[r])
                    own = torch.stack([h[p, :t] for h in hidden])
                    maps = torch.stack([a[p][:, :t, :t] for a in output.attentions]) if maps_wanted else None
                    rows_detail.append((r, _detail_rows(own, maps, r, np.asarray(word_ids[r]), detail, dtype)))
                views = {name: views[name] for name in poolings}
                writer.submit(sink.batch, _host_batch(rows, lengths[rows], hidden, views, rows_detail, tokens, dtype,
                                                      device))
                del output, hidden, views
                bar.update(len(rows))
            writer.submit(sink.end)
        writer.submit(sink.close)
    bar.close()
    loop_seconds = time.perf_counter() - started
    if bool(nonfinite):
        raise FloatingPointError(f"hidden states that are NaN or infinite under extraction.autocast: {autocast}; "
                                 "use bfloat16 (float16 overflows past 65504) or null")
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
        "seconds": round(loop_seconds, 3),
        "examples_per_second": round(n / max(loop_seconds, 1e-9), 2),
        "tokens_per_second": round(int(offsets[-1]) / max(loop_seconds, 1e-9), 1),
        "timing": {"writer_busy_seconds": round(writer.busy, 3),  # un-permuting, casting, Zarr writes
                   "forward_waited_seconds": round(writer.blocked, 3)},  # on the writer's full queue
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
        settings = ACTIVATION_ARRAY if key == "words" else {"compressors": COMPRESSORS}  # attention maps shrink
        array = g.create_array(name, shape=shape, chunks=tuple(chunks), dtype=kind, **settings)
        offset_name = "offsets" if name in ("hidden", "maps") else "word_offsets"
        g.create_array(offset_name, shape=offsets.shape, chunks=offsets.shape, dtype="int64",
                       compressors=COMPRESSORS)[:] = offsets
        writers[key] = _BlockWriter(array, chunks[axis], axis=axis)
    return writers

