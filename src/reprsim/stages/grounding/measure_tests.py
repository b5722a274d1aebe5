"""Which measure to believe: one measure's scores on the grounding tests (Ding et al. 2021; ReSi, Klabunde et
al. 2024), each with a half-sample interval over the similarity split's rows and an item-level null.

The tests (docs/numerics.md §13a; they follow both works' public code, github.com/js-d/sim_metric and
github.com/mklabunde/resi, and depart where §13a says):

  monotonicity  within a trained model and across seed siblings, similarity falls as layers get farther apart
                (ReSi test 6): Spearman ρ per anchor layer and side, sign-flipped for similarities; and
                its conformity rate. Null: the layers' order permuted
  deletion      the k lowest-variance principal components of a layer deleted (Ding §4): the measure
                between the layer and each deleted version against the change in a cross-validated linear
                probe's held-out accuracy; Spearman ρ, on the layers where deletion lowers that accuracy
                (elsewhere the test cannot rank). Null: the accuracy changes permuted over the items
  layer         Ding's layer experiment: a reference seed's last layer against every layer of every seed
                sibling, dissimilarity against |probe accuracy difference|; Spearman ρ. Null as deletion's
  prediction    over pairs of seed siblings of one fine-tuning recipe (ReSi's seed models), last-layer
                dissimilarity against |accuracy difference|, prediction disagreement and the Jensen-Shannon
                divergence of the outputs (ReSi tests 1-2); Spearman ρ. Null: ReSi's pairing permutation (the
                models' outputs permuted over the models). Over every recipe: descriptive only
  groups        models built to differ (label noise, shortcut rate, augmentation): within-group against
                between-group pairs at the last layer (ReSi tests 3-5); AUPRC against random rankings of the
                pairs (their mean is the chance level; ReSi's is the share of within-group pairs); d′ descriptive
  seeds         seed siblings of one recipe against models of other recipes (ReSi's group separation with the
                recipes as groups); AUPRC as groups', d′ descriptive
  specificity   Ding's specificity: for seed siblings, is the other seed's same-depth layer the closest of its
                layers; share of layers (chance 1/L). Null: the other seed's layers' labels permuted

Every test is computed on all rows (the score) and on each half-sample of them (the replicates): the values
of the measure on the same row subsets as every pair job's interval, read from the pair jobs' tables where they
computed them (reprsim.stages.grounding.pair_tables: the monotonicity cells, the last layers of two models), else
from reprsim.metrics.api; the functional side (probe accuracy, output differences) on the same subsets, and the
interval is reprsim.inference.resampling.interval's. The interval covers the rows; the item-level null
(reprsim.stages.grounding.nulls) covers the choice of items; a pass needs both.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.design.relations import recipe, seed_families
from reprsim.inference.resampling import half_samples, interval, subsample_size
from reprsim.io.datasets import read_meta
from reprsim.io.store import open_store, split_examples
from reprsim.measure_registry import MEASURES
from reprsim.metrics import api
from reprsim.metrics._inputs import constant_layers
from reprsim.stages.grounding import nulls, pair_tables
from reprsim.stages.grounding import probes as probes_module
from reprsim.stages.grounding import scores
from reprsim.stages.grounding.setup import TESTS, Setup

DESIGN_OPTIONS = ("label_noise", "shortcut", "augment")  # the fine-tuning options that make groups by design

COLUMNS = ["measure", "measure_name", "test", "variant", "score", "ci_low", "ci_high", "chance", "units",
           "higher_is_better", "beyond_chance", "n_rows", "n_items", "null", "null_mean", "null_quantile", "p_value",
           "min_p", "null_draws", "null_exact", "decision", "passes", "detail"]


class Values:
    """A measure's values (direction X→Y) for lists of representations, on all rows and on half-samples."""

    def __init__(self, label: str, spec: Mapping, indices: np.ndarray):
        self.label, self.name, self.params = label, spec["measure"], dict(spec.get("params") or {})
        self.similarity = MEASURES[self.name].kind == "similarity"
        self.indices = indices

    def __call__(self, left: list[np.ndarray], right: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(len(left), len(right)) values and (R, len(left), len(right)) replicates; representations of one
        width are computed together (the measures are batched over layers). A representation whose rows are all
        one vector gets NaN, as in the pair jobs (reprsim.metrics._inputs.constant_layers)."""
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


RANGES = {"Spearman ρ": (-1.0, 1.0), "conformity rate": (0.0, 1.0), "AUPRC": (0.0, 1.0), "share of layers": (0.0, 1.0)}


class Null:
    """An item-level null: what it permutes (`kind`), its draws of the score, whether they are every permutation,
    and the best score the test allows (the smallest p is that of `best`)."""

    def __init__(self, kind: str, draws, exact: bool = False, best: float = 1.0, min_p: float | None = None):
        self.kind, self.draws, self.exact, self.best = kind, np.asarray(draws, dtype=float), exact, best
        self.min_p = min_p  # a permutation null's smallest p (nulls.smallest_p); None: that of `best`


def _result(label: str, values: Values, test: str, variant: str, estimate: float, replicates: np.ndarray, n: int,
            chance: float, units: str, items: int, detail: Mapping, setup: Setup, null: Null | None = None,
            decision: str | None = None) -> dict:
    """One row of COLUMNS. `decision`: nulls.DESCRIPTIVE (shown, never ranked or passed) or nulls.CANNOT_RANK;
    None: decided by nulls.decide from the item-level null and the row interval."""
    low, high = interval(np.asarray(estimate, dtype=float), np.asarray(replicates, dtype=float), n,
                         subsample_size(n), setup.confidence)
    # the t interval can step past a bounded score's range (a ρ of 0.96 with an end at 1.02): clipped
    low, high = (float(np.clip(bound, *RANGES[units])) if units in RANGES else float(bound) for bound in (low, high))
    if np.isfinite(estimate) and not (np.isfinite(low) and np.isfinite(high)):
        # no score without its interval: the half-samples leave it undefined (too few rows for the measure)
        detail = {**detail, "estimate_without_interval": float(estimate),
                  "why": "the score is undefined on fewer than two half-samples, so it has no interval"}
        estimate = float("nan")
    stats = (nulls.summary(estimate, null.draws, null.exact, null.best, setup.confidence, null.min_p)
             if null is not None else
             {"null_mean": float("nan"), "null_quantile": float("nan"), "p_value": float("nan"),
              "min_p": float("nan"), "null_draws": 0, "null_exact": False})
    if decision is None:
        decision = nulls.decide(estimate, low, chance, stats["p_value"], stats["min_p"], items, setup.min_items,
                                setup.confidence)
    return {"measure": label, "measure_name": values.name, "test": test, "variant": variant,
            "score": float(estimate), "ci_low": low, "ci_high": high, "chance": float(chance), "units": units,
            "higher_is_better": True, "beyond_chance": bool(np.isfinite(low) and low > chance),
            "n_rows": n, "n_items": int(items), "null": null.kind if null is not None else "", **stats,
            "decision": decision, "passes": decision == nulls.PASS,
            "detail": json.dumps(detail, sort_keys=True, default=str)}


# --------------------------------------------------------------------------------------------- the tests
def monotonicity(setup: Setup, values: Values, label: str, n: int) -> list[dict]:
    models = setup.monotonicity_models or list(setup.stores)
    cells = [(a, a) for a in models]
    cells += [(a, b) for a, b in itertools.combinations(models, 2)
              if recipe(setup.specs[a]) == recipe(setup.specs[b])]
    per_cell, used, spearman, matrices = [], [], [], []
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
        matrices.append(matrix)
    if not per_cell:
        return []
    table = np.nanmean(np.array(per_cell), axis=0)  # (1 + R, 2): mean over the cells
    # the null: the layers' order permuted (one permutation per draw, the same for both sides of every cell of
    # that depth), the score recomputed; a measure that follows depth rather than distance scores ~0 there too
    by_depth: dict[int, list[np.ndarray]] = {}
    for matrix in matrices:
        by_depth.setdefault(len(matrix), []).append(matrix)
    # every layer order where one depth has few enough (the identity among them), else null_draws drawn per depth
    exact = len(by_depth) == 1 and math.factorial(len(matrices[0])) <= setup.null_draws + 1
    rng = np.random.default_rng(setup.seed)
    orders_of = {depth: nulls.permutations(depth, setup.null_draws, setup.seed)[0] if exact else
                 np.stack([rng.permutation(depth) for _ in range(setup.null_draws)]) for depth in by_depth}
    size = len(next(iter(orders_of.values())))
    sums, counts = np.zeros((size, 2)), np.zeros((size, 2))
    for depth, group in by_depth.items():
        for draw, order in enumerate(orders_of[depth]):
            for matrix in group:
                found = scores.monotonicity(matrix[np.ix_(order, order)], values.similarity)
                pair = np.array([found["correlation"], found["conformity"]])
                sums[draw] += np.nan_to_num(pair)
                counts[draw] += np.isfinite(pair)
    with np.errstate(invalid="ignore"):
        null = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    items = sum(len(m) * (len(m) - 1) // 2 for m in matrices)  # the layer pairs ranked
    # the identity and the reversal keep every |i − j|: no score gets below 2 / L! of every layer order
    smallest = nulls.smallest_p(min(by_depth), setup.null_draws, invariant=2)
    detail = {"cells": used, "spearman": spearman, "layers": [len(m) for m in matrices]}
    return [
        _result(label, values, "monotonicity", "spearman", table[0, 0], table[1:, 0], n, 0.0, "Spearman ρ",
                items, detail, setup, Null("layer order permuted", null[:, 0], exact, min_p=smallest)),
        _result(label, values, "monotonicity", "conformity", table[0, 1], table[1:, 1], n, 0.5, "conformity rate",
                items, detail, setup, Null("layer order permuted", null[:, 1], exact, min_p=smallest)),
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


def _probes(setup: Setup, model: str) -> pd.DataFrame:
    return _read_probes(str(setup.probes[model])) if model in setup.probes else probes_module.probe_table(setup, model)


@functools.lru_cache(maxsize=None)
def _read_probes(path: str) -> pd.DataFrame:
    """A probe table, read once per job (deletion reads it per layer, the layer test again)."""
    return pd.read_parquet(path)


def _probe_correct(setup: Setup, model: str, layer_index: int, grid: list[int]) -> np.ndarray:
    """(K, n) correctness of the probe on `model`'s layer with k components deleted, k on `grid`."""
    table = _probes(setup, model)
    table = table[table["layer"] == layer_index]
    return np.stack([table.loc[table["k"] == k].sort_values("row")["correct"].to_numpy() for k in grid])


def head_accuracy(setup: Setup, model: str, n: int) -> float | None:
    """The model's own head's accuracy on the compared rows (its predictions table), None without one."""
    if model not in setup.predictions:
        return None
    frame = pd.read_parquet(setup.predictions[model], columns=["row", "label", "predicted"]).sort_values("row")
    return float((frame["predicted"] == frame["label"]).to_numpy()[:n].mean())


def _permuted_rho(distance: list[np.ndarray], functional: list[np.ndarray], draws: int, seed: int) -> np.ndarray:
    """The item-level null of a mean Spearman ρ over cells: each cell's functional values permuted over its items,
    ρ recomputed, averaged over the cells; `draws` draws."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    null = np.empty(draws)
    ranked = [stats.rankdata(d) for d in distance]
    for draw in range(draws):
        rhos = [np.corrcoef(r, stats.rankdata(rng.permutation(f)))[0, 1] for r, f in zip(ranked, functional)]
        null[draw] = np.nanmean(rhos) if np.isfinite(rhos).any() else np.nan
    return null


def deletion(setup: Setup, values: Values, label: str, n: int) -> list[dict]:
    """Ding et al.'s design (A.3): within each family of seed siblings among the deletion models, the reference
    is the sibling whose undeleted layer the probe reads best; the rows are (reference, sibling s with k components
    deleted) and (s, reference with k deleted) for every s (the reference itself included) and k. A model without
    siblings gives the (model, model with k deleted) rows alone. ρ between the dissimilarity and |probe accuracy of
    the first, undeleted − of the second, deleted|, averaged over families and layers.

    A (family, layer) cell enters only where deleting components costs every member held-out accuracy
    (scores.accuracy_change: the drop to the last k exceeds twice its paired error, the trend is negative) and no
    member's undeleted probe falls more than `probe_gap` short of its own head (where it has one, on the same
    rows): elsewhere |Δ accuracy| is row noise or the relief of an overfitted probe, and ranking measures by it
    rewards whichever grows with k. No cell enters: one row, the decision "cannot rank", the curves in detail."""
    models = setup.deletion_models or list(setup.stores)
    rhos, used, checked, functional_items, distance_items = [], [], [], [], []
    for family in seed_families(setup.specs, models):
        # the compared rows' deleted versions only: the probes' jobs (rule deletion_probes) used the train rows'
        cells = {m: list(probes_module.deletion_cells(setup, m, train=False)) for m in family}
        heads = {m: head_accuracy(setup, m, n) for m in family}
        for index in range(len(setup.deletion_layers)):
            layer, _, grid, _ = cells[family[0]][index]
            correct = {m: _probe_correct(setup, m, cells[m][index][0], grid) for m in family}
            change = {m: scores.accuracy_change(correct[m]) for m in family}
            short = {m: heads[m] - change[m]["accuracy"][0] for m in family if heads[m] is not None}
            cell = {"models": family, "layer": layer, "k": grid,
                    "probe": {m: {**change[m], "head_accuracy": heads[m], "short_of_head": short.get(m)}
                              for m in family}}
            reasons = [f"deleting components does not lower {m}'s probe accuracy ({change[m]['accuracy'][0]:.3f} at "
                       f"k = 0, {change[m]['accuracy'][-1]:.3f} at k = {grid[-1]})"
                       for m in family if not change[m]["falls"]]
            reasons += [f"{m}'s undeleted probe is {gap:.3f} short of its head" for m, gap in short.items()
                        if gap > setup.probe_gap]
            checked.append({**cell, "used": not reasons, "why": "; ".join(reasons)})
            if reasons:
                continue
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

            def accuracy_gap(rows):
                return np.array([abs(correct[a][0, rows].mean() - correct[b][k, rows].mean()) for a, b, k in pairs])

            functional = accuracy_gap(np.arange(n))
            estimate = scores.rank_correlation(values.distance(value), functional)
            replicates = [scores.rank_correlation(values.distance(draw), accuracy_gap(rows))
                          for draw, rows in zip(draws, values.indices)]
            rhos.append([estimate, *replicates])
            keep = np.isfinite(value)
            distance_items.append(values.distance(value)[keep])
            functional_items.append(functional[keep])
            used.append({"models": family, "reference": reference, "layer": layer, "k": grid, "rows": len(pairs),
                         "spearman": round(float(estimate), 4)})
    detail = {"cells": used, "checked": checked}
    if not rhos:
        why = "; ".join(c["why"] for c in checked) or "no deletion layer"
        return [_result(label, values, "deletion", "spearman", float("nan"), [], n, 0.0, "Spearman ρ", 0,
                        {**detail, "why": why}, setup, decision=nulls.CANNOT_RANK)]
    table = np.nanmean(np.array(rhos, dtype=float), axis=0)
    null = _permuted_rho(distance_items, functional_items, setup.null_draws, setup.seed)
    smallest = nulls.smallest_p(max(len(f) for f in functional_items), setup.null_draws)
    return [_result(label, values, "deletion", "spearman", table[0], table[1:], n, 0.0, "Spearman ρ",
                    sum(len(f) for f in functional_items), detail, setup,
                    Null("accuracy changes permuted over the items", null, min_p=smallest))]


def layer(setup: Setup, values: Values, label: str, n: int) -> list[dict]:
    """Ding et al.'s layer experiment (A.2): the seed family of the monotonicity models with probes (the largest;
    its members' layers but the embeddings, probed at k = 0 by rule deletion_probes); the reference seed is the
    one whose last layer the probe reads best; every layer of every seed (the reference's own included) against
    that reference layer: Spearman ρ between the dissimilarity (reference as X) and |probe accuracy difference|."""
    probed = [m for m in (setup.monotonicity_models or list(setup.stores)) if m in setup.probes]
    if not probed:
        return []
    family = seed_families(setup.specs, probed)[0]
    correct = {m: _probes(setup, m) for m in family}
    depth = {m: int(correct[m]["layer"].max()) for m in family}
    if len(set(depth.values())) != 1:
        return []
    top = depth[family[0]]

    def at(m, layer_index):
        table = correct[m]
        return table.loc[(table["layer"] == layer_index) & (table["k"] == 0)].sort_values("row")["correct"].to_numpy()

    rows = {(m, i): at(m, i) for m in family for i in range(1, top + 1)}
    reference = max(family, key=lambda m: rows[(m, top)].mean())
    items = list(rows)
    value, draws = [], []
    for m in family:
        matrix, replicate = _layer_values(setup, values, reference, m, n)
        value.append(matrix[top, 1:top + 1])
        draws.append(replicate[:, top, 1:top + 1])
    value, draws = np.concatenate(value), np.concatenate(draws, axis=1)

    def accuracy_gap(subset):
        base = rows[(reference, top)][subset].mean()
        return np.array([abs(base - rows[item][subset].mean()) for item in items])

    functional = accuracy_gap(np.arange(n))
    estimate = scores.rank_correlation(values.distance(value), functional)
    replicates = [scores.rank_correlation(values.distance(draw), accuracy_gap(subset))
                  for draw, subset in zip(draws, values.indices)]
    keep = np.isfinite(value)
    null = _permuted_rho([values.distance(value)[keep]], [functional[keep]], setup.null_draws, setup.seed)
    detail = {"models": family, "reference": reference, "reference_layer": top,
              "probe_accuracy": {m: [round(float(rows[(m, i)].mean()), 4) for i in range(1, top + 1)]
                                 for m in family}}
    return [_result(label, values, "layer", "spearman", estimate, replicates, n, 0.0, "Spearman ρ", int(keep.sum()),
                    detail, setup, Null("accuracy differences permuted over the layers", null,
                                        min_p=nulls.smallest_p(int(keep.sum()), setup.null_draws)))]


def specificity(setup: Setup, values: Values, label: str, n: int) -> list[dict]:
    """Ding et al.'s specificity (after Kornblith et al.): for every two seed siblings among the monotonicity
    models, in both directions, the share of one's layers (the embeddings left out) whose closest layer of the
    other is the same-depth one (scores.same_depth_hits). Chance 1/L; null: the other's layer labels permuted."""
    models = setup.monotonicity_models or list(setup.stores)
    oriented = [(a, b) for family in seed_families(setup.specs, models) for a, b in itertools.permutations(family, 2)]
    matrices, replicates, used = [], [], []
    for a, b in oriented:
        matrix, draws = _layer_values(setup, values, a, b, n)
        if matrix.shape[0] != matrix.shape[1] or len(matrix) < 3:
            continue
        matrices.append(matrix[1:, 1:])
        replicates.append(draws[:, 1:, 1:])
        used.append(f"{a}→{b}")
    if not matrices:
        return []

    def share(blocks):
        return float(np.nanmean(np.concatenate([scores.same_depth_hits(m, values.similarity) for m in blocks])))

    estimate = share(matrices)
    draws = [share([r[d] for r in replicates]) for d in range(len(values.indices))]
    rng = np.random.default_rng(setup.seed)
    null = np.array([share([m[:, rng.permutation(len(m))] for m in matrices]) for _ in range(setup.null_draws)])
    chance = float(np.mean([1.0 / len(m) for m in matrices]))
    items = sum(len(m) for m in matrices)
    return [_result(label, values, "specificity", "same_depth", estimate, draws, n, chance, "share of layers",
                    items, {"pairs": used}, setup, Null("the other seed's layer labels permuted", null,
                                                        min_p=nulls.smallest_p(min(len(m) for m in matrices),
                                                                               setup.null_draws)))]


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


def prediction_family(setup: Setup) -> list[str]:
    """The models the prediction test correlates over: grounding.prediction.models, else the largest family of
    seed siblings of one recipe among the models with predictions (ReSi: the seed models of the standard
    recipe)."""
    if setup.prediction_models:
        return [m for m in setup.prediction_models if m in setup.predictions]
    families = seed_families(setup.specs, [m for m in setup.stores if m in setup.predictions])
    return families[0] if families else []


def prediction(setup: Setup, values: Values, label: str, n: int, matrix: tuple) -> list[dict]:
    """ReSi tests 1-2 over the seed siblings of one recipe, with ReSi's pairing permutation as the null (the
    models' outputs permuted over the models: exact where M! ≤ null_draws + 1); over every model with predictions
    as a descriptive variant ("all recipes: …"), which mixes recipes and so tests groups as much as prediction."""
    family = prediction_family(setup)
    results = _prediction(setup, values, label, n, matrix, family, "") if len(family) >= 3 else []
    every = [m for m in matrix[0] if m in setup.predictions]
    if setup.all_recipes and len(every) >= 3 and set(every) != set(family):
        results += _prediction(setup, values, label, n, matrix, every, "all recipes: ")
    return results


def _prediction(setup: Setup, values: Values, label: str, n: int, matrix: tuple, models: list[str],
                prefix: str) -> list[dict]:
    index = [matrix[0].index(m) for m in models]
    value, draws = matrix[1][np.ix_(index, index)], matrix[2][:, index][:, :, index]
    n_labels = int(read_meta(setup.dataset_dir)["n_labels"])
    logits = {m: _logits(setup.predictions[m]) for m in models}
    labels = pd.read_parquet(setup.predictions[models[0]])["label"].to_numpy()
    symmetric = MEASURES[values.name].symmetric
    pairs = (list(itertools.combinations(range(len(models)), 2)) if symmetric else
             [(a, b) for a in range(len(models)) for b in range(len(models)) if a != b])
    everyone = [(a, b) for a in range(len(models)) for b in range(len(models)) if a != b]
    correct = {m: logits[m].argmax(axis=1) == labels for m in models}  # ReSi: argmax over every output
    real = {m: logits[m][:, :n_labels] for m in models}  # outputs compared on the dataset's own classes
    per_row = {
        "accuracy": None,
        "disagreement": {(a, b): scores.disagreement(real[models[a]], real[models[b]]) for a, b in everyone},
        "jsd": {(a, b): scores.jsd_bits(real[models[a]], real[models[b]]) for a, b in everyone},
    }
    orders, exact = nulls.permutations(len(models), setup.null_draws, setup.seed)
    results = []
    for variant, rows_of in per_row.items():
        def functional(rows, order=range(len(models))):
            if variant == "accuracy":
                return np.array([abs(correct[models[order[a]]][rows].mean() - correct[models[order[b]]][rows].mean())
                                 for a, b in pairs])
            return np.array([rows_of[(order[a], order[b])][rows].mean() for a, b in pairs])

        distance = values.distance(np.array([value[a, b] for a, b in pairs]))
        estimate = scores.rank_correlation(distance, functional(np.arange(n)))
        replicates = [scores.rank_correlation(values.distance(np.array([draw[a, b] for a, b in pairs])),
                                              functional(rows)) for draw, rows in zip(draws, values.indices)]
        detail = {"models": models}
        if prefix:
            results.append(_result(label, values, "prediction", prefix + variant, estimate, replicates, n, 0.0,
                                   "Spearman ρ", len(pairs), detail, setup, decision=nulls.DESCRIPTIVE))
            continue
        every_row = np.arange(n)
        null = [scores.rank_correlation(distance, functional(every_row, order)) for order in orders]
        results.append(_result(label, values, "prediction", variant, estimate, replicates, n, 0.0, "Spearman ρ",
                               len(pairs), detail, setup, Null("outputs permuted over the models", null, exact,
                                                               min_p=nulls.smallest_p(len(models), setup.null_draws))))
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
    # the null: random rankings of the same pairs; its mean is the chance level (ReSi's share is in detail)
    null = scores.random_auprcs(groups, draws=max(setup.null_draws, 999), seed=setup.seed)
    detail = {"models": models, "groups": [str(g) for g in groups], "positives": found["positives"],
              "negatives": found["negatives"], "positive_share": found["chance"],
              "conformity": found["conformity"]}
    items = found["positives"] + found["negatives"]
    return [
        _result(label, values, test, f"{variant}auprc", found["auprc"], [r["auprc"] for r in replicates], n,
                float(np.nanmean(null)), "AUPRC", items, detail, setup, Null("random rankings of the pairs", null)),
        # d′ changes under monotone transforms of the measure and rests on a few positives: shown, not ranked
        _result(label, values, test, f"{variant}d_prime", found["d_prime"], [r["d_prime"] for r in replicates], n,
                0.0, "d′", items, detail, setup, decision=nulls.DESCRIPTIVE),
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
        elif test == "layer":
            results += layer(setup, values, label, n)
        elif test == "specificity":
            results += specificity(setup, values, label, n)
        elif test == "prediction":
            results += prediction(setup, values, label, n, matrices["main"])
        elif test == "groups":
            results += groups_by_design(setup, values, label, n, matrices)
        elif test == "seeds":
            results += seeds(setup, values, label, n, matrices["main"])
        else:
            raise ValueError(f"grounding test {test!r}: expected one of {', '.join(TESTS)}")
    return pd.DataFrame(results, columns=COLUMNS)
