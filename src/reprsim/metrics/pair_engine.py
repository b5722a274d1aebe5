"""The pair engine: every configured measure for all layer pairs of two layer stacks, each value with its
permutation null (the chance level), its half-sample interval and its row count, as the tidy rows of a pair table.

The compare stage's pair jobs (reprsim.stages.compare.pairs: rows read from two activation stores, one model's terms
from its terms store) and the public Python API (reprsim.compare: arrays a user holds) both compute through
:func:`compare_stacks`, so a table from either has the same columns and, on the same rows and settings, the same
numbers.

A measure that cannot be computed on a pair (a ValueError from the measure: too few rows for its dimensions, every
unit of a layer constant, ...) gives NaN for that measure alone, with the reason in each row's meta (`undefined`) and
warning; the other measures go on. Parameters are checked for every measure before any is computed, so a
misspelt parameter still stops the job.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from reprsim.design import conditioning
from reprsim.inference import best_match
from reprsim.inference.resampling import METHOD, beyond_chance, half_samples, interval
from reprsim.io.device import describe as describe_device
from reprsim.metrics import memory, permutation, prepared
from reprsim.metrics._inputs import constant_layers, dtype_name
from reprsim.metrics.api import (MEASURES, check_params, describe, directed_layers, directed_null, directed_replicates,
                                 null_statistics)
from reprsim.metrics.cka import grams_fit
from reprsim.metrics.conditioners import condition_stack

DEFAULT_CHANCE = {"permutations": 100, "seed": 0}
DEFAULT_INTERVALS = {"resamples": 100, "confidence": 0.95, "seed": 0}


def on_device(stack, device: torch.device) -> torch.Tensor:
    """A layer stack (layers, n, d) as float64 on `device`, converted once (on a GPU: there, so only the
    stored dtype crosses the bus). A tensor already so is returned as it is."""
    tensor = stack if isinstance(stack, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(stack))
    return tensor.to(device).to(torch.float64)


def kept_layers(stack, kept: np.ndarray):
    """The layers `kept` of a stack; the stack itself (no copy) when every layer is kept."""
    return stack if len(kept) == len(stack) else stack[kept]


def _shared_route(name: str, params: dict, Xs, Ys) -> str | None:
    """The side family (reprsim.metrics.prepared) a measure's statistics come from, or None: the generic routes
    (recomputing per draw), as for CKA whose Grams do not fit in memory."""
    key = prepared.family(name, params)
    if key is None or (prepared.kind_of(key) == "gram" and not grams_fit(Xs.shape, Ys.shape)):
        return None
    return key


def _paired_statistics(name: str, params: dict, key: str, Xk, Yk, statistics: dict, permutations: int,
                       indices: np.ndarray, stored_dtype: str | None):
    """Values, metas, null statistics and replicate draws of one measure from the two models' sides: read from
    their terms stores, or prepared here once for every measure of the family (`statistics["sides"]`)."""
    sides = statistics.get("sides")
    if sides is None:  # a caller without a pair job's sides: prepared here, for this measure
        rows = torch.as_tensor(statistics["indices"], device=Xk.device)
        sides = (prepared.Sides(on_device(Xk, Xk.device), rows), prepared.Sides(on_device(Yk, Xk.device), rows))
    n = Xk.shape[1]
    seed = int(statistics["chance"]["seed"])
    every = statistics.setdefault("permutations", {})
    if len(every.get(seed, [])) < permutations:
        every[seed] = permutation.permutations(n, permutations, seed, Xk.device)
    rows = torch.as_tensor(indices, device=Xk.device)
    caches = statistics.setdefault("caches", {})
    result = prepared.paired(name, params, key, sides[0][key], sides[1][key], n, every[seed][:permutations], rows,
                             caches.setdefault(key, {}))
    null, source = null_statistics(name, params, result.values, result.null, n)
    kind = prepared.kind_of(key)
    dtype = stored_dtype or dtype_name(Xk)
    metas = []
    for d, meta in enumerate(result.metas):
        own = dict(meta)
        if kind == "gram":
            own.update(kernel=params.get("kernel", "linear"), estimator=params.get("estimator", "biased"), form="gram")
            if params.get("kernel") == "rbf":
                own.update(threshold=params.get("threshold", 1.0),
                           sigma="threshold * sqrt(median squared distance over pairs i < j)")
            if np.isnan(result.values).any():
                own["nan_reason"] = ("a layer with zero self-similarity (constant representation)"
                                     + (" or a non-positive unbiased self-HSIC"
                                        if params.get("estimator") == "unbiased" else ""))
        d_x, d_y = (Xk.shape[2], Yk.shape[2]) if d == 0 else (Yk.shape[2], Xk.shape[2])
        described = describe(name, params, own, n, int(d_x), int(d_y), dtype, str(Xk.device))
        metas.append({**described, "n_permutations": permutations, "seed": seed, "null_route": result.null_route,
                      "null_mean_from": source})
    return result.values, metas, null, result.replicates, result.interval_route, result.null


def _no_best_matches(shape: tuple) -> dict[str, np.ndarray]:
    return {column: np.zeros(shape, dtype=bool) if column in ("is_best", "split_best") else np.full(shape, np.nan)
            for column in best_match.COLUMNS}


def _split_estimate(name: str, params: dict, Xs, Ys, kind: str, seed: int, resamples: int, confidence: float):
    """Choose on the selection half, estimate on the other: (chosen index (D, L1), value (D, L1), low, high) from
    the measure on tensors Xs (L1, n, d1), Ys (L2, n, d2). Only the chosen layers of Y are computed on the
    estimation half, with `resamples` half-samples of its rows for the interval."""
    Xs, Ys = (Z if isinstance(Z, torch.Tensor) else torch.as_tensor(np.asarray(Z)) for Z in (Xs, Ys))
    select, estimate = best_match.split_rows(Xs.shape[1], seed)
    rows_s, rows_e = (torch.as_tensor(rows, device=Xs.device) for rows in (select, estimate))
    chosen_values = directed_layers(name, Xs[:, rows_s], Ys[:, rows_s], **params).values  # (D, L1, L2)
    chosen, _ = best_match.best_of(chosen_values, kind)
    used = np.unique(chosen[chosen >= 0])
    shape = chosen.shape
    value, low, high = (np.full(shape, np.nan) for _ in range(3))
    if len(used) == 0:
        return chosen, value, low, high
    Xe, Ye = Xs[:, rows_e], Ys[torch.as_tensor(used, device=Ys.device)][:, rows_e]
    grid = directed_layers(name, Xe, Ye, **params).values  # (D, L1, |used|)
    indices = half_samples(len(estimate), resamples, seed)
    replicates, _ = directed_replicates(name, Xe, Ye, indices, **params)  # (R, D, L1, |used|)
    lows, highs = interval(grid, replicates, len(estimate), indices.shape[1], confidence)
    for (d, i), j in np.ndenumerate(chosen):
        if j >= 0:
            column = int(np.searchsorted(used, j))
            value[d, i], low[d, i], high[d, i] = grid[d, i, column], lows[d, i, column], highs[d, i, column]
    return chosen, value, low, high


def _best_matches(name: str, params: dict, kind: str, values: np.ndarray, null_draws: np.ndarray, Xk, Yk,
                  kept_x: np.ndarray, kept_y: np.ndarray, statistics: dict, resamples: int, best: dict) -> str | None:
    """Each X layer's best Y layer (reprsim.inference.best_match), into `best`'s (D, L1, L2) arrays: on all rows with the
    p of the null's maximum (every row of the X layer carries it), and chosen on the selection half with its value
    and interval on the estimation half (on the chosen row). `statistics["best_match"]` False leaves them empty.
    Returns why the split has no value where the measure is undefined on half the rows (too few rows for its
    dimensions): the all-row columns are kept, the split's stay NaN."""
    if not statistics.get("best_match", True):
        return None
    index, p = best_match.selection_p(values, null_draws, kind)
    intervals = statistics["intervals"]
    try:
        chosen, value, low, high = _split_estimate(name, params, Xk, Yk, kind, int(intervals["seed"]), resamples,
                                                   float(intervals["confidence"]))
    except ValueError as error:
        chosen = np.full(index.shape, -1)
        value = low = high = np.full(index.shape, np.nan)
        reason = f"undefined on half the rows: {error}"
    else:
        reason = None
    for (d, i), j in np.ndenumerate(index):
        row = kept_x[i]
        best["selection_p"][d, row, :] = p[d, i]
        if j >= 0:
            best["is_best"][d, row, kept_y[j]] = True
        if chosen[d, i] >= 0:
            column = kept_y[chosen[d, i]]
            best["split_best"][d, row, column] = True
            for key, array in (("split_value", value), ("split_low", low), ("split_high", high)):
                best[key][d, row, column] = array[d, i]
    return reason


