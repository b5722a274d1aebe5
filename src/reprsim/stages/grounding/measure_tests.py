"""Which measure to believe: one measure's scores on the grounding tests (Ding et al. 2021; ReSi, Klabunde et
al. 2024), each with a half-sample interval over the similarity split's rows.

The tests (docs/numerics.md §13; ../shared/docs/grounding.md maps both works' code):

  monotonicity  within a model and across seed siblings, similarity falls as layers get farther apart
                (ReSi test 6): Spearman ρ per anchor layer and side, sign-flipped for similarities; and
                its conformity rate
  deletion      the k lowest-variance principal components of a layer deleted (Ding §4): the measure
                between the layer and each deleted version against the change in a linear probe's held-out
                accuracy; Spearman ρ
  prediction    over pairs of fine-tuned models, last-layer dissimilarity against |accuracy difference|,
                prediction disagreement and the Jensen-Shannon divergence of the outputs (ReSi tests 1-2)
  groups        models built to differ (label noise, shortcut rate, augmentation): within-group pairs
                against between-group pairs at the last layer (ReSi tests 3-5); AUPRC against its chance
                level (the share of within-group pairs), and d′
  seeds         seed siblings of one recipe against models of other recipes (Ding's specificity); AUPRC, d′

Every test is computed on all rows (the score) and on each half-sample of them (the replicates): the values
of the measure on the same row subsets as every pair job's interval, read from the pair jobs' tables where they
computed them (reprsim.stages.grounding.pair_tables: the monotonicity cells, the last layers of two models), else
from reprsim.metrics.api; the functional side (probe accuracy, output differences) on the same subsets, and the
interval is reprsim.resampling.interval's. The interval covers the rows; the models are the configuration's design, not
a sample of models.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.io.datasets import read_meta
from reprsim.io.store import constant_layers, open_store, split_examples
from reprsim.measure_registry import MEASURES
from reprsim.metrics import api
from reprsim.relations import recipe
from reprsim.resampling import half_samples, interval, subsample_size
from reprsim.stages.grounding import pair_tables
from reprsim.stages.grounding import probes as probes_module
from reprsim.stages.grounding import scores
from reprsim.stages.grounding.setup import TESTS, Setup

DESIGN_OPTIONS = ("label_noise", "shortcut", "augment")  # the fine-tuning options that make groups by design

COLUMNS = ["measure", "measure_name", "test", "variant", "score", "ci_low", "ci_high", "chance", "units",
           "higher_is_better", "beyond_chance", "n_rows", "n_items", "detail"]


class Values:
    """A measure's values (direction X→Y) for lists of representations, on all rows and on half-samples."""

    def __init__(self, label: str, spec: Mapping, indices: np.ndarray):
        self.label, self.name, self.params = label, spec["measure"], dict(spec.get("params") or {})
        self.similarity = MEASURES[self.name].kind == "similarity"
        self.indices = indices

    def __call__(self, left: list[np.ndarray], right: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(len(left), len(right)) values and (R, len(left), len(right)) replicates; representations of one
        width are computed together (the measures are batched over layers). A representation whose rows are all
        one vector gets NaN, as in the pair jobs (reprsim.io.store.constant_layers)."""
        values = np.full((len(left), len(right)), np.nan)
        replicates = np.full((len(self.indices), len(left), len(right)), np.nan)
        for rows_a in _by_width(left).values():
            for rows_b in _by_width(right).values():
                Xs, Ys = np.stack([left[i] for i in rows_a]), np.stack([right[j] for j in rows_b])
                values[np.ix_(rows_a, rows_b)] = api.compute_layers(self.name, Xs, Ys, **self.params).values
                draws, _ = api.replicate_layers(self.name, Xs, Ys, self.indices, **self.params)
                replicates[:, rows_a[:, None], rows_b[None, :]] = draws
        return values, replicates

    def distance(self, values: np.ndarray) -> np.ndarray:
        """Values oriented as dissimilarities (similarities negated, as ReSi's tests 1-2)."""
        return -values if self.similarity else values


def _by_width(representations: list[np.ndarray]) -> dict[int, np.ndarray]:
    widths: dict[int, list[int]] = {}
    for index, rows in enumerate(representations):
        if not constant_layers(rows[None])[0]:
            widths.setdefault(rows.shape[-1], []).append(index)
    return {width: np.array(indices) for width, indices in widths.items()}


def _option_value(spec: Mapping, option: str):
    value = spec.get(option)
    if value is None:
        return 0.0
    return value.get("fraction", value.get("rate"))


def _result(label: str, values: Values, test: str, variant: str, estimate: float, replicates: np.ndarray, n: int,
            chance: float, units: str, items: int, detail: Mapping, confidence: float) -> dict:
    low, high = interval(np.asarray(estimate, dtype=float), np.asarray(replicates, dtype=float), n,
                         subsample_size(n), confidence)
    low, high = float(low), float(high)
    if np.isfinite(estimate) and not (np.isfinite(low) and np.isfinite(high)):
        # no score without its interval: the half-samples leave it undefined (too few rows for the measure)
        detail = {**detail, "estimate_without_interval": float(estimate),
                  "why": "the score is undefined on fewer than two half-samples, so it has no interval"}
        estimate = float("nan")
    return {"measure": label, "measure_name": values.name, "test": test, "variant": variant,
            "score": float(estimate), "ci_low": low, "ci_high": high, "chance": float(chance), "units": units,
            "higher_is_better": True, "beyond_chance": bool(np.isfinite(low) and low > chance),
            "n_rows": n, "n_items": items, "detail": json.dumps(detail, sort_keys=True, default=str)}


# --------------------------------------------------------------------------------------------- the tests
def monotonicity(setup: Setup, values: Values, label: str, n: int) -> list[dict]:
    models = setup.monotonicity_models or list(setup.stores)
    cells = [(a, a) for a in models]
    cells += [(a, b) for a, b in itertools.combinations(models, 2)
              if recipe(setup.specs[a]) == recipe(setup.specs[b])]
    per_cell, used, spearman = [], [], []
    for a, b in cells:
        matrix, draws = _layer_values(setup, values, a, b, n)
        if matrix.shape[0] != matrix.shape[1] or len(matrix) < 3:
            continue  # layer distance |i − j| is defined between models of one depth
        # a layer the measure leaves undefined (a first layer whose rows are all one vector) is left out from the
        # bottom, so the layer distances |i − j| of the others stay as they are
        start = 0
        while start < len(matrix) - 2 and (np.isnan(matrix[start]).all() or np.isnan(matrix[:, start]).all()):
            start += 1
        matrix, draws = matrix[start:, start:], draws[:, start:, start:]
        scored = [scores.monotonicity(matrix, values.similarity)]
        scored += [scores.monotonicity(draw, values.similarity) for draw in draws]
        per_cell.append([[s["correlation"], s["conformity"]] for s in scored])
        used.append(f"{a}" if a == b else f"{a}~{b}")
        spearman.append(round(float(scored[0]["correlation"]), 4))
    if not per_cell:
        return []
    table = np.nanmean(np.array(per_cell), axis=0)  # (1 + R, 2): mean over the cells
    detail = {"cells": used, "spearman": spearman}
    return [
        _result(label, values, "monotonicity", "spearman", table[0, 0], table[1:, 0], n, 0.0, "Spearman ρ",
                len(used), detail, setup.confidence),
        _result(label, values, "monotonicity", "conformity", table[0, 1], table[1:, 1], n, 0.5, "conformity rate",
                len(used), detail, setup.confidence),
    ]


def _layer_values(setup: Setup, values: Values, a: str, b: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every layer of a (X) against every layer of b (Y), on all rows and on the half-samples: from their pair
    table where the job was given one, else computed."""
    stored = pair_tables.layer_values(setup.pair_tables, values.label, values.params, n, len(values.indices), a, b)
    if stored is not None:
        return stored
    Xa = probes_module.layers(setup.stores[a], setup.representation, setup.split)
    Xb = Xa if a == b else probes_module.layers(setup.stores[b], setup.representation, setup.split)
    return values(list(Xa), list(Xb))


def _probe_correct(setup: Setup, model: str, layer: int, grid: list[int]) -> np.ndarray:
    """(K, n) correctness of the probe on `model`'s layer with k components deleted, k on `grid`."""
    probes = pd.read_parquet(setup.probes[model]) if model in setup.probes else probes_module.probe_table(setup, model)
    table = probes[probes["layer"] == layer]
    return np.stack([table.loc[table["k"] == k].sort_values("row")["correct"].to_numpy() for k in grid])


def deletion(setup: Setup, values: Values, label: str, n: int) -> list[dict]:
    """Ding et al.'s design (A.3): within each family of seed siblings among the deletion models, the reference
    is the sibling whose undeleted layer the probe reads best; the rows are (reference, sibling s with k components
    deleted) and (s, reference with k deleted) for every s (the reference itself included) and k. A model without
    siblings gives the (model, model with k deleted) rows alone. ρ between the dissimilarity and |probe accuracy of
    the first, undeleted − of the second, deleted|, averaged over families and layers."""
    models = setup.deletion_models or list(setup.stores)
    families: dict[str, list[str]] = {}
    for model in models:
        families.setdefault(recipe(setup.specs.get(model, {})), []).append(model)
    rhos, used = [], []
    for family in families.values():
        # the compared rows' deleted versions only: the probes' jobs (rule deletion_probes) used the train rows'
        cells = {m: list(probes_module.deletion_cells(setup, m, train=False)) for m in family}
        for index in range(len(setup.deletion_layers)):
            layer, _, grid, _ = cells[family[0]][index]
            correct = {m: _probe_correct(setup, m, cells[m][index][0], grid) for m in family}
            reference = max(family, key=lambda m: correct[m][0].mean())
            X = {m: cells[m][index][1] for m in family}
            deleted = {m: [versions[0] for versions in cells[m][index][3]] for m in family}
            others = [m for m in family if m != reference]
            # (reference, s deleted k) for every s and k; (s, reference deleted k) for the other s
            first, draws_first = values([X[reference]], [d for m in family for d in deleted[m]])
            pairs = [(reference, m, k) for m in family for k in range(len(grid))]
            value, draws = first[0], draws_first[:, 0]
            if others:
                second, draws_second = values([X[m] for m in others], deleted[reference])
                pairs += [(m, reference, k) for m in others for k in range(len(grid))]
                value = np.concatenate([value, second.ravel()])
                draws = np.concatenate([draws, draws_second.reshape(len(draws_second), -1)], axis=1)

            def change(rows):
                return np.array([abs(correct[a][0, rows].mean() - correct[b][k, rows].mean()) for a, b, k in pairs])

            estimate = scores.rank_correlation(values.distance(value), change(np.arange(n)))
            replicates = [scores.rank_correlation(values.distance(draw), change(rows))
                          for draw, rows in zip(draws, values.indices)]
            rhos.append([estimate, *replicates])
            used.append({"models": family, "reference": reference, "layer": layer, "k": grid, "rows": len(pairs),
                         "spearman": round(float(estimate), 4),
                         "probe_accuracy": {m: [round(float(a), 4) for a in correct[m].mean(axis=1)] for m in family}})
    if not rhos:
        return []
    table = np.nanmean(np.array(rhos, dtype=float), axis=0)
    return [_result(label, values, "deletion", "spearman", table[0], table[1:], n, 0.0, "Spearman ρ", len(used),
                    {"cells": used}, setup.confidence)]


def last_layer_matrix(setup: Setup, values: Values, stores: Mapping[str, str | Path], tables: pair_tables.Tables,
                      n: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(models, values (M, M), replicates (R, M, M)) between the models' last layers, the row model as X: from
    their pair tables where `tables` has them, the others computed together (batched per width). No test reads
    a model against itself: the diagonal is NaN."""
    models = list(stores)
    value = np.full((len(models), len(models)), np.nan)
    draws = np.full((len(values.indices), len(models), len(models)), np.nan)
    missing = []
    for (i, a), (j, b) in itertools.permutations(enumerate(models), 2):
        stored = pair_tables.layer_values(tables, values.label, values.params, n, len(values.indices), a, b)
        if stored is None:
            missing.append((i, j))
        else:
            value[i, j], draws[:, i, j] = stored[0][-1, -1], stored[1][:, -1, -1]
    if missing:
        rows, columns = sorted({i for i, _ in missing}), sorted({j for _, j in missing})
        last = {models[k]: probes_module.layers(stores[models[k]], setup.representation, setup.split)[-1]
                for k in {*rows, *columns}}
        block, block_draws = values([last[models[i]] for i in rows], [last[models[j]] for j in columns])
        for i, j in missing:
            value[i, j], draws[:, i, j] = (block[rows.index(i), columns.index(j)],
                                           block_draws[:, rows.index(i), columns.index(j)])
    return models, value, draws


def prediction(setup: Setup, values: Values, label: str, n: int, matrix: tuple) -> list[dict]:
    models = [m for m in matrix[0] if m in setup.predictions]
    if len(models) < 3:
        return []  # fewer than 3 pairs: no rank correlation (the report says so)
    index = [matrix[0].index(m) for m in models]
    value, draws = matrix[1][np.ix_(index, index)], matrix[2][:, index][:, :, index]
    n_labels = int(read_meta(setup.dataset_dir)["n_labels"])
    logits = {m: _logits(setup.predictions[m]) for m in models}
    labels = pd.read_parquet(setup.predictions[models[0]])["label"].to_numpy()
    symmetric = MEASURES[values.name].symmetric
    pairs = (list(itertools.combinations(range(len(models)), 2)) if symmetric else
             [(a, b) for a in range(len(models)) for b in range(len(models)) if a != b])
    correct = {m: logits[m].argmax(axis=1) == labels for m in models}  # ReSi: argmax over every output
    real = {m: logits[m][:, :n_labels] for m in models}  # outputs compared on the dataset's own classes
    per_row = {
        "accuracy": None,
        "disagreement": {(a, b): scores.disagreement(real[models[a]], real[models[b]]) for a, b in pairs},
        "jsd": {(a, b): scores.jsd_bits(real[models[a]], real[models[b]]) for a, b in pairs},
    }
    results = []
    for variant, rows_of in per_row.items():
        def functional(rows):
            if variant == "accuracy":
                return np.array([abs(correct[models[a]][rows].mean() - correct[models[b]][rows].mean())
                                 for a, b in pairs])
            return np.array([rows_of[pair][rows].mean() for pair in pairs])

        distance = values.distance(np.array([value[a, b] for a, b in pairs]))
        estimate = scores.rank_correlation(distance, functional(np.arange(n)))
        replicates = [scores.rank_correlation(values.distance(np.array([draw[a, b] for a, b in pairs])),
                                              functional(rows)) for draw, rows in zip(draws, values.indices)]
        results.append(_result(label, values, "prediction", variant, estimate, replicates, n, 0.0, "Spearman ρ",
                               len(pairs), {"models": models}, setup.confidence))
    return results


def _logits(path: str | Path) -> np.ndarray:
    frame = pd.read_parquet(path)
    return frame[[c for c in frame.columns if c.startswith("logit_")]].to_numpy(np.float64)


def _separation(label: str, values: Values, test: str, variant: str, matrix: tuple, models: list[str],
                groups: list, n: int, setup: Setup) -> list[dict]:
    index = [matrix[0].index(m) for m in models]
    value, draws = matrix[1][np.ix_(index, index)], matrix[2][:, index][:, :, index]
    found = scores.group_separation(value, groups, values.similarity)
    if not found["groups"]:
        return []
    replicates = [scores.group_separation(draw, groups, values.similarity) for draw in draws]
    chance = scores.random_auprc(groups, seed=setup.seed)  # what a random ranking scores; ReSi's share in detail
    detail = {"models": models, "groups": [str(g) for g in groups], "positives": found["positives"],
              "negatives": found["negatives"], "positive_share": found["chance"],
              "conformity": found["conformity"]}
    return [
        _result(label, values, test, f"{variant}auprc", found["auprc"], [r["auprc"] for r in replicates], n,
                chance, "AUPRC", found["groups"], detail, setup.confidence),
        _result(label, values, test, f"{variant}d_prime", found["d_prime"], [r["d_prime"] for r in replicates], n,
                0.0, "d′", found["groups"], detail, setup.confidence),
    ]


def groups_by_design(setup: Setup, values: Values, label: str, n: int, matrices: Mapping[str, tuple]) -> list[dict]:
    results = []
    for option in DESIGN_OPTIONS:
        matrix = matrices["shortcut" if option == "shortcut" else "main"]
        models = list(matrix[0])
        families: dict[str, list[str]] = {}
        for model in models:
            if setup.specs[model].get("source") == "finetune":
                families.setdefault(recipe(setup.specs[model], (option,)), []).append(model)
        for family in families.values():
            groups = [_option_value(setup.specs[m], option) for m in family]
            if len(set(groups)) < 2 or len(family) < 3:
                continue
            results += _separation(label, values, f"groups:{option}", "", matrix, family, groups, n, setup)
    return results


def seeds(setup: Setup, values: Values, label: str, n: int, matrix: tuple) -> list[dict]:
    models = list(matrix[0])
    groups = [recipe(setup.specs[m]) for m in models]
    return _separation(label, values, "seeds", "", matrix, models, groups, n, setup)


# --------------------------------------------------------------------------------------------- the job
def measure_tests(label: str, spec: Mapping, setup: Setup, progress: Callable[[str], None] = print) -> pd.DataFrame:
    """Every test of `setup.tests` for the measure `label` (spec: measure, params): the table of COLUMNS."""
    first = next(iter(setup.stores.values()))
    n = len(split_examples(open_store(first), setup.split))
    values = Values(label, spec, half_samples(n, setup.resamples, setup.seed))
    results: list[dict] = []
    matrices: dict[str, tuple] = {}
    if {"prediction", "groups", "seeds"} & set(setup.tests):
        sides = [("main", setup.stores, setup.pair_tables)]
        if "groups" in setup.tests and setup.shortcut_stores:  # only the shortcut groups read them
            sides.append(("shortcut", setup.shortcut_stores, setup.shortcut_pair_tables))
        for key, stores, tables in sides:
            progress(f"{label}: last layers of {len(stores)} models ({key}), {len(tables)} pair tables")
            matrices[key] = last_layer_matrix(setup, values, stores, tables, n)
        matrices.setdefault("shortcut", matrices["main"])
    for test in setup.tests:
        progress(f"{label}: {test}")
        if test == "monotonicity":
            results += monotonicity(setup, values, label, n)
        elif test == "deletion":
            results += deletion(setup, values, label, n)
        elif test == "prediction":
            results += prediction(setup, values, label, n, matrices["main"])
        elif test == "groups":
            results += groups_by_design(setup, values, label, n, matrices)
        elif test == "seeds":
            results += seeds(setup, values, label, n, matrices["main"])
        else:
            raise ValueError(f"grounding test {test!r}: expected one of {', '.join(TESTS)}")
    return pd.DataFrame(results, columns=COLUMNS)
