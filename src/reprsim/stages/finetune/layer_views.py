"""What fine-tuning does to each layer, seen through CKA (Phang et al. 2021, §3, Figures 1, 5, 6).

Linear CKA of the first-token (CLS) representation between every pair of layers, for
four views of a fine-tuned model FT and the model it started from, ORIG:
ORIG–ORIG, FT–ORIG (FT's layers on the first axis), FT–FT and FT[a]–FT[b] against each
sibling fine-tuned from the same base with a different seed. Fine-tuned models show a
block-diagonal structure; :func:`reprsim.blocks.block_structure` finds where the blocks meet. A layer
whose first-token rows are all the same vector has no defined CKA and shows as NaN.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.blocks import block_structure
from reprsim.io.store import constant_layers, open_store, pooled_rows
from reprsim.metrics.cka import linear_cka_layers

POOLING = "cls"


def _rows(store_path: str | Path, split: str) -> np.ndarray:
    return pooled_rows(open_store(store_path), POOLING, split).astype(np.float64)


def layer_views(model: str, stores: dict[str, str | Path], base: str, siblings: list[str], split: str
                ) -> pd.DataFrame:
    """Tidy CKA rows (view, model_a, model_b, layer_a, layer_b, value) for one fine-tuned `model`.

    `stores` maps model names (the model, its base and its siblings) to activation stores
    extracted on the same rows.
    """
    reps = {name: _rows(stores[name], split) for name in {model, base, *siblings}}
    n = {name: rep.shape[1] for name, rep in reps.items()}
    if len(set(n.values())) != 1:
        raise ValueError(f"stores hold different numbers of {split!r} rows: {n}; re-extract them alike")
    pairs = [("ORIG–ORIG", base, base), ("FT–ORIG", model, base), ("FT–FT", model, model)]
    pairs += [(f"FT[{model}]–FT[{sibling}]", model, sibling) for sibling in sorted(siblings)]
    constant = {name: constant_layers(rep) for name, rep in reps.items()}
    frames = []
    for view, a, b in pairs:
        matrix = linear_cka_layers(reps[a], reps[b])
        matrix[constant[a], :] = np.nan
        matrix[:, constant[b]] = np.nan
        layer_a, layer_b = np.indices(matrix.shape)
        frames.append(pd.DataFrame({"view": view, "model_a": a, "model_b": b, "layer_a": layer_a.ravel(),
                                    "layer_b": layer_b.ravel(), "value": matrix.ravel()}))
    table = pd.concat(frames, ignore_index=True)
    table["model"], table["measure"], table["pooling"] = model, "linear_cka", POOLING
    table["split"], table["n"] = split, next(iter(n.values()))
    return table


def view_matrix(table: pd.DataFrame, view: str) -> np.ndarray:
    rows = table[table["view"] == view]
    return rows.pivot(index="layer_a", columns="layer_b", values="value").to_numpy()


def block_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Block structure of the ORIG–ORIG and FT–FT views of every model in a layer-views table."""
    rows = []
    for model, views in table.groupby("model"):
        for view in ("ORIG–ORIG", "FT–FT"):
            rows.append({"model": model, "view": view, **block_structure(view_matrix(views, view))})
    return pd.DataFrame(rows)
