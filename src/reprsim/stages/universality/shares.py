"""How much of the similarity seed siblings share survives a change of one factor (docs/numerics.md §13c).

For a measure, a reference layer l (of the reference recipe's depth L) and a factor level V:

    u(l) = (S_V(l) − S_floor(l)) / (S_seeds(l) − S_floor(l))

S_seeds is the mean similarity of the reference's seed siblings at layer l; S_V the mean similarity of V's models
with the reference models of other seeds (a shared seed can mean a shared initialisation, or for a checkpoint the
same run, which no factor undoes), each V model met at the same relative depth as l (between two of its layers:
their values interpolated, :func:`reprsim.tables.layers.matching_weights`); S_floor the same for the floor models (untrained
copies of the reference architecture). Values are the pair tables' similarity-oriented series (reprsim.tables.pair_series:
a distance negated, asymmetric directions averaged); the ratio is the same in either orientation. u = 1: as alike
as another seed; u = 0: no more alike than the floor. A depth group (lower, middle, upper third of the reference's
layers by relative depth) averages each term over its layers, then takes the ratio.

Two intervals, both Fieller's for a ratio (:func:`reprsim.inference.resampling.fieller`), from the covariance of numerator
and denominator:

- **rows only**: replicate r of every pair job rests on the same rows (reprsim.inference.resampling), so every term is
  recomputed on replicate r's rows; their covariance says how u moves with the rows for these models;
- **seeds and rows**: besides, the reference's, the level's and the floor's models are each resampled with
  replacement, `seed_draws` times, one group at a time at all rows (a couple weighs the product of its two models'
  counts; a model never meets itself or its own run). Rows and each group are drawn independently, so their
  covariances add, each group's times k/(k − 1) (the bootstrap variance of a mean of k draws is (k − 1)/k of the
  unbiased one), and the t quantile's degrees of freedom are Satterthwaite's: R − 1 for the rows, k − 1 for a
  group of k models. A level of one model cannot show its recipe's seed spread: its verdict rests on the rows.

The terms must come from tables of one n and m (:func:`check_same_rows`). A verdict is a test of u's interval
against the equivalence margin δ (:func:`verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from reprsim.inference.resampling import fieller, interval, satterthwaite, scale
from reprsim.tables.layers import matching_weights
from reprsim.tables.universality import THIRDS

SEED_DRAWS = 400
NEAR_ZERO_G = 0.25  # Fieller's g = (t·se(D)/D)²: at 1/4 the denominator's interval reaches down to D/2


@dataclass(frozen=True)
class PairArrays:
    """One measure's similarity-oriented values between models: sorted pair -> (L_a+1, L_b+1) values and
    (R, L_a+1, L_b+1) replicates, all on n rows with replicates of m."""

    values: Mapping[tuple[str, str], np.ndarray]
    draws: Mapping[tuple[str, str], np.ndarray]
    n: int
    m: int

    def between(self, x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, replicates) with x's layers on the first layer axis."""
        pair = tuple(sorted((x, y)))
        if pair not in self.values:
            raise KeyError(f"no pair table of {pair[0]} and {pair[1]} for this measure: the study compares them "
                           "(similarity.pairs must include them; `pairs: study` does)")
        values, draws = self.values[pair], self.draws[pair]
        return (values, draws) if x == pair[0] else (values.T, draws.transpose(0, 2, 1))


def check_same_rows(series: pd.DataFrame, replicate_series: pd.DataFrame, what: str) -> tuple[int, int]:
    """(n, m) shared by every pair table a study reads; a ValueError naming the pairs when they differ (their
    replicates would rest on different rows, and u's interval would mix them)."""
    sizes = replicate_series.groupby(["model_a", "model_b"])[["n", "m"]].agg(["min", "max"])
    ns = set(sizes[("n", "min")]) | set(sizes[("n", "max")]) | set(series["n"])
    ms = set(sizes[("m", "min")]) | set(sizes[("m", "max")])
    if len(ns) > 1 or len(ms) > 1:
        listing = ", ".join(f"{a}/{b}: n={row[('n', 'min')]}, m={row[('m', 'min')]}"
                            for (a, b), row in sizes.iterrows())
        raise ValueError(f"{what}: the pair tables rest on different rows ({listing}); every term of u must be "
                         "computed on the same rows in each replicate (one similarity split, one intervals seed)")
    return int(next(iter(ns))), int(next(iter(ms)))


