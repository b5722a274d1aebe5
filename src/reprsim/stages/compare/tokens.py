"""Token-level similarity streamed from two activation stores (Brown et al. 2023: minibatch CKA on tokens).

Token rows of two stores correspond only when both models tokenised the inputs the
same way; that is checked, not assumed. Batches are consecutive runs of `batch_size`
tokens read straight from the Zarr chunks, so memory stays that of a few batches
whatever the number of tokens.

:func:`token_cka_table` gives every layer pair's value as every similarity of this project comes
(the columns of :mod:`reprsim.stages.compare.pairs`' pair table):

- n is the number of tokens used (whole batches; the remainder is dropped and reported);
- the interval comes from half-samples of the batches (:mod:`reprsim.inference.resampling`): each batch's
  HSIC₁ terms are kept, so the CKA of a subset of batches is a sum away;
- the chance level is the same minibatch CKA with B's batches paired to A's shifted by s batches
  (batch b of A with batch (b + s) mod T of B, T batches), for a few shifts s spread over 1..T−1: the
  token correspondence is broken while each side's own statistics (its self terms) stay as they are.
  null_mean and null_std are over the shifts, null_p = (1 + #{shifts with a value ≥ the observed
  one}) / (1 + shifts).
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reprsim.inference import best_match
from reprsim.inference.resampling import beyond_chance, half_samples, interval
from reprsim.io.logs import progress
from reprsim.io.store import open_store, split_examples
from reprsim.metrics.cka import MinibatchHSIC

NULL = "batch-shifted pairing: batch b of A with batch (b + s) mod T of B, for each shift s"
INTERVAL = "half-sample of batches (m = T/2 batches without replacement), t interval from their spread"
# a reader keeps the zarr chunks around its batch while it moves through them, when they are at most this big
CACHE_BYTES = 1 << 26


class _Batches:
    """Batch b (rows start + b·size …) of a (L, n_tokens, d) token array. The whole chunks that hold a batch are
    read once and kept while the next batches fall inside them (a zarr read decodes whole chunks anyway)."""

    def __init__(self, array, start: int, size: int):
        self.array, self.start, self.size = array, start, size
        self.chunk = int(array.chunks[1])
        self.block: tuple[int, int, np.ndarray] | None = None

    def __getitem__(self, b: int) -> np.ndarray:
        low = self.start + b * self.size
        high = low + self.size
        if self.block is not None and self.block[0] <= low and high <= self.block[1]:
            return self.block[2][:, low - self.block[0]:high - self.block[0]]
        first = (low // self.chunk) * self.chunk
        last = min(-(-high // self.chunk) * self.chunk, self.array.shape[1])
        layers, _, width = self.array.shape
        if layers * (last - first) * width * np.dtype(self.array.dtype).itemsize > CACHE_BYTES:
            self.block = None
            return self.array[:, low:high]
        self.block = (first, last, self.array[:, first:last])
        return self.block[2][:, low - first:high - first]


def chance_shifts(n_batches: int, count: int) -> list[int]:
    """`count` batch shifts evenly spaced in 1..n_batches−1 (fewer when there are fewer shifts to take)."""
    if n_batches < 2 or count < 1:
        return []
    return sorted({int(s) for s in np.round(np.linspace(1, n_batches - 1, count))})


def _token_range(store, split: str | None) -> tuple[int, int]:
    """[start, end) of the token rows of `split` (examples are stored split by split); every token when None."""
    offsets = store["tokens/offsets"][:]
    if split is None:
        return 0, int(offsets[-1])
    rows = split_examples(store, split)
    if not len(rows) or not np.array_equal(rows, np.arange(rows[0], rows[-1] + 1)):
        raise ValueError(f"store {store.path}: the {split!r} examples are not one run of rows")
    return int(offsets[rows[0]]), int(offsets[rows[-1] + 1])


def _check_same_tokens(store_a, store_b) -> None:
    ids_a, ids_b = store_a["tokens/input_ids"], store_b["tokens/input_ids"]
    if ids_a.shape != ids_b.shape or not np.array_equal(ids_a[:], ids_b[:]):
        names = [store.attrs.get("model") or Path(store.path).stem for store in (store_a, store_b)]
        tokenizers = [store.attrs.get("tokenizer", "?") for store in (store_a, store_b)]
        raise ValueError(
            f"{names[0]} ({tokenizers[0]}, {ids_a.shape[0]} tokens) and {names[1]} ({tokenizers[1]}, "
            f"{ids_b.shape[0]} tokens): the two stores tokenised the inputs differently; token rows do not "
            "correspond. Token-level CKA needs models that share a tokenizer; compare these at word level "
            "(after sub-word aggregation) instead"
        )
    same = store_a.attrs.get("split_names") == store_b.attrs.get("split_names") and all(
        np.array_equal(store_a[name][:], store_b[name][:]) for name in ("tokens/offsets", "examples/split", "examples/row"))
    if not same:
        raise ValueError(f"{store_a.path} and {store_b.path} were extracted on different examples; token rows do not "
                         "correspond: re-extract both with the same settings")


def stream_token_hsic(
    store_a_path: str | Path, store_b_path: str | Path, batch_size: int = 1024, kernel: str = "linear",
    threshold: float = 1.0, max_tokens: int | None = None, split: str | None = None, shifts: int = 0,
    device: str = "cpu",
) -> tuple[MinibatchHSIC, dict[int, torch.Tensor], dict]:
    """Stream both stores' token hidden states once: the minibatch HSIC accumulator with every batch's terms
    kept, the cross HSIC₁ summed over batches of each shifted pairing (shift -> (L_a, L_b)), and what was used.

    `split` restricts the tokens to that split's examples (None: every token stored); `max_tokens` takes the
    first ones. Each batch of A is paired with B's batch b and B's batches b + s (mod T) for `shifts` shifts
    (:func:`chance_shifts`); a shifted batch's Gram is built from its rows again, so memory holds a few
    batches (and the chunks around them, at most CACHE_BYTES per reader), never all of them.
    """
    store_a, store_b = open_store(store_a_path), open_store(store_b_path)
    for store, path in ((store_a, store_a_path), (store_b, store_b_path)):
        if "tokens/hidden" not in store:
            raise KeyError(f"{path} has no token-level hidden states; extract with tokens: true")
    _check_same_tokens(store_a, store_b)
    start, end = _token_range(store_a, split)
    available = end - start
    n_tokens = available if max_tokens is None else min(int(max_tokens), available)
    batches = n_tokens // batch_size
    if batches < 1:
        raise ValueError(f"batch_size {batch_size} exceeds the {n_tokens} tokens available"
                         + (f" in the {split!r} split" if split else ""))
    moves = chance_shifts(batches, shifts)
    hidden_a, hidden_b = store_a["tokens/hidden"], store_b["tokens/hidden"]
    read_a, read_b = _Batches(hidden_a, start, batch_size), _Batches(hidden_b, start, batch_size)
    shifted = {s: _Batches(hidden_b, start, batch_size) for s in moves}  # each shift reads B in its own order
    accumulator = MinibatchHSIC(kernel, threshold, keep_batches=True)
    null_cross: dict[int, torch.Tensor] = {}

    def terms(rows: np.ndarray, name: str):
        return accumulator.terms(torch.from_numpy(np.asarray(rows)), torch.device(device), name=name)

    for b in progress(range(batches), unit="batch", desc="token CKA"):
        terms_a = terms(read_a[b], "A")
        accumulator.add_terms(terms_a, terms(read_b[b], "B"))
        for s, reader in shifted.items():
            cross = accumulator.pair_hsic(terms_a, terms(reader[(b + s) % batches], "B"))
            null_cross[s] = null_cross[s] + cross if s in null_cross else cross
    used = {"split": split, "batch_size": batch_size, "n_batches": batches, "n_tokens": batches * batch_size,
            "tokens_available": available, "tokens_considered": n_tokens,
            "dropped_tokens": n_tokens - batches * batch_size, "shifts": moves, "kernel": kernel,
            "threshold": threshold, "estimator": "unbiased-minibatch", "store_a": store_a, "store_b": store_b}
    return accumulator, null_cross, used


def token_minibatch_cka(
    store_a_path: str | Path, store_b_path: str | Path, batch_size: int = 1024, kernel: str = "linear",
    threshold: float = 1.0, max_tokens: int | None = None, device: str = "cpu", split: str | None = None,
) -> tuple[np.ndarray, dict]:
    """Unbiased minibatch CKA for every layer pair over the stores' token-level hidden states."""
    accumulator, _, used = stream_token_hsic(store_a_path, store_b_path, batch_size, kernel, threshold, max_tokens,
                                             split, device=device)
    meta = {"measure": "cka_minibatch", "kind": "similarity", "kernel": kernel, "estimator": "unbiased-minibatch",
            "batch_size": batch_size, "n_batches": used["n_batches"], "n_tokens": used["tokens_considered"],
            "dropped_tokens": used["dropped_tokens"]}
    return accumulator.cka().cpu().numpy(), meta


