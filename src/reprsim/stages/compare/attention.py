"""One attention pair job: every attention layer pair of two models' stores, as a pair table.

The rows have the pair-table columns of :mod:`reprsim.stages.compare.pairs`, with representation
"attention" and layer l meaning the attention maps of block l (1-based). Measures
(docs/numerics.md §7a, :mod:`reprsim.metrics.attention`; their kinds, symmetry and parameters are
their entries in reprsim.measure_registry.ATTENTION_MEASURES):

- head level (pearson, js, frobenius): the value is attnsim, the mean over one side's heads of the
  other side's best head (max for pearson, min for js and frobenius); asymmetric, so every layer
  pair has a row "a->b" (best head of B for each head of A) and "b->a";
- distributed (cka, svcca, pwcca): reprsim.metrics.compute on distributed(A), distributed(B), one
  row per word pair of every sentence and one column per head; symmetric or not as the measure is.

The sentences: those of `split` in both stores, at `level` ("word": the dataset's words, rows
renormalised over them; "token": only when both models have the same tokens), leaving out any
sentence with a non-finite map entry in any layer of either store (a word no token reached). A
seeded subset of at most `max_examples` (numpy default_rng(seed)), then only the sentences whose
length is shared with another kept sentence, so that the permutation null can re-pair them.

Chance level: B's sentences re-paired, π(i) drawn within each group of equal length as a
derangement (the same generator, after the subset), `permutations` draws; null_mean and null_std
over the draws, null_p = (1 + #draws at least as good as the value) / (1 + draws). Interval:
half-samples of the sentences (reprsim.inference.resampling). Head-level measures compute each sentence
pair's terms once (reprsim.metrics.attention.head_terms) for the observed pairing and every re-pairing,
and sum them over the sentences of a draw or a subset; distributed measures are recomputed on
each re-paired or subsampled matrix.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reprsim.inference.resampling import METHOD, beyond_chance, half_samples, interval
from reprsim.io.store import ATTENTION_ARRAYS, attention_maps, open_store, split_examples
from reprsim.measure_registry import ATTENTION_BY_CONFIG_NAME
from reprsim.metrics import attention
from reprsim.metrics.api import check_params, directed_layers
from reprsim.stages.compare.rows import check_same_rows

# the measures `measure:` names, from the registry (reprsim.measure_registry.ATTENTION_MEASURES): attnsim's head-level
# ones (pearson, js, frobenius) and the distributed ones (cka, svcca, pwcca)
HEAD_MEASURES = tuple(name for name, spec in ATTENTION_BY_CONFIG_NAME.items() if spec.head_level)
DISTRIBUTED_MEASURES = tuple(name for name, spec in ATTENTION_BY_CONFIG_NAME.items() if not spec.head_level)
COLUMNS = ["dataset", "representation", "model_a", "model_b", "layer_a", "layer_b", "measure", "kind", "direction",
           "params", "value", "n_permutations", "null_mean", "null_std", "null_p", "ci_low", "ci_high",
           "n_resamples", "beyond_chance", "warning", "meta", "split", "n"]
DETAIL_COLUMNS = ["dataset", "model_a", "model_b", "layer_a", "layer_b", "measure", "head_a", "head_b", "value",
                  "kind"]
# the half-sample replicates, long, as the pair jobs write them (n sentences, m per half-sample)
REPLICATE_COLUMNS = ["dataset", "representation", "model_a", "model_b", "layer_a", "layer_b", "measure", "direction",
                     "replicate", "value", "n", "m"]
NULL_SCHEME = "sentences of B re-paired within groups of equal length (derangements)"


# ---- configuration and sentences -----------------------------------------------------------------

def _specs(measures: dict[str, dict]) -> dict[str, dict]:
    """label -> {name, params, kind, head (bool), directions}; unknown measures and parameters named."""
    if not measures:
        raise ValueError("no attention measures configured")
    specs = {}
    for label, spec in measures.items():
        name, params = spec.get("measure"), dict(spec.get("params") or {})
        registered = ATTENTION_BY_CONFIG_NAME.get(name) if isinstance(name, str) else None
        if registered is None:
            raise ValueError(f"attention measure {label!r}: unknown measure {name!r}; head level: "
                             f"{', '.join(HEAD_MEASURES)}; distributed: {', '.join(DISTRIBUTED_MEASURES)}")
        if registered.head_level:
            unknown = sorted(set(params) - set(registered.params))
            if unknown:
                raise ValueError(f"attention measure {label!r} ({name}) has no parameter(s) {unknown}; "
                                 f"allowed: {', '.join(registered.params)}")
        else:
            check_params(name, params)  # the activation measure's own parameters, on distributed(A)
        specs[label] = {"name": name, "params": params, "kind": registered.kind, "head": registered.head_level,
                        "directions": ["symmetric"] if registered.symmetric else ["a->b", "b->a"]}
    return specs


def _lengths(store, level: str, examples: np.ndarray, name: str, split: str) -> np.ndarray:
    """Sentence lengths t (words or tokens) of `examples`, from the offsets of their t² entries."""
    attention_maps(store, 1, np.empty(0, dtype=np.int64), level)  # KeyError when not extracted
    extracted = (store.attrs.get("attention") or {}).get("splits")
    offsets = store[ATTENTION_ARRAYS[level][0]][:]
    sizes = offsets[examples + 1] - offsets[examples]
    if (extracted is not None and split not in extracted) or (len(sizes) and not sizes.any()):
        raise KeyError(f"activation store {store.path} ({name}) has no attention maps for split {split!r} "
                       f"(extracted for {extracted}); add it to extraction.detail_splits and extract with "
                       "extraction.attention: true")
    return np.sqrt(sizes).round().astype(np.int64)


def _finite(store, level: str, examples: np.ndarray, layers: int) -> np.ndarray:
    """Whether each example's maps are finite in every layer (one layer's span read at a time)."""
    offsets = store[ATTENTION_ARRAYS[level][0]][:]
    maps = store[ATTENTION_ARRAYS[level][1]]
    first, last = int(offsets[examples].min()), int(offsets[examples + 1].max())
    starts, ends = offsets[examples] - first, offsets[examples + 1] - first
    finite = np.ones(len(examples), dtype=bool)
    for layer in range(layers):
        bad = np.concatenate([[0], np.cumsum(~np.isfinite(maps[layer, :, first:last]).all(axis=0))])
        finite &= bad[ends] == bad[starts]
    return finite


def _sentences(store_a, store_b, split: str, level: str, max_examples: int | None, rng,
               names: tuple[str, str], layers: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """The example indices in A and in B of the sentences compared, their lengths, and what was left out."""
    check_same_rows(store_a, store_b, split, names)
    ex_a, ex_b = split_examples(store_a, split), split_examples(store_b, split)
    if len(ex_a) == 0:
        raise ValueError(f"{names[0]} and {names[1]} have no {split!r} examples")
    t_a = _lengths(store_a, level, ex_a, names[0], split)
    t_b = _lengths(store_b, level, ex_b, names[1], split)
    if not np.array_equal(t_a, t_b):
        differ = int(np.sum(t_a != t_b))
        if level == "token":
            raise ValueError(f"{names[0]} and {names[1]} tokenise {differ} of the {split!r} sentences into different "
                             "numbers of tokens, so their token-level maps cannot be compared; use level word")
        raise ValueError(f"{names[0]} and {names[1]} record different numbers of words for {differ} {split!r} "
                         "sentences; were they extracted from the same prepared dataset?")
    usable = (t_a > 0) & _finite(store_a, level, ex_a, layers[0]) & _finite(store_b, level, ex_b, layers[1])
    candidates = np.flatnonzero(usable)
    if max_examples is not None and len(candidates) > max_examples:
        chosen = np.sort(rng.choice(candidates, size=int(max_examples), replace=False))
    else:
        chosen = candidates
    values, counts = np.unique(t_a[chosen], return_counts=True)
    kept = chosen[np.isin(t_a[chosen], values[counts >= 2])]
    info = {"split_examples": len(ex_a), "unusable": int((~usable).sum()), "chosen": len(chosen),
            "max_examples": max_examples, "dropped_unshared_length": len(chosen) - len(kept), "used": len(kept)}
    if len(kept) < 2:
        raise ValueError(f"{names[0]} vs {names[1]}: no two of the {len(chosen)} chosen {split!r} sentences have the "
                         f"same length at level {level}, so the permutation null cannot re-pair them "
                         f"({info['unusable']} unusable); raise max_examples")
    return ex_a[kept], ex_b[kept], t_a[kept], info


def _repairings(lengths: np.ndarray, count: int, rng) -> np.ndarray:
    """(count, n) permutations π of the sentences, each within the groups of equal length and a
    derangement within every group (each has at least two sentences)."""
    groups = [np.flatnonzero(lengths == t) for t in np.unique(lengths)]
    perms = np.tile(np.arange(len(lengths)), (count, 1))
    for d in range(count):
        for group in groups:
            while True:
                shuffled = rng.permutation(len(group))
                if len(group) < 2 or not np.any(shuffled == np.arange(len(group))):
                    break
            perms[d, group] = group[shuffled]
    return perms


def _block_rows(starts: np.ndarray, sizes: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Row indices of the sentence blocks `order` (each starts[i], sizes[i] rows), concatenated."""
    sizes = sizes[order]
    new_starts = np.cumsum(sizes) - sizes
    return np.arange(int(sizes.sum())) + np.repeat(starts[order] - new_starts, sizes)


