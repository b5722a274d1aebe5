"""One pairwise job: every layer pair of two models' stores, as a tidy table.

Rows: dataset, representation, model_a, model_b, layer_a, layer_b, measure (the
config's label), kind (similarity or distance), direction (symmetric, a->b: layer_a's
side is X, b->a), split, n, params (JSON), value, n_permutations, null_mean, null_std,
null_p (the permutation null: the chance level and p), ci_low, ci_high, n_resamples (the
half-sample interval, reprsim.resampling), beyond_chance (the interval excludes null_mean on
the side of agreement), warning ("" or why the value is unreliable at this n), meta (JSON).

Device and memory (similarity.device, similarity.max_memory_gb): both layer stacks are converted to
float64 on the job's device once, and every measure, null and interval runs there; the measures' n×n
work stays within the memory budget (reprsim.metrics.memory), which changes how they compute, not what.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reprsim.io.device import describe as describe_device
from reprsim.io.device import resolve_device, slurm_allocated_no_gpu
from reprsim.io.store import constant_layers, open_store, pooled_rows, split_examples
from reprsim.metrics import MEASURES, directed_null, directed_replicates, memory, permutation, prepared
from reprsim.metrics._inputs import dtype_name
from reprsim.metrics.api import check_params, describe, null_statistics
from reprsim.metrics.cka import grams_fit
from reprsim.resampling import METHOD, beyond_chance, half_samples, interval
from reprsim.stages.compare.rows import check_same_rows, on_device, rows_digest, word_matrices
from reprsim.stages.compare.terms import stored_sides


def pair_device(requested: str) -> torch.device:
    """The torch device of a pair job for similarity.device (cpu | auto | cuda; reprsim.io.device).

    In a SLURM job allocated no GPU, `cuda` is an error that says how to route pair jobs to a GPU:
    torch may still see a node's GPUs there, but they belong to other jobs."""
    if requested == "cuda" and slurm_allocated_no_gpu():
        raise RuntimeError("similarity.device is cuda but SLURM allocated this pair job no GPU; with "
                           "profiles/slurm set REPRSIM_SLURM_PAIRS_ON_GPU=1, which routes compare_pair to the "
                           "GPU partition with one GPU")
    return resolve_device(requested)


def _kept(stack, kept: np.ndarray):
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
    return result.values, metas, null, result.replicates, result.interval_route


