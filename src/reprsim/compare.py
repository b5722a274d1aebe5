"""One pairwise job: every layer pair of two models' stores, as a tidy table.

Rows: dataset, representation, model_a, model_b, layer_a, layer_b, measure (the
config's label), kind (similarity or distance), direction (symmetric, a->b: layer_a's
side is X, b->a), split, n, params (JSON), value, null_mean, null_std, null_p and
n_permutations (NaN and 0 when no null was asked for), meta (JSON).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.align.linear import LinearAligner, mean_l2, relative_error
from reprsim.metrics import MEASURES, compute_layers, null_layers
from reprsim.store import constant_layers, open_store, pooled_rows


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
        meta = json.dumps({"rank": aligner.rank_, "validation_errors": aligner.validation_errors_}, sort_keys=True)
        for measure, value in (
            ("linear_map_rel_error", relative_error(target["score"][layer_y], prediction)),
            ("linear_map_mean_l2", mean_l2(target["score"][layer_y], prediction)),
        ):
            rows.append({"layer_a": a, "layer_b": b, "measure": measure, "kind": "distance",
                         "direction": direction, "params": params, "value": value, "n_permutations": 0,
                         "null_mean": np.nan, "null_std": np.nan, "null_p": np.nan, "meta": meta})
    return rows


def _measure_rows(label: str, spec: dict, Xs: np.ndarray, Ys: np.ndarray, constant_x: np.ndarray,
                  constant_y: np.ndarray, transpose: bool, direction: str) -> list[dict]:
    """Rows for one configured measure in one direction (Xs's layers vs Ys's layers).

    A layer whose rows are all one vector (`constant_x`/`constant_y`, from :func:`constant_layers`)
    is left out of the computation; its pairs get NaN with the reason in `meta`.
    """
    name, params = spec["measure"], spec.get("params", {})
    permutations = int(spec.get("null_permutations", 0))
    values = np.full((len(Xs), len(Ys)), np.nan)
    null = {key: np.full_like(values, np.nan) for key in ("null_mean", "null_std", "p_value")}
    per_pair, shared = {}, {}
    kept_x, kept_y = np.flatnonzero(~constant_x), np.flatnonzero(~constant_y)
    if len(kept_x) and len(kept_y):
        if permutations:
            result = null_layers(name, Xs[kept_x], Ys[kept_y], n_permutations=permutations,
                                 seed=int(spec.get("null_seed", 0)), **params)
        else:
            result = compute_layers(name, Xs[kept_x], Ys[kept_y], **params)
        values[np.ix_(kept_x, kept_y)] = result.values
        for key in null if permutations else ():
            null[key][np.ix_(kept_x, kept_y)] = result.meta[key]
        per_pair = {(kept_x[i], kept_y[j]): v for (i, j), v in result.meta.get("per_pair", {}).items()}
        shared = {k: v for k, v in result.meta.items()
                  if k not in ("per_pair", "null_mean", "null_std", "p_value") and not isinstance(v, np.ndarray)}
    rows = []
    for (i, j), value in np.ndenumerate(values):
        meta = {**shared, **per_pair.get((i, j), {})}
        if constant_x[i] or constant_y[j]:
            meta = {"undefined": "every example has the same representation in layer "
                    + " and ".join(f"{side} {layer}" for side, layer, constant in
                                   (("X", i, constant_x[i]), ("Y", j, constant_y[j])) if constant)}
        rows.append({
            "layer_a": j if transpose else i, "layer_b": i if transpose else j, "measure": label,
            "kind": MEASURES[name][1], "direction": direction, "params": json.dumps(params, sort_keys=True),
            "value": float(value), "n_permutations": permutations,
            "null_mean": float(null["null_mean"][i, j]), "null_std": float(null["null_std"][i, j]),
            "null_p": float(null["p_value"][i, j]), "meta": json.dumps(meta, sort_keys=True, default=str),
        })
    return rows


def compare_pair(
    store_a_path: str | Path,
    store_b_path: str | Path,
    *,
    representation: str,
    split: str,
    measures: dict[str, dict],
    alignment: dict,
) -> pd.DataFrame:
    """Every configured measure for all layer pairs (asymmetric ones in both directions),
    plus the linear aligner per matching layer (both directions).

    `measures` maps a label to {measure, params, null_permutations, null_seed}. The aligner
    is fit on `fit_split` rows, its ridge chosen on `select_split` rows and its error
    reported on `score_split` rows, which it never sees before.
    """
    store_a, store_b = open_store(store_a_path), open_store(store_b_path)
    model_a, model_b = store_a.attrs["model"], store_b.attrs["model"]
    _check_same_rows(store_a, store_b, split, (model_a, model_b))
    Xs, Ys = pooled_rows(store_a, representation, split), pooled_rows(store_b, representation, split)
    constant_a, constant_b = constant_layers(Xs), constant_layers(Ys)
    rows = []
    for label, spec in measures.items():
        symmetric = MEASURES[spec["measure"]][2]
        try:
            if symmetric:
                rows += _measure_rows(label, spec, Xs, Ys, constant_a, constant_b, transpose=False,
                                      direction="symmetric")
            else:
                rows += _measure_rows(label, spec, Xs, Ys, constant_a, constant_b, transpose=False,
                                      direction="a->b")
                rows += _measure_rows(label, spec, Ys, Xs, constant_b, constant_a, transpose=True,
                                      direction="b->a")
        except ValueError as error:
            raise ValueError(f"measure {label!r} ({spec['measure']}) on {model_a} vs {model_b}: {error}") from error
    table = pd.DataFrame(rows).assign(split=split, n=Xs.shape[1])
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