# ---- values -----------------------------------------------------------------------------------------

def _attnsim(S: np.ndarray, kind: str, axis: int) -> np.ndarray:
    """attnsim of stacked head matrices S (..., H_a, H_b): axis −1 is A→B (for each head of A, the best
    head of B; reprsim.metrics.attention.attnsim), −2 is B→A; NaN entries skipped, NaN when a head has none."""
    defined = ~np.isnan(S)
    similarity = kind == "similarity"
    filled = np.where(defined, S, -np.inf if similarity else np.inf)
    best = filled.max(axis=axis) if similarity else filled.min(axis=axis)
    whole = defined.any(axis=axis).all(axis=-1)
    with np.errstate(invalid="ignore"):
        return np.where(whole, best.mean(axis=-1), np.nan)


def _statistics(kind: str, value: float, draws: np.ndarray, replicates: np.ndarray | None, n: int,
                m: int, confidence: float) -> dict:
    """null_mean, null_std, null_p of the permutation draws and the interval from the replicates."""
    with warnings.catch_warnings():  # all draws NaN: the statistics stay NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        null_mean, null_std = float(np.nanmean(draws)), float(np.nanstd(draws))
    extreme = draws >= value if kind == "similarity" else draws <= value
    low, high = (np.nan, np.nan) if replicates is None else interval(value, replicates, n, m, confidence)
    return {"value": float(value), "null_mean": null_mean, "null_std": null_std,
            "null_p": float((1 + extreme.sum()) / (1 + len(draws))), "ci_low": float(low), "ci_high": float(high),
            "beyond_chance": bool(beyond_chance(kind, low, high, null_mean)),
            "undefined_resamples": None if replicates is None else int(np.isnan(replicates).sum())}