def _measure_rows(label: str, spec: dict, Xs, Ys, constant_x: np.ndarray, constant_y: np.ndarray,
                  statistics: dict, replicates: list, stored_dtype: str | None = None) -> list[dict]:
    """Rows for one configured measure: every layer pair, in both directions when it is asymmetric.

    Every value comes with its permutation null and its half-sample interval (`statistics`:
    the job's null and interval settings and its shared row subsets; in a pair job also both models'
    sides, reprsim.metrics.prepared). A layer whose rows are all one vector (`constant_x`/`constant_y`, from
    :func:`constant_layers`) is left out of the computation; its pairs get NaN with the reason in `meta`. The
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
    metas = [{} for _ in directions]
    kept_x, kept_y = np.flatnonzero(~constant_x), np.flatnonzero(~constant_y)
    if len(kept_x) and len(kept_y):
        kept = (slice(None), kept_x[:, None], kept_y[None, :])
        Xk, Yk = _kept(Xs, kept_x), _kept(Ys, kept_y)
        check_params(name, params)
        key = _shared_route(name, params, Xk, Yk)
        if key is not None:
            values, observed_metas, null, kept_draws, route = _paired_statistics(
                name, params, key, Xk, Yk, statistics, permutations, indices, stored_dtype)
        else:
            result = directed_null(name, Xk, Yk, n_permutations=permutations,
                                   seed=int(statistics["chance"]["seed"]), **params)
            values, observed_metas, null = result.values, result.metas, result.statistics
            kept_draws, route = directed_replicates(name, Xk, Yk, indices, **params)
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
            metas[d] = {"shared": {**shared, "interval": described}, "per_pair": per_pair}
    rows = []
    for (d, i, j), value in np.ndenumerate(arrays["value"]):
        if constant_x[i] or constant_y[j]:
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
        })
        replicates.append(pd.DataFrame({"layer_a": i, "layer_b": j, "measure": label, "direction": directions[d],
                                        "replicate": np.arange(len(indices)), "value": draws[:, d, i, j]}))
    return rows


def compare_pair(
    store_a_path: str | Path,
    store_b_path: str | Path,
    *,
    representation: str,
    split: str,
    measures: dict[str, dict],
    chance: dict | None = None,
    intervals: dict | None = None,
    words: dict | None = None,
    device: str = "cpu",
    max_memory_gb: float | None = None,
    terms: tuple[str | Path | None, str | Path | None] = (None, None),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every configured measure for all layer pairs (asymmetric ones in both directions), with
    its permutation null and half-sample interval; and the long table of the replicates.

    `measures` maps a label to {measure, params, null_permutations, resamples}; `chance` is
    similarity.chance ({permutations, seed}: the permutation null), `intervals` similarity.intervals ({resamples,
    confidence, seed}). The row subsets depend only on n and the seed, so replicate r of every
    pair job of one split rests on the same rows (reprsim.resampling). Maps between the two
    spaces are the align stage's business (:mod:`reprsim.stages.align`).

    `representation` "word" compares word rows (:func:`word_matrices`; `words` is similarity.word:
    {max_words, seed}); every row's meta then says which words.

    `terms` are the two models' terms stores (rule model_terms, :mod:`reprsim.stages.compare.terms`): what each
    measure needs of one model alone, prepared once per model; a store that does not rest on this job's rows
    (a word a token of the other model did not reach) is not used, and that model's terms are prepared here.

    `device` is similarity.device (:func:`pair_device`): the layer stacks are converted to float64
    there once. `max_memory_gb` is similarity.max_memory_gb, the measures' working-memory budget
    beyond the stacks (reprsim.metrics.memory; None: its default).
    """
    chance = {"permutations": 100, "seed": 0, **(chance or {})}
    intervals = {"resamples": 100, "confidence": 0.95, "seed": 0, **(intervals or {})}
    store_a, store_b = open_store(store_a_path), open_store(store_b_path)
    model_a, model_b = store_a.attrs["model"], store_b.attrs["model"]
    check_same_rows(store_a, store_b, split, (model_a, model_b))
    word_meta = None
    if representation == "word":
        words = {"max_words": None, "seed": 0, **(words or {})}
        Xs, Ys, word_meta, digest = word_matrices(store_a, store_b, split, words["max_words"], int(words["seed"]),
                                                  (model_a, model_b))
        print(f"{model_a} vs {model_b}: {word_meta['words']} words of {word_meta['sentences']} sentences", flush=True)
    else:
        Xs, Ys = pooled_rows(store_a, representation, split), pooled_rows(store_b, representation, split)
        digest = rows_digest(split_examples(store_a, split))
    constant_a, constant_b = constant_layers(Xs), constant_layers(Ys)
    target = pair_device(device)
    if target.type == "cpu" and "SLURM_JOB_ID" in os.environ and os.environ.get("CUDA_VISIBLE_DEVICES"):
        print(f"note: SLURM allocated this job a GPU, but similarity.device is {device!r}: it computes on the CPU",
              flush=True)
    stored_dtype = str(Xs.dtype)
    Xs, Ys = on_device(Xs, target), on_device(Ys, target)  # the stored arrays are freed
    most = max([int(intervals["resamples"])] + [int(spec.get("resamples") or 0) for spec in measures.values()])
    statistics = {"chance": chance, "intervals": intervals,
                  "indices": half_samples(Xs.shape[1], most, int(intervals["seed"]))}
    rows = torch.as_tensor(statistics["indices"], device=target)
    statistics["sides"] = tuple(
        prepared.Sides(_kept(stack, np.flatnonzero(~constant)), rows,
                       stored_sides(path, digest, np.flatnonzero(~constant), statistics["indices"], int(intervals["seed"]),
                                    target, name))
        for stack, constant, path, name in ((Xs, constant_a, terms[0], model_a), (Ys, constant_b, terms[1], model_b)))
    rows, replicates = [], []
    with memory.budget(max_memory_gb) as budget:
        print(f"{model_a} vs {model_b}: {Xs.shape[1]} rows, {len(Xs)} x {len(Ys)} layers, on {describe_device(target)}; "
              f"measures' working memory up to {budget / memory.GIB:g} GiB beyond the stacks "
              f"({(Xs.numel() + Ys.numel()) * 8 / memory.GIB:.2f} GiB)", flush=True)
        for label, spec in measures.items():
            started = time.perf_counter()
            if target.type == "cuda":
                torch.cuda.reset_peak_memory_stats(target)
            try:
                rows += _measure_rows(label, spec, Xs, Ys, constant_a, constant_b, statistics, replicates,
                                      stored_dtype)
            except ValueError as error:
                raise ValueError(f"measure {label!r} ({spec['measure']}) on {model_a} vs {model_b}: {error}") from error
            peak = (f"; peak {torch.cuda.max_memory_allocated(target) / memory.GIB:.2f} GiB on the GPU"
                    if target.type == "cuda" else "")
            print(f"{model_a} vs {model_b}, {label}: values, null and interval in "
                  f"{time.perf_counter() - started:.1f} s{peak}", flush=True)
    table = pd.DataFrame(rows).assign(split=split, n=Xs.shape[1])
    if word_meta is not None:
        table["meta"] = [json.dumps({**json.loads(m), "words": word_meta}, sort_keys=True) for m in table["meta"]]
    long = pd.concat(replicates, ignore_index=True).assign(n=Xs.shape[1], m=statistics["indices"].shape[1])
    for frame in (table, long):
        for position, (column, value) in enumerate((("dataset", store_a.attrs["dataset"]),
                                                    ("representation", representation),
                                                    ("model_a", model_a), ("model_b", model_b))):
            frame.insert(position, column, value)
    return table, long