def _cka(cross: torch.Tensor, self_x: torch.Tensor, self_y: torch.Tensor) -> np.ndarray:
    denominator = torch.sqrt(torch.outer(self_x, self_y))  # NaN when an unbiased self term is negative
    return torch.where(denominator > 0, cross / denominator, torch.full_like(cross, float("nan"))).cpu().numpy()


def _best_matches(value: np.ndarray, draws: np.ndarray | None, accumulator, batches: int, intervals: dict) -> dict:
    """Each layer of A's best match in B, as the pair tables give it (reprsim.inference.best_match): the p of the best against
    the shifted pairings' best (each shift pairs every layer pair alike), and the layer chosen on half the batches,
    its value and interval on the other half (half-samples of those batches; 8 batches at least)."""
    out = {column: np.zeros(value.shape, dtype=bool) if column in ("is_best", "split_best") else
           np.full(value.shape, np.nan) for column in best_match.COLUMNS}
    index, _ = best_match.best_of(value, "similarity")
    if draws is not None:
        _, p = best_match.selection_p(value[None], draws[:, None], "similarity")
        out["selection_p"][:] = p[0][:, None]
    for i, j in enumerate(index):
        if j >= 0:
            out["is_best"][i, j] = True
    if batches < 8:
        return out
    select, estimate = best_match.split_rows(batches, int(intervals["seed"]))
    chosen, _ = best_match.best_of(accumulator.cka(select).cpu().numpy(), "similarity")
    values = accumulator.cka(estimate).cpu().numpy()
    indices = half_samples(len(estimate), int(intervals["resamples"]), int(intervals["seed"]))
    replicates = np.stack([accumulator.cka(estimate[rows]).cpu().numpy() for rows in indices])
    low, high = interval(values, replicates, len(estimate), indices.shape[1], float(intervals["confidence"]))
    for i, j in enumerate(chosen):
        if j >= 0:
            out["split_best"][i, j] = True
            out["split_value"][i, j], out["split_low"][i, j], out["split_high"][i, j] = (
                values[i, j], low[i, j], high[i, j])
    return out


