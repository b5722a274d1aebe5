"""One pairwise job: every layer pair of two models' stores, as a tidy table.

Rows: dataset, representation, model_a, model_b, layer_a, layer_b, measure, kind
(similarity or distance), direction, split, n, params, value.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.align.linear import LinearAligner, mean_l2, relative_error
from reprsim.metrics.cka import linear_cka_layers
from reprsim.store import open_store, pooled_rows


def matching_layer(layer: int, depth_from: int, depth_to: int) -> int:
    """The layer at the same relative depth in a model with `depth_to` blocks."""
    return int(round(layer * depth_to / depth_from)) if depth_from else 0


def _check_same_rows(store_a, store_b, split: str, names: tuple[str, str]) -> None:
    for store, name in zip((store_a, store_b), names):
        if split not in store.attrs["split_names"]:
            raise KeyError(f"store of {name} has no {split!r} rows; extracted: {store.attrs['split_names']}")
    rows = []
    for store in (store_a, store_b):
        codes = store["examples/split"][:]
        rows.append(store["examples/row"][:][codes == store.attrs["split_names"].index(split)])
    if not np.array_equal(rows[0], rows[1]):
        raise ValueError(
            f"{names[0]} and {names[1]} were extracted on different {split!r} rows "
            f"({len(rows[0])} vs {len(rows[1])}); re-extract both with the same settings"
        )


def _alignment_rows(source: dict, target: dict, ridge: list[float], direction: str) -> list[dict]:
    """Fit source -> target per matching layer; `source`/`target` map a role (fit/select/score) to (L, n, d)."""
    depth_x, depth_y = source["fit"].shape[0] - 1, target["fit"].shape[0] - 1
    rows = []
    for layer_x in range(depth_x + 1):
        layer_y = matching_layer(layer_x, depth_x, depth_y)
        aligner = LinearAligner(ridge=ridge).fit(
            source["fit"][layer_x], target["fit"][layer_y], source["select"][layer_x], target["select"][layer_y]
        )
        prediction = aligner.transform(source["score"][layer_x])
        a, b = (layer_x, layer_y) if direction == "a->b" else (layer_y, layer_x)
        params = json.dumps({"aligner": "linear", "ridge": aligner.ridge_}, sort_keys=True)
        for measure, value in (
            ("linear_map_rel_error", relative_error(target["score"][layer_y], prediction)),
            ("linear_map_mean_l2", mean_l2(target["score"][layer_y], prediction)),
        ):
            rows.append({"layer_a": a, "layer_b": b, "measure": measure, "kind": "distance",
                         "direction": direction, "params": params, "value": value})
    return rows


def compare_pair(
    store_a_path: str | Path,
    store_b_path: str | Path,
    *,
    representation: str,
    split: str,
    measures: list[str],
    alignment: dict,
) -> pd.DataFrame:
    """All layer pairs of linear CKA, plus the linear aligner per matching layer (both directions).

    The aligner is fit on `fit_split` rows, its ridge chosen on `select_split` rows and
    its error reported on `score_split` rows, which it never sees before.
    """
    store_a, store_b = open_store(store_a_path), open_store(store_b_path)
    model_a, model_b = store_a.attrs["model"], store_b.attrs["model"]
    _check_same_rows(store_a, store_b, split, (model_a, model_b))
    Xs, Ys = pooled_rows(store_a, representation, split), pooled_rows(store_b, representation, split)
    n = Xs.shape[1]
    rows = []
    for measure in measures:
        if measure != "linear_cka":
            raise ValueError(f"unknown measure {measure!r}; available: linear_cka")
        values = linear_cka_layers(Xs, Ys)
        for (a, b), value in np.ndenumerate(values):
            rows.append({"layer_a": a, "layer_b": b, "measure": measure, "kind": "similarity",
                         "direction": "symmetric", "value": float(value)})
    table = pd.DataFrame(rows).assign(split=split, n=n, params=json.dumps({"kernel": "linear", "estimator": "biased"}))
    if alignment["enabled"]:
        roles = {"fit": alignment["fit_split"], "select": alignment["select_split"], "score": alignment["score_split"]}
        for split_name in set(roles.values()):
            _check_same_rows(store_a, store_b, split_name, (model_a, model_b))
        views_a = {role: pooled_rows(store_a, representation, name) for role, name in roles.items()}
        views_b = {role: pooled_rows(store_b, representation, name) for role, name in roles.items()}
        aligned = _alignment_rows(views_a, views_b, alignment["ridge"], "a->b")
        if model_a != model_b:
            aligned += _alignment_rows(views_b, views_a, alignment["ridge"], "b->a")
        table = pd.concat(
            [table, pd.DataFrame(aligned).assign(split=roles["score"], n=views_a["score"].shape[1])],
            ignore_index=True,
        )
    table.insert(0, "model_b", model_b)
    table.insert(0, "model_a", model_a)
    table.insert(0, "representation", representation)
    table.insert(0, "dataset", store_a.attrs["dataset"])
    return table