@dataclass(frozen=True)
class StitchArrays(PairArrays):
    """The functional sense's values: (bottom, top) -> (L_bottom+1, L_top+1) grids of −penalty (the stitched
    model's shortfall from the top model alone, negated so that higher = more alike), NaN where not stitched;
    directed, as stitching is: :meth:`between` gives x's layers stitched into y."""

    def between(self, x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
        if (x, y) not in self.values:
            raise KeyError(f"no stitch table of {x} into {y}: the functional sense stitches every level's, the "
                           "floor's and the other seeds' models into each reference model")
        return self.values[(x, y)], self.draws[(x, y)]


# the metric whose penalty the functional sense reads, per stitching objective (reprsim.stages.stitch.objectives)
STITCH_METRIC = {"language_modeling": "cross_entropy", "classification": "accuracy"}


def stitch_arrays(table: pd.DataFrame, replicates: pd.DataFrame) -> tuple[StitchArrays, dict[str, int]]:
    """The stitch jobs' tables (reprsim.stages.stitch.pairs: one map, one seed) as :class:`StitchArrays`, and each
    model's depth; a ValueError where the jobs were scored on different rows."""
    metric = STITCH_METRIC[table["objective"].iloc[0]]
    mine, reps = (frame[frame["metric"] == metric].assign(value=lambda f: -f["penalty"].astype(float))
                  for frame in (table, replicates))
    n, m = check_same_rows(mine, reps, "the functional sense's stitch jobs")
    depths = {**dict(zip(mine["model_a"], mine["n_layers_a"])), **dict(zip(mine["model_b"], mine["n_layers_b"]))}
    depths = {name: int(depth) for name, depth in depths.items()}
    values, draws = _grids(mine, reps, lambda a, b, rows: (depths[a] + 1, depths[b] + 1))
    return StitchArrays(values, draws, n, m), depths


def _grids(series: pd.DataFrame, replicate_series: pd.DataFrame, shape_of) -> tuple[dict, dict]:
    """pair (model_a, model_b) -> its `value`s on a grid of layer_a × layer_b (shape_of(a, b, rows)), and -> their
    (R, ...) replicates, NaN where a table has no row."""
    resamples = int(replicate_series["replicate"].max()) + 1
    values, draws = {}, {}
    for (a, b), rows in series.groupby(["model_a", "model_b"], sort=False):
        shape = shape_of(a, b, rows)
        values[(a, b)] = np.full(shape, np.nan)
        values[(a, b)][rows["layer_a"].to_numpy(), rows["layer_b"].to_numpy()] = rows["value"].to_numpy(float)
        draws[(a, b)] = np.full((resamples, *shape), np.nan)
    for (a, b), rows in replicate_series.groupby(["model_a", "model_b"], sort=False):
        draws[(a, b)][rows["replicate"].to_numpy(), rows["layer_a"].to_numpy(),
                      rows["layer_b"].to_numpy()] = rows["value"].to_numpy(float)
    return values, draws


def pair_arrays(series: pd.DataFrame, replicate_series: pd.DataFrame, measure: str,
                null_series: pd.DataFrame | None = None) -> tuple[PairArrays, PairArrays | None]:
    """One measure's series (reprsim.tables.pair_series.oriented, one dataset and representation) as arrays per pair; and,
    given the oriented chance levels, theirs (constant over replicates: the null is computed on all rows)."""
    mine = series[series["measure"] == measure]
    reps = replicate_series[replicate_series["measure"] == measure]
    n, m = check_same_rows(mine, reps, f"measure {measure!r}")
    resamples = int(reps["replicate"].max()) + 1
    values, draws = _grids(mine, reps, lambda a, b, rows: (int(rows["layer_a"].max()) + 1,
                                                           int(rows["layer_b"].max()) + 1))
    nulls = {}
    if null_series is None:
        return PairArrays(values, draws, n, m), None
    for (a, b), rows in null_series[null_series["measure"] == measure].groupby(["model_a", "model_b"], sort=False):
        grid = np.full(values[(a, b)].shape, np.nan)
        grid[rows["layer_a"].to_numpy(), rows["layer_b"].to_numpy()] = rows["value"].to_numpy(float)
        nulls[(a, b)] = grid
    null_draws = {pair: np.broadcast_to(grid, (resamples, *grid.shape)) for pair, grid in nulls.items()}
    return PairArrays(values, draws, n, m), PairArrays(nulls, null_draws, n, m)


@dataclass(frozen=True)
class Term:
    """One term's couples of (model, reference model), each couple's similarity at every reference layer: values
    (C, L+1) and row replicates (C, R, L+1). Its value is the mean over couples (:meth:`mean`; under seed draws a
    weighted one, :meth:`drawn`)."""

    couples: list[tuple[str, str]]
    values: np.ndarray
    draws: np.ndarray

    def mean(self) -> tuple[np.ndarray, np.ndarray]:
        """(values (L+1,), row replicates (R, L+1)): the plain mean over couples."""
        return self.values.mean(axis=0), self.draws.mean(axis=0)

    def drawn(self, first: Mapping[str, np.ndarray], second: Mapping[str, np.ndarray], draws: int) -> np.ndarray:
        """(draws, L+1) means over couples at all rows under seed draws: a couple weighs the times its first model is
        drawn (`first`: model -> (draws,) counts) times the times its reference model is (`second`); a model not
        named counts once. NaN where a draw leaves no couple."""
        one = np.ones(draws)
        weights = np.stack([first.get(a, one) * second.get(b, one) for a, b in self.couples], axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (weights @ self.values) / weights.sum(axis=1, keepdims=True)


def term(arrays: PairArrays, couples: Sequence[tuple[str, str]], depths: Mapping[str, int],
         reference_depth: int) -> Term:
    """Each (model, reference model) couple's similarity at each reference layer 0..L, the model met at the same
    relative depth (:func:`reprsim.tables.layers.matching_weights`: one layer, or two interpolated)."""
    if not couples:
        raise ValueError("a term needs at least one couple of models")
    layers = np.arange(reference_depth + 1)
    values, draws = [], []
    for model, reference in couples:
        v, d = arrays.between(model, reference)
        value, draw = np.zeros(len(layers)), np.zeros((d.shape[0], len(layers)))
        for l in layers:
            for layer, weight in matching_weights(int(l), reference_depth, depths[model]):
                value[l] += weight * v[layer, l]
                draw[:, l] += weight * d[:, layer, l]
        values.append(value)
        draws.append(draw)
    return Term(list(couples), np.array(values), np.array(draws))


def depth_groups(reference_depth: int) -> dict[str, np.ndarray]:
    """Each reference layer alone ("layer l") and the lower, middle and upper thirds by relative depth l/L
    (embeddings, layer 0, in the lower third)."""
    layers = np.arange(reference_depth + 1)
    relative = layers / max(reference_depth, 1)
    third = np.minimum((relative * 3).astype(int), 2)
    groups = {name: layers[third == i] for i, name in enumerate(THIRDS) if (third == i).any()}
    return {**groups, **{f"layer {l}": np.array([l]) for l in layers}}


def verdict(low: float, high: float, margin: float) -> str:
    """The verdict of u's interval against the equivalence margin δ, each a test: no more similar than the floor
    when it lies within [−δ, δ]; less similar than the floor below −δ; less similar when it lies within (δ, 1 − δ);
    as similar as seeds within [1 − δ, 1 + δ]; more similar than seeds above 1 + δ; else inconclusive (an interval
    below 1 − δ that reaches past δ without lying within [−δ, δ] is neither "less similar" nor "floor")."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "undefined"
    if -margin <= low and high <= margin:
        return "no more similar than the floor"
    if high < -margin:
        return "less similar than the floor"
    if low > margin and high < 1 - margin:
        return "less similar"
    if low >= 1 - margin and high <= 1 + margin:
        return "as similar as seeds"
    if low > 1 + margin:
        return "more similar than seeds"
    return "inconclusive"


def _covariance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """2 × 2 covariance of paired draws, NaN draws left out."""
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 2:
        return np.full((2, 2), np.nan)
    return np.cov(np.stack([x[keep], y[keep]]))


def _rows_fieller(numerator: float, denominator: float, numerator_r: np.ndarray, denominator_r: np.ndarray,
                  n: int, m: int, confidence: float) -> tuple[np.ndarray, int, tuple[float, float, float]]:
    """The rows' covariance of numerator and denominator (from their half-sample replicates, scaled to n rows), its
    degrees of freedom (replicates defined for both, less one) and Fieller's (low, high, g) from them."""
    cov = _covariance(numerator_r, denominator_r) * scale(n, m) ** 2
    df = int(np.sum(np.isfinite(numerator_r) & np.isfinite(denominator_r))) - 1
    return cov, df, fieller(numerator, denominator, cov, df, confidence)


def share(variant: tuple[np.ndarray, np.ndarray], seeds: tuple[np.ndarray, np.ndarray],
          floor: tuple[np.ndarray, np.ndarray], layers: np.ndarray, n: int, m: int, confidence: float,
          margin: float, seed_draws: Sequence | None = None) -> dict:
    """u over the reference `layers` (each term averaged over them first), its rows-only interval and, given
    `seed_draws` (per resampled group of models: the (B, L+1) values of the variant, seeds and floor terms under B
    draws of that group at all rows, the group's size, and whether it is the level), its seeds-and-rows interval; the
    verdict from the seeds-and-rows interval where the level has seeds to resample, else from the rows only;
    and the three terms with their rows-only intervals. Undefined when the seed siblings are not clearly above the
    floor (Fieller's interval is then unbounded: the share of nothing is no share)."""
    def mean(pair):
        return float(np.mean(pair[0][layers])), np.mean(pair[1][:, layers], axis=1)

    (v, v_r), (s, s_r), (f, f_r) = mean(variant), mean(seeds), mean(floor)
    numerator, denominator = v - f, s - f
    rows_cov, rows_df, (rows_low, rows_high, rows_g) = _rows_fieller(numerator, denominator, v_r - f_r, s_r - f_r,
                                                                     n, m, confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = numerator / denominator
    row = {"u": u, "rows_ci_low": rows_low, "rows_ci_high": rows_high, "seeds_ci_low": np.nan,
           "seeds_ci_high": np.nan}
    low, high, g, basis = rows_low, rows_high, rows_g, "rows only"
    if seed_draws:
        parts, dfs, level_resampled = [rows_cov], [rows_df], False
        for (v_b, s_b, f_b), size, is_level in seed_draws:
            v_b, s_b, f_b = (np.mean(x[:, layers], axis=1) for x in (v_b, s_b, f_b))
            # the bootstrap variance of a mean of `size` draws is (size − 1)/size of the unbiased one
            parts.append(_covariance(v_b - f_b, s_b - f_b) * size / (size - 1))
            dfs.append(size - 1)
            level_resampled |= is_level
        df = satterthwaite(numerator, denominator, parts, dfs)
        joint_low, joint_high, joint_g = fieller(numerator, denominator, sum(parts), df, confidence)
        row["seeds_ci_low"], row["seeds_ci_high"] = joint_low, joint_high
        if level_resampled:  # else a level of one model: its verdict rests on the rows (its seeds' spread unknown)
            low, high, g, basis = joint_low, joint_high, joint_g, "seeds and rows"
    row.update({"ci_low": low, "ci_high": high, "interval_basis": basis, "fieller_g": g,
                "denominator_near_zero": not np.isfinite(g) or g >= NEAR_ZERO_G})
    defined = np.isfinite(low) and np.isfinite(high)
    row["verdict"] = verdict(low, high, margin) if defined else "undefined"
    row["seeds_above_floor"] = bool(np.isfinite(rows_low))
    if not defined:
        row["u"] = np.nan
    for name, (value, draws) in (("variant", (v, v_r)), ("seeds", (s, s_r)), ("floor", (f, f_r))):
        row[f"s_{name}"] = value
        row[f"s_{name}_low"], row[f"s_{name}_high"] = interval(value, draws, n, m, confidence)
    return row


@dataclass(frozen=True)
class Terms:
    """One measure's three terms for one level, as :func:`share` reads them: (values (L+1,), row replicates
    (R, L+1)) of the variant, the seed siblings and the floor, and the level's seed draws (per resampled group:
    the three terms' (B, L+1) values, the group's size, whether it is the level)."""

    variant: tuple[np.ndarray, np.ndarray]
    seeds: tuple[np.ndarray, np.ndarray]
    floor: tuple[np.ndarray, np.ndarray]
    seed_draws: Sequence


def pooled(measures: Sequence[Terms], layers: np.ndarray) -> Terms:
    """Several measures' terms as one, whose u over `layers` is the mean of theirs: each measure's terms are divided
    by its seed siblings' lead over the floor there (s̄ − f̄, a constant: the point estimate's) and by the number of
    measures, then summed, so that the sum's denominator is 1 and its numerator the mean u. Replicate r rests on the
    same rows in every measure and seed draw b on the same models, so the sum's replicates carry the measures'
    covariance, and :func:`share` gives the pooled u Fieller's interval as it gives one measure's. Replicates
    beyond the fewest any measure has are dropped (a measure's first R replicates are the same half-samples at any
    R: reprsim.inference.resampling.half_samples)."""
    if not measures:
        raise ValueError("pooling needs at least one measure")
    resamples = min(terms.variant[1].shape[0] for terms in measures)
    weights = [1.0 / (len(measures) * (np.mean(t.seeds[0][layers]) - np.mean(t.floor[0][layers])))
               for t in measures]

    def total(part: str) -> tuple[np.ndarray, np.ndarray]:
        return (sum(w * getattr(t, part)[0] for w, t in zip(weights, measures)),
                sum(w * getattr(t, part)[1][:resamples] for w, t in zip(weights, measures)))

    groups = []
    for g, (_, size, is_level) in enumerate(measures[0].seed_draws):
        draws = tuple(sum(w * t.seed_draws[g][0][i] for w, t in zip(weights, measures)) for i in range(3))
        groups.append((draws, size, is_level))
    return Terms(total("variant"), total("seeds"), total("floor"), groups)


def null_share(variant: tuple[np.ndarray, np.ndarray], seeds: tuple[np.ndarray, np.ndarray],
               variant_null: np.ndarray, seeds_null: np.ndarray, layers: np.ndarray, n: int, m: int,
               confidence: float) -> dict:
    """u with each term's own shuffled-row chance level as its zero, (S_V − Z_V)/(S_seeds − Z_seeds), and its
    rows-only Fieller interval (the chance levels are computed on all rows: constants here). Beside u against the
    untrained floor, it shows how much the choice of zero decides."""
    (v, v_r), (s, s_r) = ((float(np.mean(x[0][layers])), np.mean(x[1][:, layers], axis=1)) for x in (variant, seeds))
    z_v, z_s = float(np.mean(variant_null[layers])), float(np.mean(seeds_null[layers]))
    numerator, denominator = v - z_v, s - z_s
    _, _, (low, high, _) = _rows_fieller(numerator, denominator, v_r - z_v, s_r - z_s, n, m, confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = numerator / denominator if np.isfinite(low) else np.nan
    return {"u_null_zero": u, "u_null_zero_low": low, "u_null_zero_high": high}