def token_cka_table(
    store_a_path: str | Path, store_b_path: str | Path, *, split: str | None, batch_size: int = 512,
    kernel: str = "linear", max_tokens: int | None = None, shifts: int = 5, intervals: dict | None = None,
    threshold: float = 1.0, device: str = "cpu",
) -> pd.DataFrame:
    """Minibatch CKA of every layer pair over the tokens both models share, with its chance level (batch-shifted
    pairings), its half-sample interval over batches and n = the tokens used: a table with the columns of the
    pair table (representation "token", measure "cka_minibatch").

    `intervals` is similarity.intervals ({resamples, confidence, seed}). Raises ValueError when the two stores
    tokenised the inputs differently (models with different tokenizers: compare them at word level).
    """
    intervals = {"resamples": 100, "confidence": 0.95, "seed": 0, **(intervals or {})}
    accumulator, null_cross, used = stream_token_hsic(store_a_path, store_b_path, batch_size, kernel, threshold,
                                                      max_tokens, split, shifts, device)
    store_a, store_b = used.pop("store_a"), used.pop("store_b")
    kept = accumulator.kept()
    total_x, total_y = kept["self_x"].sum(dim=0), kept["self_y"].sum(dim=0)
    value = _cka(kept["cross"].sum(dim=0), total_x, total_y)
    batches, moves = used["n_batches"], used["shifts"]
    notes = []

    if moves:
        draws = np.stack([_cka(null_cross[s].to("cpu", torch.float64), total_x, total_y) for s in moves])
        with warnings.catch_warnings():  # an undefined cell (NaN in every draw) stays NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            null_mean, null_std = np.nanmean(draws, axis=0), np.nanstd(draws, axis=0)
        null_p = (1 + (draws >= value).sum(axis=0)) / (1 + len(moves))
    else:
        null_mean = null_std = null_p = np.full(value.shape, np.nan)
        notes.append("one batch: no shifted pairing, no chance level")

    resamples = int(intervals["resamples"])
    if batches >= 4:
        indices = half_samples(batches, resamples, int(intervals["seed"]))
        replicates = np.stack([accumulator.cka(rows).cpu().numpy() for rows in indices])
        low, high = interval(value, replicates, batches, indices.shape[1], float(intervals["confidence"]))
        per_resample = int(indices.shape[1])
    else:
        low = high = np.full(value.shape, np.nan)
        per_resample = None
        notes.append(f"{batches} batches: half-samples need at least 4, no interval")

    best = _best_matches(value, draws if moves else None, accumulator, batches, intervals)

    described = {"method": INTERVAL, "resamples": resamples, "batches_per_resample": per_resample,
                 "confidence": float(intervals["confidence"]), "seed": int(intervals["seed"])}
    meta = {**{k: v for k, v in used.items() if k not in ("kernel", "batch_size")}, "null": NULL,
            "interval": described, "tokenizer": store_a.attrs.get("tokenizer")}
    params = json.dumps({"kernel": kernel, "batch_size": batch_size}, sort_keys=True)
    rows = []
    for (i, j), v in np.ndenumerate(value):
        warning = list(notes)
        if not math.isfinite(v):
            warning.append("undefined: a layer's unbiased self-similarity is not positive")
        rows.append({
            "layer_a": i, "layer_b": j, "measure": "cka_minibatch", "kind": "similarity", "direction": "symmetric",
            "params": params, "value": float(v), "n_permutations": len(moves), "null_mean": float(null_mean[i, j]),
            "null_std": float(null_std[i, j]), "null_p": float(null_p[i, j]), "ci_low": float(low[i, j]),
            "ci_high": float(high[i, j]), "n_resamples": resamples,
            "beyond_chance": bool(beyond_chance("similarity", low[i, j], high[i, j], null_mean[i, j])),
            "warning": "; ".join(warning), "meta": json.dumps(meta, sort_keys=True, default=str),
            **{column: best[column][i, j] for column in best_match.COLUMNS},
        })
    table = pd.DataFrame(rows).assign(split=split, n=used["n_tokens"])
    for position, (column, value_) in enumerate((
            ("dataset", store_a.attrs.get("dataset")), ("representation", "token"),
            ("model_a", store_a.attrs.get("model", Path(store_a_path).stem)),
            ("model_b", store_b.attrs.get("model", Path(store_b_path).stem)))):
        table.insert(position, column, value_)
    return table
