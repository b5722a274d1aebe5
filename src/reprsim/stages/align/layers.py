"""The aligner stage over activation stores (Ren et al. 2023, §4.3 and §4.4): tidy tables per model pair.

The fit / select / score splits of the config become the aligners' "train" / "val" /
"test" row blocks; scores on the score split are the headline, the fit split is scored
too for reference (their Table 4 reports both).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.aligners.evaluate import align_pair
from reprsim.aligners.synthetic import synthetic_recovery
from reprsim.io.logs import progress
from reprsim.io.store import open_store, pooled_rows
from reprsim.tables.layers import layer_pairs

ROLES = {"fit": "train", "select": "val", "score": "test"}


def layer_splits(store_path: str | Path, pooling: str, splits: dict[str, str]) -> dict[str, np.ndarray]:
    """{"train", "val", "test"} → (layers, rows, d) arrays of the configured fit / select / score splits."""
    store = open_store(store_path)
    return {ROLES[role]: pooled_rows(store, pooling, split) for role, split in splits.items()}


def _at(blocks: dict[str, np.ndarray], layer: int) -> dict[str, np.ndarray]:
    return {key: block[layer] for key, block in blocks.items()}


def _named_splits(table: pd.DataFrame, pooling: str, splits: dict[str, str]) -> pd.DataFrame:
    """The aligners' train/val/test row blocks named back: role (fit, select, score) and the split's name."""
    roles = {value: role for role, value in ROLES.items()}
    table["role"] = table["split"].map(roles)
    table["split"] = table["role"].map(splits)
    table["pooling"] = pooling
    return table


def align_layers(store_a: str | Path, store_b: str | Path, pooling: str, aligners: dict[str, tuple[str, dict]],
                 splits: dict[str, str], layers: str = "matching", seed: int = 0
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every aligner, both directions, for the chosen layer pairs of two models: one row per split scored;
    and, long, every held-out (score split) example's squared error and squared target norm.

    The second table (layer_a, layer_b, direction, aligner, method, row, sq_error, target_sq, split,
    role, pooling) lets the findings stage put an interval on rel_error and on differences between
    aligners by resampling the held-out rows: rel_error = sqrt(Σ sq_error / Σ target_sq) over a cell's rows.
    """
    a, b = layer_splits(store_a, pooling, splits), layer_splits(store_b, pooling, splits)
    for key in a:
        if a[key].shape[1] != b[key].shape[1]:
            raise ValueError(f"the stores hold different numbers of {key!r} rows "
                             f"({a[key].shape[1]} vs {b[key].shape[1]}); re-extract both with the same settings")
    pairs = layer_pairs(a["train"].shape[0] - 1, b["train"].shape[0] - 1, layers)
    rows, examples = [], []
    for layer_a, layer_b in progress(pairs, unit="layer pair", desc=f"align {Path(store_a).stem}–{Path(store_b).stem}"):
        for row in align_pair(_at(a, layer_a), _at(b, layer_b), aligners, seed=seed, row_errors=True):
            direction = "a->b" if row.pop("direction") == "x->y" else "b->a"
            sq_errors, target_sq = row.pop("row_sq_errors"), row.pop("row_target_sq")
            rows.append({"layer_a": layer_a, "layer_b": layer_b, "direction": direction, **row})
            if row["split"] == ROLES["score"]:
                examples.append(pd.DataFrame({
                    "layer_a": layer_a, "layer_b": layer_b, "direction": direction, "aligner": row["aligner"],
                    "method": row["method"], "split": row["split"], "row": np.arange(len(sq_errors)),
                    "sq_error": sq_errors, "target_sq": target_sq}))
    return (_named_splits(pd.DataFrame(rows), pooling, splits),
            _named_splits(pd.concat(examples, ignore_index=True), pooling, splits))


def synthetic_table(store_path: str | Path, pooling: str, layers: list[int], aligners: dict[str, tuple[str, dict]],
                    splits: dict[str, str], map_seeds: list[int]) -> pd.DataFrame:
    """Synthetic recovery (Ren et al. §4.3, Table 3) from real representations of one model's layers."""
    blocks = layer_splits(store_path, pooling, splits)
    depth = blocks["train"].shape[0] - 1
    rows = []
    for layer in layers:
        index = layer if layer >= 0 else depth + 1 + layer
        if not 0 <= index <= depth:
            raise ValueError(f"align.synthetic.layers: layer {layer} does not exist; the model has layers 0..{depth}")
        X = _at(blocks, index)
        for seed in map_seeds:
            rows += [{"layer": index, **row}
                     for row in synthetic_recovery(X["train"], X["val"], X["test"], aligners, seed=seed)]
    return _named_splits(pd.DataFrame(rows), pooling, splits)