def measure_rows(label: str, spec: dict, Xs, Ys, constant_x: np.ndarray, constant_y: np.ndarray,
                  statistics: dict, replicates: list, stored_dtype: str | None = None) -> list[dict]:
    """Rows for one configured measure: every layer pair, in both directions when it is asymmetric.

    Every value comes with its permutation null and its half-sample interval (`statistics`:
    the job's null and interval settings and its shared row subsets; in a pair job also both models'
    sides, reprsim.metrics.prepared). A layer whose rows are all one vector (`constant_x`/`constant_y`, from
    :func:`constant_layers`) is left out of the computation; its pairs get NaN with the reason in `meta`. A
    measure that raises ValueError on the stacks gets NaN in every layer pair, its reason in `meta` and `warning`. The
    replicates are appended, long, to `replicates`. Xs and Ys are arrays or tensors (layers, n, d): the
    measures run on their device; `stored_dtype` is the dtype the meta records when they were converted from it.
    """
    name, params = spec["measure"], spec.get("params", {})
    kind, symmetric = MEASURES[name][1], MEASURES[name][2]
    directions = ["symmetric"] if symmetric else ["a->b", "b->a"]
    permutations = int(spec.get("null_permutations") or statistics["chance"]["permutations"])
    indices = statistics["indices"][: int(spec.get("resamples") or statistics["intervals"]["resamples"])]
    n, m = Xs.shape[1], indices.shape[1]
    shape = (len(directions), len(Xs), len(Ys))
    arrays = {key: np.full(shape, np.nan) for key in ("value", "null_mean", "null_std", "p_value", "low", "high")}
    draws = np.full((len(indices), *shape), np.nan)
    best = _no_best_matches(shape)
    metas = [{} for _ in directions]
    kept_x, kept_y = np.flatnonzero(~constant_x), np.flatnonzero(~constant_y)
    check_params(name, params)  # a misspelt parameter stops the job; a measure's own ValueError does not
    undefined = None
    if len(kept_x) and len(kept_y):
        try:
            kept = (slice(None), kept_x[:, None], kept_y[None, :])
            Xk, Yk = kept_layers(Xs, kept_x), kept_layers(Ys, kept_y)
            key = _shared_route(name, params, Xk, Yk)
            if key is not None:
                values, observed_metas, null, kept_draws, route, null_draws = _paired_statistics(
                    name, params, key, Xk, Yk, statistics, permutations, indices, stored_dtype)
            else:
                result = directed_null(name, Xk, Yk, n_permutations=permutations,
                                       seed=int(statistics["chance"]["seed"]), **params)
                values, observed_metas, null, null_draws = result.values, result.metas, result.statistics, result.draws
                kept_draws, route = directed_replicates(name, Xk, Yk, indices, **params)
            split_undefined = _best_matches(name, params, kind, values, null_draws, Xk, Yk, kept_x, kept_y,
                                            statistics, len(indices), best)
            del Xk, Yk
            arrays["value"][kept] = values
            for key_, array in null.items():
                arrays[key_][kept] = array
            draws[(slice(None), *kept)] = kept_draws
            arrays["low"][kept], arrays["high"][kept] = interval(values, kept_draws, n, m,
                                                                 statistics["intervals"]["confidence"])
            described = {"method": METHOD, "resamples": len(indices), "rows_per_resample": m, "route": route,
                         "confidence": statistics["intervals"]["confidence"], "seed": statistics["intervals"]["seed"]}
            for d, meta in enumerate(observed_metas):
                per_pair = {(kept_x[i], kept_y[j]): v for (i, j), v in meta.get("per_pair", {}).items()}
                shared = {k: v for k, v in meta.items() if k != "per_pair" and not isinstance(v, np.ndarray)}
                if stored_dtype is not None:
                    shared["dtype"] = stored_dtype
                if split_undefined is not None:
                    shared["best_match_split"] = split_undefined
                metas[d] = {"shared": {**shared, "interval": described}, "per_pair": per_pair}
        except ValueError as error:  # undefined on these stacks: NaN for this measure alone
            undefined = f"{name}: {error}"
            for array in (*arrays.values(), draws):
                array.fill(np.nan)
            best.update(_no_best_matches(shape))
    rows = []
    for (d, i, j), value in np.ndenumerate(arrays["value"]):
        if undefined is not None and not (constant_x[i] or constant_y[j]):
            meta = {"undefined": undefined, "warning": f"undefined: {undefined}"}
        elif constant_x[i] or constant_y[j]:
            meta = {"undefined": "every example has the same representation in layer "
                    + " and ".join(f"{side} {layer}" for side, layer, constant in
                                   (("X", i, constant_x[i]), ("Y", j, constant_y[j])) if constant)}
        else:
            meta = {**metas[d]["shared"], **metas[d]["per_pair"].get((i, j), {})}
            meta["interval"] = {**meta["interval"], "undefined_resamples": int(np.isnan(draws[:, d, i, j]).sum())}
        rows.append({
            "layer_a": i, "layer_b": j, "measure": label, "kind": kind, "direction": directions[d],
            "params": json.dumps(params, sort_keys=True), "value": float(value), "n_permutations": permutations,
            "null_mean": float(arrays["null_mean"][d, i, j]), "null_std": float(arrays["null_std"][d, i, j]),
            "null_p": float(arrays["p_value"][d, i, j]), "ci_low": float(arrays["low"][d, i, j]),
            "ci_high": float(arrays["high"][d, i, j]), "n_resamples": len(indices),
            "beyond_chance": bool(beyond_chance(kind, arrays["low"][d, i, j], arrays["high"][d, i, j],
                                                arrays["null_mean"][d, i, j])),
            "warning": meta.get("warning", ""), "meta": json.dumps(meta, sort_keys=True, default=str),
            **{column: (bool if column in ("is_best", "split_best") else float)(best[column][d, i, j])
               for column in best_match.COLUMNS},
        })
        replicates.append(pd.DataFrame({"layer_a": i, "layer_b": j, "measure": label, "direction": directions[d],
                                        "replicate": np.arange(len(indices)), "value": draws[:, d, i, j]}))
    return rows




