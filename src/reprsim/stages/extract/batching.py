"""Batches for extraction: examples sorted by token length within windows of consecutive examples.

A batch is padded to its longest example, so batches of similar lengths waste little of the forward
pass on padding. Sorting the whole dataset would scatter every example's outputs across the run; a
window of `sort_window` consecutive examples is sorted instead, its batches are run, and its outputs
are put back in example order before they are written (activations.py), so the store keeps
example i of the split order at row i. The window is also capped in bytes (`window_bytes`): the
outputs of one window are what the writer holds in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Window:
    """Examples start..stop-1 (split order) and the batches they run in: arrays of example indices."""

    start: int
    stop: int
    batches: tuple[np.ndarray, ...]


def sorting(sort_window: int | None, batch_size: int) -> bool:
    """Whether windows are sorted: a window of at most one batch has nothing to reorder."""
    return sort_window is not None and sort_window > batch_size


def plan_windows(lengths: np.ndarray, batch_size: int, sort_window: int | None,
                 example_bytes: np.ndarray | None = None, window_bytes: float | None = None) -> list[Window]:
    """Windows of consecutive examples covering 0..n-1, and their batches.

    Unsorted (`sort_window` null or at most `batch_size`): one window per batch of `batch_size`
    consecutive examples, the batching of earlier reprsim versions. Sorted: windows of `sort_window`
    examples, ended early where the outputs of their examples (`example_bytes`) would pass
    `window_bytes` (then kept a whole number of batches, and at least one); within a window the
    examples are ordered by token length, longest first (stable: ties keep split order), and cut
    into batches of `batch_size` (the window's last batch may be smaller).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1; got {batch_size}")
    if not sorting(sort_window, batch_size):
        return [Window(s, min(s + batch_size, n), (np.arange(s, min(s + batch_size, n)),))
                for s in range(0, n, batch_size)]
    cumulative = None if example_bytes is None or window_bytes is None else np.concatenate(
        [[0], np.cumsum(np.asarray(example_bytes, dtype=np.float64))])
    windows, start = [], 0
    while start < n:
        stop = min(n, start + sort_window)
        if cumulative is not None:
            fit = int(np.searchsorted(cumulative, cumulative[start] + window_bytes, side="right")) - 1 - start
            if fit < stop - start:  # the byte cap binds: whole batches, at least one
                stop = start + min(n - start, max(batch_size, (fit // batch_size) * batch_size))
        order = start + np.argsort(-lengths[start:stop], kind="stable")
        windows.append(Window(start, stop, tuple(order[i:i + batch_size] for i in range(0, len(order), batch_size))))
        start = stop
    return windows


def padded_tokens(lengths: np.ndarray, batches) -> int:
    """Token positions the forward passes compute: each batch is as long as its longest example."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return int(sum(len(rows) * int(lengths[rows].max()) for rows in batches))


def padding_summary(lengths: np.ndarray, windows: list[Window], batch_size: int) -> dict[str, float | int]:
    """Tokens kept, the positions computed by these batches and by consecutive (unsorted) batches, and
    the fraction of positions that were padding in each case."""
    lengths = np.asarray(lengths, dtype=np.int64)
    tokens = int(lengths.sum())
    padded = padded_tokens(lengths, [rows for window in windows for rows in window.batches])
    unsorted = padded_tokens(lengths, [np.arange(s, min(s + batch_size, len(lengths)))
                                       for s in range(0, len(lengths), batch_size)])
    return {"tokens": tokens, "padded_tokens": padded, "unsorted_padded_tokens": unsorted,
            "padding_fraction": round(1 - tokens / padded, 4),
            "unsorted_padding_fraction": round(1 - tokens / unsorted, 4)}


def batch_inputs(ids: list[list[int]], rows: np.ndarray, pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
    """input_ids and attention_mask of the examples `rows`, right-padded with `pad_id` to the longest (what
    tokenizer.pad(padding=True) gives, without its per-call overhead). On CUDA they go through pinned memory
    without blocking: a blocking copy would wait for the previous batch's forward pass to finish, so the
    host could not queue the next one meanwhile."""
    lengths = np.fromiter((len(ids[r]) for r in rows), dtype=np.int64, count=len(rows))
    width = int(lengths.max())
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    for i, r in enumerate(rows):
        input_ids[i, :lengths[i]] = ids[r]
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    inputs = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask)}
    if device.type == "cuda":
        return {k: v.pin_memory().to(device, non_blocking=True) for k, v in inputs.items()}
    return {k: v.to(device) for k, v in inputs.items()}
