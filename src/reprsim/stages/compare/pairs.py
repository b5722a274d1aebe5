"""One pairwise job: every layer pair of two models' stores, as a tidy table.

Rows: dataset, representation, model_a, model_b, layer_a, layer_b, measure (the
config's label), kind (similarity or distance), direction (symmetric, a->b: layer_a's
side is X, b->a), split, n, params (JSON), value, n_permutations, null_mean, null_std,
null_p (the permutation null: the chance level and p), ci_low, ci_high, n_resamples (the
half-sample interval, reprsim.resampling), beyond_chance (the interval excludes null_mean on
the side of agreement), warning ("" or why the value is unreliable at this n), meta (JSON).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.io.store import constant_layers, open_store, pooled_rows, split_examples, word_rows
from reprsim.metrics import MEASURES, directed_null, directed_replicates
from reprsim.resampling import METHOD, beyond_chance, half_samples, interval


def check_same_rows(store_a, store_b, split: str, names: tuple[str, str]) -> None:
    rows = [store["examples/row"][:][split_examples(store, split)] for store in (store_a, store_b)]
    if not np.array_equal(rows[0], rows[1]):
        raise ValueError(
            f"{names[0]} and {names[1]} were extracted on different {split!r} rows "
            f"({len(rows[0])} vs {len(rows[1])}); re-extract both with the same settings"
        )


def word_matrices(store_a, store_b, split: str, max_words: int | None, seed: int,
                  names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray, dict]:
    """Both stores' word rows (layers, words, d) for the words of `split`: whole sentences drawn in a
    seeded order until `max_words` words (all with None), then only the words both models reached
    (a word cut off by truncation in either has NaN rows). The two stores' word lists must agree,
    example by example: they come from the dataset's segmentation, not the tokenizers."""
    examples = split_examples(store_a, split)
    counts = [store["examples/n_words"][:][examples] for store in (store_a, store_b)]
    if not np.array_equal(*counts):
        raise ValueError(f"{names[0]} and {names[1]} record different words for the {split!r} examples; "
                         "were they extracted from the same prepared dataset?")
    order = np.random.default_rng(seed).permutation(len(examples))
    if max_words is not None:
        enough = np.searchsorted(np.cumsum(counts[0][order]), max_words) + 1
        order = order[:enough]
    chosen = examples[np.sort(order)]
    (X, owner), (Y, _) = word_rows(store_a, chosen), word_rows(store_b, chosen)
    reached = np.isfinite(X).all(axis=(0, 2)) & np.isfinite(Y).all(axis=(0, 2))
    meta = {"sentences": len(chosen), "sentences_in_split": len(examples), "words": int(reached.sum()),
            "words_without_token": int((~reached).sum()), "max_words": max_words, "seed": seed,
            "word_pooling": [store.attrs.get("word_pooling") for store in (store_a, store_b)],
            "sentences_used": int(len(np.unique(owner[reached])))}
    return X[:, reached], Y[:, reached], meta


def _measure_rows(label: str, spec: dict, Xs: np.ndarray, Ys: np.ndarray, constant_x: np.ndarray,
                  constant_y: np.ndarray, statistics: dict, replicates: list) -> list[dict]:
    """Rows for one configured measure: every layer pair, in both directions when it is asymmetric.

    Every value comes with its permutation null and its half-sample interval (`statistics`:
    the job's null and interval settings and its shared row subsets). A layer whose rows are all
    one vector (`constant_x`/`constant_y`, from :func:`constant_layers`) is left out of the
    computation; its pairs get NaN with the reason in `meta`. The replicates are appended, long,
    to `replicates`.
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
        result = directed_null(name, Xs[kept_x], Ys[kept_y], n_permutations=permutations,
                               seed=int(statistics["chance"]["seed"]), **params)
        arrays["value"][kept] = result.values
        for key, values in result.statistics.items():
            arrays[key][kept] = values
        kept_draws, route = directed_replicates(name, Xs[kept_x], Ys[kept_y], indices, **params)
        draws[(slice(None), *kept)] = kept_draws
        arrays["low"][kept], arrays["high"][kept] = interval(result.values, kept_draws, n, m,
                                                             statistics["intervals"]["confidence"])
        described = {"method": METHOD, "resamples": len(indices), "rows_per_resample": m, "route": route,
                     "confidence": statistics["intervals"]["confidence"], "seed": statistics["intervals"]["seed"]}
        for d, meta in enumerate(result.metas):
            per_pair = {(kept_x[i], kept_y[j]): v for (i, j), v in meta.get("per_pair", {}).items()}
            shared = {k: v for k, v in meta.items() if k != "per_pair" and not isinstance(v, np.ndarray)}
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
    """
    chance = {"permutations": 100, "seed": 0, **(chance or {})}
    intervals = {"resamples": 100, "confidence": 0.95, "seed": 0, **(intervals or {})}
    store_a, store_b = open_store(store_a_path), open_store(store_b_path)
    model_a, model_b = store_a.attrs["model"], store_b.attrs["model"]
    check_same_rows(store_a, store_b, split, (model_a, model_b))
    word_meta = None
    if representation == "word":
        words = {"max_words": None, "seed": 0, **(words or {})}
        Xs, Ys, word_meta = word_matrices(store_a, store_b, split, words["max_words"], int(words["seed"]),
                                          (model_a, model_b))
        print(f"{model_a} vs {model_b}: {word_meta['words']} words of {word_meta['sentences']} sentences", flush=True)
    else:
        Xs, Ys = pooled_rows(store_a, representation, split), pooled_rows(store_b, representation, split)
    constant_a, constant_b = constant_layers(Xs), constant_layers(Ys)
    most = max([int(intervals["resamples"])] + [int(spec.get("resamples") or 0) for spec in measures.values()])
    statistics = {"chance": chance, "intervals": intervals,
                  "indices": half_samples(Xs.shape[1], most, int(intervals["seed"]))}
    rows, replicates = [], []
    for label, spec in measures.items():
        started = time.perf_counter()
        try:
            rows += _measure_rows(label, spec, Xs, Ys, constant_a, constant_b, statistics, replicates)
        except ValueError as error:
            raise ValueError(f"measure {label!r} ({spec['measure']}) on {model_a} vs {model_b}: {error}") from error
        print(f"{model_a} vs {model_b}, {label}: values, null and interval in {time.perf_counter() - started:.1f} s",
              flush=True)
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