def _conditioned_rows(label: str, spec: dict, how: dict, Xs, Ys, constant, statistics: dict, conditioned: dict,
                      replicates: list, stored_dtype: str) -> list[dict]:
    """measure_rows on both stacks conditioned by `how` (reprsim.design.conditioning), each row's meta saying so.
    The conditioned stacks and their sides are kept in `conditioned` for the next measure of the same conditioning;
    a layer constant before is constant after (every method centres or clamps it to one vector), so the masks stay.
    Sides come from the conditioned rows, never from a terms store (that holds the stored rows')."""
    key = json.dumps(how, sort_keys=True)
    if conditioned["key"] != key:
        conditioned.clear()
        stacks = condition_stack(Xs, how), condition_stack(Ys, how)
        rows = torch.as_tensor(statistics["indices"], device=Xs.device)
        conditioned.update(key=key, stacks=stacks, statistics={
            **{k: statistics[k] for k in ("chance", "intervals", "indices", "best_match")},
            "permutations": statistics.setdefault("permutations", {}),
            "sides": tuple(prepared.Sides(kept_layers(stack, np.flatnonzero(~mask)), rows)
                           for stack, mask in zip(stacks, constant))})
    measured = measure_rows(label, spec, *conditioned["stacks"], *constant, conditioned["statistics"], replicates,
                            stored_dtype)
    for row in measured:
        row["meta"] = json.dumps({**json.loads(row["meta"]), "conditioning": conditioning.describe(how)},
                                 sort_keys=True, default=str)
    return measured