def _head_level(spec: dict, A, B, pairs: np.ndarray, inverse: np.ndarray, subsets: np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Observed head matrix, the (draws, H_a, H_b) null matrices and the (resamples, H_a, H_b) subset
    matrices, from one head_terms call over every sentence pair needed."""
    name = spec["name"]
    totals, counts = attention.head_terms(A, B, name, pairs=pairs)
    observed = inverse[0]
    S = attention._combine(totals[observed].sum(axis=0), counts[observed].sum(axis=0), name)
    null = np.stack([attention._combine(totals[d].sum(axis=0), counts[d].sum(axis=0), name) for d in inverse[1:]])
    replicates = None
    if subsets is not None:
        member = np.zeros((len(subsets), len(observed)))
        np.put_along_axis(member, subsets, 1.0, axis=1)
        flat = totals[observed].reshape(len(observed), -1)
        flat_counts = counts[observed].reshape(len(observed), -1).astype(np.float64)
        replicates = attention._combine(member @ flat, member @ flat_counts, name).reshape(len(subsets), *S.shape)
    return S, null, replicates


def _head_rows(spec: dict, S, null, replicates, n: int, m: int, confidence: float) -> list[dict]:
    """Both directions' rows (value, null, interval, best heads) of one head-level measure."""
    rows = []
    for direction, axis, matrix in (("a->b", -1, S), ("b->a", -2, S.T)):
        value = float(_attnsim(S, spec["kind"], axis))
        draws = _attnsim(null, spec["kind"], axis)
        reps = None if replicates is None else _attnsim(replicates, spec["kind"], axis)
        best_value, best_head = attention.best_heads(matrix, spec["name"])
        meta = {"best_head": best_head.tolist(),
                "best_value": [None if np.isnan(v) else float(v) for v in best_value]}
        if np.isnan(value):
            meta["nan_reason"] = ("a head has no row non-constant on both sides against any head of the other "
                                  "side; Pearson correlation is undefined there")
        rows.append({"direction": direction, **_statistics(spec["kind"], value, draws, reps, n, m, confidence),
                     "meta": meta, "replicates": reps})
    return rows


def _distributed_rows(spec: dict, DA: torch.Tensor, DB: torch.Tensor, null_rows: list[torch.Tensor],
                      subset_rows: list[torch.Tensor] | None, n: int, m: int, confidence: float) -> list[dict]:
    """The rows (one per direction) of a distributed measure: the measure (reprsim.metrics, both
    directions of an asymmetric one from one call) on distributed(A), distributed(B), recomputed on
    B's rows re-paired for each null draw and on each half-sample's rows of both."""
    name, params = spec["name"], spec["params"]
    Xs, Ys = DA[None], DB[None]
    observed = directed_layers(name, Xs, Ys, **params)
    draws = np.stack([directed_layers(name, Xs, Ys[:, rows], **params).values[:, 0, 0] for rows in null_rows])
    reps = None
    if subset_rows is not None:
        reps = np.full((len(subset_rows), len(spec["directions"])), np.nan)
        for r, rows in enumerate(subset_rows):
            try:
                reps[r] = directed_layers(name, Xs[:, rows], Ys[:, rows], **params).values[:, 0, 0]
            except ValueError:  # undefined on this half-sample: left out of the interval
                pass
    out = []
    for d, direction in enumerate(spec["directions"]):
        described = observed.metas[d]
        meta = {key: value for key, value in described.items() if key != "per_pair" and not isinstance(value, np.ndarray)}
        meta.update(described.get("per_pair", {}).get((0, 0), {}))
        meta["rows"] = meta.pop("n")  # the measure's rows are word pairs; the table's n counts sentences
        stats = _statistics(spec["kind"], float(observed.values[d, 0, 0]), draws[:, d],
                            None if reps is None else reps[:, d], n, m, confidence)
        out.append({"direction": direction, **stats, "meta": meta, "replicates": None if reps is None else reps[:, d]})
    return out


# ---- the job ----------------------------------------------------------------------------------------

def _layer_side(store, layer: int, examples: np.ndarray, level: str, with_distributed: bool) -> dict:
    """One attention layer of one side, read once for every layer of the other side it meets: its maps,
    distributed(maps) when a distributed measure is configured, and its PreparedMaps per row-sum tolerance
    (made by :func:`_prepared` when a head-level measure first asks; each keeps its per-measure terms)."""
    maps = attention_maps(store, layer, examples, level)
    return {"maps": maps, "prepared": {},
            "distributed": torch.from_numpy(attention.distributed(maps)) if with_distributed else None}


def _prepared(side: dict, tol: float, name: str) -> attention.PreparedMaps:
    if tol not in side["prepared"]:
        side["prepared"][tol] = attention.prepare(side["maps"], tol=tol, name=name)
    return side["prepared"][tol]


def compare_attention(
    store_a_path: str | Path,
    store_b_path: str | Path,
    *,
    split: str,
    level: str = "word",
    measures: dict[str, dict],
    max_examples: int | None,
    permutations: int,
    resamples: int,
    confidence: float,
    seed: int,
    detail_layers: list[tuple[int, int]] | None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every configured attention measure for every attention layer pair (1..L_a × 1..L_b), with its
    permutation null and half-sample interval (module docstring); the replicates (REPLICATE_COLUMNS);
    and the head × head detail.

    `measures` maps a label to {"measure": pearson, js, frobenius, cka, svcca or pwcca, "params": {...}}
    (head-level measures take only `tol`, the row-sum tolerance). Returns the pair table (the columns
    of :mod:`reprsim.stages.compare.pairs`, representation "attention", n = sentences), the long
    table of every value's half-sample replicates, and a long table (DETAIL_COLUMNS) of the head similarity matrix of every head-level measure at each
    (layer_a, layer_b) of `detail_layers` (1-based; heads 0-based). Each layer is read and prepared once:
    B's layers are kept for every layer of A (one layer of A in memory at a time).
    """
    started = time.perf_counter()
    if level not in ATTENTION_ARRAYS:
        raise ValueError(f"level must be one of {sorted(ATTENTION_ARRAYS)}; got {level!r}")
    if permutations < 1:
        raise ValueError(f"permutations must be ≥ 1; got {permutations}")
    specs = _specs(measures)
    store_a, store_b = open_store(store_a_path), open_store(store_b_path)
    model_a, model_b = store_a.attrs["model"], store_b.attrs["model"]
    names = (model_a, model_b)
    for store in (store_a, store_b):
        attention_maps(store, 1, np.empty(0, dtype=np.int64), level)  # KeyError when not extracted
    layers = tuple(int(store[ATTENTION_ARRAYS[level][1]].shape[0]) for store in (store_a, store_b))
    detail = sorted({(int(a), int(b)) for a, b in (detail_layers or [])})
    outside = [pair for pair in detail if not (1 <= pair[0] <= layers[0] and 1 <= pair[1] <= layers[1])]
    if outside:
        raise ValueError(f"detail_layers {outside} are outside 1..{layers[0]} × 1..{layers[1]}")

    rng = np.random.default_rng(seed)
    ex_a, ex_b, lengths, examples = _sentences(store_a, store_b, split, level, max_examples, rng, names, layers)
    n = len(lengths)
    perms = _repairings(lengths, int(permutations), rng)
    pairs, inverse = np.unique(np.concatenate([np.column_stack([np.arange(n), p])
                                               for p in [np.arange(n), *perms]]), axis=0, return_inverse=True)
    inverse = inverse.reshape(1 + len(perms), n)
    subsets, m, warning = None, 0, ""
    if n >= 4:
        subsets = half_samples(n, int(resamples), int(seed))
        m = subsets.shape[1]
    else:
        warning = f"only {n} sentences: no interval (half-samples need at least 4)"
    sizes = lengths * lengths
    starts = np.cumsum(sizes) - sizes
    null_rows = [torch.as_tensor(_block_rows(starts, sizes, p)) for p in perms]
    subset_rows = None if subsets is None else [torch.as_tensor(_block_rows(starts, sizes, s)) for s in subsets]
    heads = {}
    shared_meta = {
        "level": level, "words" if level == "word" else "tokens": int(lengths.sum()), "examples": examples,
        "null": {"permutations": int(permutations), "seed": int(seed), "scheme": NULL_SCHEME,
                 "unique_sentence_pairs": len(pairs)},
        "interval": {"method": METHOD, "resamples": 0 if subsets is None else int(resamples),
                     "sentences_per_resample": m, "confidence": confidence, "seed": int(seed)},
    }
    any_distributed = any(not spec["head"] for spec in specs.values())
    rows, detail_rows, replicate_rows = [], [], []
    sides_b = [_layer_side(store_b, layer_b, ex_b, level, any_distributed) for layer_b in range(1, layers[1] + 1)]
    for layer_a in range(1, layers[0] + 1):
        side_a = _layer_side(store_a, layer_a, ex_a, level, any_distributed)
        DA = side_a["distributed"]
        for layer_b, side_b in enumerate(sides_b, start=1):
            DB = side_b["distributed"]
            cache = {}
            for label, spec in specs.items():
                try:
                    if spec["head"]:
                        tol = float(spec["params"].get("tol", attention.ROW_TOLERANCE))
                        A, B = _prepared(side_a, tol, "A"), _prepared(side_b, tol, "B")
                        heads = {"heads_a": A.heads, "heads_b": B.heads}
                        key = (spec["name"], tol)
                        if key not in cache:
                            cache[key] = _head_level(spec, A, B, pairs, inverse, subsets)
                        S, null, replicates = cache[key]
                        measure_rows = _head_rows(spec, S, null, replicates, n, m, confidence)
                        if (layer_a, layer_b) in detail:
                            ha, hb = np.meshgrid(np.arange(S.shape[0]), np.arange(S.shape[1]), indexing="ij")
                            detail_rows.append(pd.DataFrame({
                                "layer_a": layer_a, "layer_b": layer_b, "measure": label, "head_a": ha.ravel(),
                                "head_b": hb.ravel(), "value": S.ravel(), "kind": spec["kind"]}))
                    else:
                        measure_rows = _distributed_rows(spec, DA, DB, null_rows, subset_rows, n, m, confidence)
                        heads = {"heads_a": DA.shape[1], "heads_b": DB.shape[1]}
                except ValueError as error:
                    raise ValueError(f"attention measure {label!r} ({spec['name']}) on {model_a} layer {layer_a} vs "
                                     f"{model_b} layer {layer_b}: {error}") from error
                for row in measure_rows:
                    draws = row.pop("replicates")
                    if draws is not None:
                        replicate_rows.append(pd.DataFrame({
                            "layer_a": layer_a, "layer_b": layer_b, "measure": label, "direction": row["direction"],
                            "replicate": np.arange(len(draws)), "value": draws}))
                    meta = {**shared_meta, **heads, "measure": spec["name"], **row.pop("meta")}
                    meta["interval"] = {**meta["interval"], "undefined_resamples": row.pop("undefined_resamples")}
                    rows.append({"layer_a": layer_a, "layer_b": layer_b, "measure": label, "kind": spec["kind"],
                                 "params": json.dumps(spec["params"], sort_keys=True), "n_permutations": int(permutations),
                                 "n_resamples": 0 if subsets is None else int(resamples),
                                 "warning": "; ".join(w for w in (meta.get("warning"), warning) if w),
                                 "meta": json.dumps(meta, sort_keys=True, default=str), **row})
        print(f"{model_a} vs {model_b}, attention layer {layer_a}/{layers[0]} ({n} sentences, level {level}): "
              f"{time.perf_counter() - started:.1f} s", flush=True)

    dataset = store_a.attrs["dataset"]
    table = pd.DataFrame(rows).assign(dataset=dataset, representation="attention", model_a=model_a,
                                      model_b=model_b, split=split, n=n)[COLUMNS]
    if detail_rows:
        long = pd.concat(detail_rows, ignore_index=True).assign(dataset=dataset, model_a=model_a, model_b=model_b)
    else:
        long = pd.DataFrame(columns=DETAIL_COLUMNS)
    replicates = (pd.concat(replicate_rows, ignore_index=True) if replicate_rows
                  else pd.DataFrame(columns=REPLICATE_COLUMNS[4:10]))
    replicates = replicates.assign(dataset=dataset, representation="attention", model_a=model_a, model_b=model_b,
                                   n=n, m=m)[REPLICATE_COLUMNS]
    return table, replicates, long[DETAIL_COLUMNS]
