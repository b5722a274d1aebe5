"""One model's terms for every pair it is in (rule model_terms; docs/numerics.md §9.4).

What the configured measures' values, nulls and intervals need of one model's rows alone (its sides,
reprsim.metrics.prepared: Gram self terms and half-sample terms, principal directions, neighbour lists) is
computed once per model, dataset, representation and split, and stored; every pair job of the model reads it
(:func:`stored_sides`). The store records the rows it rests on (:func:`reprsim.stages.compare.rows.rows_digest`),
the layers (constant layers are left out, as in every pair) and the half-samples; a pair job whose rows differ
(at word level, a word the other model's tokens did not reach) prepares that model's terms itself.

Centred Gram matrices are stored while a model's fit in reprsim.workflow.pair_work.GRAM_STORE_BYTES (64 MiB:
up to about 1,000 rows at 7 layers); larger ones are rebuilt by each pair job from the rows, one product per
layer, where storing them would take L·n²·8 bytes per model (7 layers of 1,921 words: 207 MB; 13 layers of
10,000 rows: 10 GB).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from reprsim.design import conditioning
from reprsim.inference.resampling import half_samples
from reprsim.io.device import describe, resolve_device
from reprsim.io.integrity import CorruptOutputError
from reprsim.io.store import open_store, pooled_rows
from reprsim.io.terms import read_terms, write_terms
from reprsim.metrics import cka, prepared
from reprsim.metrics._inputs import constant_layers
from reprsim.metrics.pair_engine import on_device
from reprsim.stages.compare.rows import chosen_words, model_word_rows, rows_digest, split_rows_digest
from reprsim.workflow.pair_work import GRAM_STORE_BYTES


def families(measures: dict[str, dict]) -> list[str]:
    """The side families of the configured measures (reprsim.metrics.prepared.family), each once. A conditioned
    measure's sides rest on conditioned rows, which its pair job prepares itself (reprsim.metrics.pair_engine)."""
    keys = {prepared.family(spec["measure"], spec.get("params", {})) for spec in measures.values()
            if conditioning.is_none(spec)}
    return sorted(key for key in keys if key is not None)


def half_sample_count(measures: dict[str, dict], intervals: dict) -> int:
    """Half-samples a pair job of these measures draws: the most any measure asks for (compare_pair's rule)."""
    return max([int(intervals["resamples"])] + [int(spec.get("resamples") or 0) for spec in measures.values()])


def model_rows(store, representation: str, split: str, words: dict | None) -> tuple[np.ndarray, str]:
    """One model's rows of a comparison (layers, n, d) and their digest: the pooled rows of `split`, or the words
    of the chosen sentences (reprsim.stages.compare.rows.chosen_words) that a token of this model reached."""
    if representation != "word":
        return pooled_rows(store, representation, split), split_rows_digest(store, split)
    words = {"max_words": None, "seed": 0, **(words or {})}
    chosen = chosen_words(store, split, words["max_words"], int(words["seed"]))
    X, _, reached = model_word_rows(store, chosen)
    return X[:, reached], rows_digest(chosen, reached)


def model_terms(store_path: str | Path, out_path: str | Path, *, representation: str, split: str,
                measures: dict[str, dict], intervals: dict, words: dict | None = None, device: str = "cpu") -> dict:
    """Compute and write one model's terms store; returns its attributes."""
    store = open_store(store_path)
    rows, digest = model_rows(store, representation, split, words)
    kept = np.flatnonzero(~constant_layers(rows))
    target = resolve_device(device)
    stack = on_device(rows[kept], target)
    L, n, d = stack.shape
    seed = int(intervals["seed"])
    count = half_sample_count(measures, intervals)
    indices = torch.as_tensor(half_samples(n, count, seed), device=target)
    arrays, stored, shared = {}, [], {}
    for key in families(measures):
        if prepared.kind_of(key) == "gram" and not cka.grams_fit(stack.shape, stack.shape):
            print(f"{key}: {L} layers of {n} rows do not fit in memory; pair jobs recompute per draw", flush=True)
            continue
        side = prepared.prepare(stack, key, indices, shared)
        if prepared.kind_of(key) == "gram" and L * n * n * 8 > GRAM_STORE_BYTES:
            side.pop("kc")  # rebuilt by each pair job (module docstring)
        arrays.update({f"{key}/{name}": array for name, array in prepared.to_arrays(side, key).items()})
        stored.append(key)
        size = sum(array.nbytes for name, array in arrays.items() if name.startswith(key + "/"))
        print(f"{store.attrs['model']}: {key} prepared ({size / 1e6:.1f} MB)", flush=True)
    attrs = {"model": store.attrs["model"], "dataset": store.attrs["dataset"], "representation": representation,
             "split": split, "rows": digest, "n": n, "d": d, "layers": kept.tolist(), "families": stored,
             "half_samples": {"count": count, "seed": seed, "rows_per_resample": int(indices.shape[1])},
             "device": describe(target)}
    write_terms(out_path, arrays, attrs)
    return attrs


def _slice_half_samples(side: dict, key: str, count: int) -> dict:
    if prepared.kind_of(key) == "basis":
        return side
    return {name: value[:count] if name.startswith("rep_") else value for name, value in side.items()}


def stored_sides(path: str | Path | None, digest: str, kept: np.ndarray, indices: np.ndarray, seed: int, device,
                 model: str, read=read_terms) -> dict[str, dict]:
    """The sides a pair job can take from a model's terms store at `path` (None: none), by family: those resting
    on the job's rows (`digest`), layers (`kept`) and half-samples (`indices`, drawn with `seed`), on `device`.
    `read` reads the store (a block's pair job passes one that reads each model's store once)."""
    if path is None:
        return {}
    arrays, attrs = read(path)
    count = len(indices)
    reasons = [reason for reason, differs in (
        ("rows", attrs["rows"] != digest), ("layers", list(attrs["layers"]) != [int(i) for i in kept]),
        ("half-samples", attrs["half_samples"]["seed"] != seed or attrs["half_samples"]["count"] < count
         or attrs["half_samples"]["rows_per_resample"] != indices.shape[1])) if differs]
    if reasons:
        print(f"{model}: its terms store {path} rests on other {', '.join(reasons)}; its terms are prepared here",
              flush=True)
        return {}
    sides = {}
    for key in attrs["families"]:
        prefix = f"{key}/"
        own = {name[len(prefix):]: array for name, array in arrays.items() if name.startswith(prefix)}
        if not own:
            raise CorruptOutputError(Path(path), f"family {key} is listed but holds no arrays")
        sides[key] = _slice_half_samples(prepared.from_arrays(own, key, device), key, count)
    return sides