def compare_stacks(Xs, Ys, *, names: tuple[str, str], measures: dict[str, dict], chance: dict | None = None,
                   intervals: dict | None = None, device: torch.device = torch.device("cpu"),
                   max_memory_gb: float | None = None,
                   stored_sides: Callable[[int, np.ndarray, np.ndarray], dict] | None = None,
                   kept_sides: dict | None = None, best_matches: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every measure of `measures` for all layer pairs of `Xs` and `Ys` (arrays (layers, n, d), rows = the same
    inputs in the same order), on `device`: the pair table's rows (model_a, model_b = `names`; layer_a, layer_b,
    measure, kind, direction, params, value, n_permutations, null_mean, null_std, null_p, ci_low, ci_high,
    n_resamples, beyond_chance, warning, meta, n) and the long table of the half-sample replicates.

    `measures` maps a label to {measure, params, conditioning, null_permutations, resamples} (conditioning:
    reprsim.design.conditioning, applied to both stacks first; none by default); `chance` is {permutations, seed}
    (the permutation null), `intervals` {resamples, confidence, seed} (the half-sample interval). The half-samples
    depend only on n and the seed, so replicate r of every call with the same n rests on the same rows.
    `stored_sides(side, kept, indices)` gives what a side's terms store holds for the kept layers and half-samples
    (the compare stage's; None: every side is prepared here). `kept_sides`, a dict kept across calls, holds each
    model's sides by its name (and the rows, seed and device), so a model compared with many prepares its terms once
    (reprsim.compare_many; the caller bounds its size). `best_matches` False leaves the best-match columns
    (reprsim.inference.best_match) empty."""
    chance = {**DEFAULT_CHANCE, **(chance or {})}
    intervals = {**DEFAULT_INTERVALS, **(intervals or {})}
    constant = constant_layers(Xs), constant_layers(Ys)
    stored_dtype = str(Xs.dtype)
    Xs, Ys = on_device(Xs, device), on_device(Ys, device)  # the given arrays are freed when the caller drops them
    most = max([int(intervals["resamples"])] + [int(spec.get("resamples") or 0) for spec in measures.values()])
    statistics = {"chance": chance, "intervals": intervals,
                  "indices": half_samples(Xs.shape[1], most, int(intervals["seed"]))}
    rows = torch.as_tensor(statistics["indices"], device=device)
    sides = []
    for side, (stack, mask) in enumerate(zip((Xs, Ys), constant)):
        key = (names[side], statistics["indices"].shape, int(intervals["seed"]), str(device))
        if kept_sides is not None and key in kept_sides:  # this model's terms, prepared in an earlier pair
            sides.append(kept_sides[key])
            continue
        sides.append(prepared.Sides(kept_layers(stack, np.flatnonzero(~mask)), rows, {} if stored_sides is None
                                    else stored_sides(side, np.flatnonzero(~mask), statistics["indices"])))
        if kept_sides is not None:
            kept_sides[key] = sides[-1]
    statistics["sides"] = tuple(sides)
    statistics["best_match"] = best_matches
    model_a, model_b = names
    table_rows, replicates = [], []
    conditioned = {"key": None}  # the stacks and sides of the last conditioning used (measures list them in turn)
    with memory.budget(max_memory_gb) as budget:
        print(f"{model_a} vs {model_b}: {Xs.shape[1]} rows, {len(Xs)} x {len(Ys)} layers, on {describe_device(device)}; "
              f"measures' working memory up to {budget / memory.GIB:g} GiB beyond the stacks "
              f"({(Xs.numel() + Ys.numel()) * 8 / memory.GIB:.2f} GiB)", flush=True)
        for label, spec in measures.items():
            started = time.perf_counter()
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            how = conditioning.of(spec)
            if how["method"] == "none":
                measured = measure_rows(label, spec, Xs, Ys, *constant, statistics, replicates, stored_dtype)
            else:
                measured = _conditioned_rows(label, spec, how, Xs, Ys, constant, statistics, conditioned, replicates,
                                             stored_dtype)
            table_rows += measured
            peak = (f"; peak {torch.cuda.max_memory_allocated(device) / memory.GIB:.2f} GiB on the GPU"
                    if device.type == "cuda" else "")
            undefined = json.loads(measured[0]["meta"]).get("undefined") if measured else None
            outcome = (f"undefined ({undefined})" if undefined and np.isnan([r["value"] for r in measured]).all()
                       else "values, null and interval")
            print(f"{model_a} vs {model_b}, {label}: {outcome} in {time.perf_counter() - started:.1f} s{peak}",
                  flush=True)
    table = pd.DataFrame(table_rows).assign(n=Xs.shape[1])
    long = pd.concat(replicates, ignore_index=True).assign(n=Xs.shape[1], m=statistics["indices"].shape[1])
    for frame in (table, long):
        frame.insert(0, "model_a", model_a)
        frame.insert(1, "model_b", model_b)
    return table, long
