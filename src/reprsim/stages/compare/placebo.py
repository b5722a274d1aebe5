"""The dimension placebo's pair job (rule dimension_placebo): one model's layers reduced to fewer dimensions and
compared with another model's, as a pair job compares two stores (reprsim.stages.compare.pairs), the reduced copy
named as a model of its own. Its own module, so that a pair job's code, and so every pair table, does not depend on
it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reprsim.io.store import open_store, pooled_rows
from reprsim.metrics.pair_engine import DEFAULT_INTERVALS, compare_stacks
from reprsim.metrics.reduction import reduce_stack
from reprsim.stages.compare.pairs import pair_device
from reprsim.stages.compare.rows import check_same_rows, split_rows_digest
from reprsim.stages.compare.terms import stored_sides


def compare_reduced(store_a_path: str | Path, store_b_path: str | Path, *, reduce: dict, representation: str,
                    split: str, measures: dict[str, dict], chance: dict | None = None,
                    intervals: dict | None = None, device: str = "cpu", max_memory_gb: float | None = None,
                    terms_b: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """compare_pair's table and replicates for the first model's pooled layers reduced by `reduce` ({method, dims,
    seed, name}: reprsim.metrics.reduction.reduce_stack, in float64, kept in the stored dtype) and named `name`,
    against the second model's as stored (its terms store read where it rests on these rows); the two named in
    sorted order, as every pair table names them."""
    store_a, store_b = open_store(store_a_path), open_store(store_b_path)
    model_a, model_b = store_a.attrs["model"], store_b.attrs["model"]
    check_same_rows(store_a, store_b, split, (model_a, model_b))
    stored = pooled_rows(store_a, representation, split)
    Xs = reduce_stack(torch.as_tensor(np.asarray(stored), dtype=torch.float64), reduce["method"], int(reduce["dims"]),
                      int(reduce.get("seed", 0))).numpy().astype(stored.dtype)
    Ys = pooled_rows(store_b, representation, split)
    print(f"{model_a} reduced to {reduce['dims']} dims by {reduce['method']}: {reduce['name']}", flush=True)
    digest, target = split_rows_digest(store_a, split), pair_device(device)
    seed = int({**DEFAULT_INTERVALS, **(intervals or {})}["seed"])

    # a pair table names its models in sorted order (the study looks pairs up so): the reduced copy on the side its
    # name sorts to
    first = reduce["name"] < model_b
    stacks, names = ((Xs, Ys), (reduce["name"], model_b)) if first else ((Ys, Xs), (model_b, reduce["name"]))
    stored_side = 1 if first else 0

    def from_terms(side: int, kept: np.ndarray, indices: np.ndarray) -> dict:
        # the reduced copy's terms are prepared here: its terms store holds the stored rows'
        return stored_sides(terms_b, digest, kept, indices, seed, target, model_b) if side == stored_side else {}

    table, long = compare_stacks(*stacks, names=names, measures=measures, chance=chance, intervals=intervals,
                                 device=target, max_memory_gb=max_memory_gb, stored_sides=from_terms)
    table.insert(len(table.columns) - 1, "split", split)
    for frame in (table, long):
        frame.insert(0, "dataset", store_a.attrs["dataset"])
        frame.insert(1, "representation", representation)
    return table, long
