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

from reprsim.io.store import constant_layers, open_store, pooled_rows
from reprsim.metrics import MEASURES, compute_layers, null_layers


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
) -> pd.DataFrame:
    """Every configured measure for all layer pairs (asymmetric ones in both directions).

    `measures` maps a label to {measure, params, null_permutations, null_seed}. Maps between
    the two spaces are the align stage's business (:mod:`reprsim.stages.align`).
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
    table.insert(0, "model_b", model_b)
    table.insert(0, "model_a", model_a)
    table.insert(0, "representation", representation)
    table.insert(0, "dataset", store_a.attrs["dataset"])
    return table
