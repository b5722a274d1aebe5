"""How much of the similarity seed siblings share survives a change of one factor (docs/numerics.md §13c).

For a measure, a reference layer l (of the reference recipe's depth L) and a factor level V:

    u(l) = (S_V(l) − S_floor(l)) / (S_seeds(l) − S_floor(l))

S_seeds is the mean similarity of the reference's seed siblings at layer l; S_V the mean similarity of V's models
with the reference models of other seeds (a shared seed can mean a shared initialisation, or for a checkpoint the
same run, which no factor undoes), each V model's layer at the same relative depth as l; S_floor the same for the
floor models (an untrained copy of the reference architecture). Values are the pair tables' similarity-oriented
series (reprsim.pair_series: a distance negated, asymmetric directions averaged); the ratio is the same in
either orientation. u = 1: as alike as another seed; u = 0: no more alike than the floor. A depth group (lower,
middle, upper third of the reference's layers by relative depth) averages each term over its layers, then
takes the ratio.

Intervals: replicate r of every pair job rests on the same rows (one split, one seed: reprsim.resampling), so
every term is computed on replicate r's rows, u_r from them, and the interval is the recentred percentile of
the u_r; the terms must come from tables of one n and m (:func:`check_same_rows`). A verdict reads the
interval against the equivalence margin δ (:func:`verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from reprsim.layers import matching_layer
from reprsim.resampling import interval

THIRDS = ("lower", "middle", "upper")
VERDICTS = ("as similar as seeds", "more similar than seeds", "less similar", "no more similar than the floor",
            "inconclusive", "undefined")


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


def pair_arrays(series: pd.DataFrame, replicate_series: pd.DataFrame, measure: str) -> PairArrays:
    """One measure's series (reprsim.pair_series.oriented, one dataset and representation) as arrays per pair."""
    mine = series[series["measure"] == measure]
    reps = replicate_series[replicate_series["measure"] == measure]
    n, m = check_same_rows(mine, reps, f"measure {measure!r}")
    resamples = int(reps["replicate"].max()) + 1
    values, draws = {}, {}
    for (a, b), rows in mine.groupby(["model_a", "model_b"], sort=False):
        shape = (int(rows["layer_a"].max()) + 1, int(rows["layer_b"].max()) + 1)
        grid = np.full(shape, np.nan)
        grid[rows["layer_a"].to_numpy(), rows["layer_b"].to_numpy()] = rows["value"].to_numpy(float)
        values[(a, b)] = grid
        draws[(a, b)] = np.full((resamples, *shape), np.nan)
    for (a, b), rows in reps.groupby(["model_a", "model_b"], sort=False):
        draws[(a, b)][rows["replicate"].to_numpy(), rows["layer_a"].to_numpy(),
                      rows["layer_b"].to_numpy()] = rows["value"].to_numpy(float)
    return PairArrays(values, draws, n, m)


def term(arrays: PairArrays, couples: Sequence[tuple[str, str]], depths: Mapping[str, int],
         reference_depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean similarity over (model, reference model) `couples` at each reference layer 0..L, each model's
    layer at the same relative depth: (L+1,) values and (R, L+1) replicates."""
    if not couples:
        raise ValueError("a term needs at least one couple of models")
    layers = np.arange(reference_depth + 1)
    values, draws = [], []
    for model, reference in couples:
        matched = np.array([matching_layer(int(l), reference_depth, depths[model]) for l in layers])
        v, d = arrays.between(model, reference)
        values.append(v[matched, layers])
        draws.append(d[:, matched, layers])
    return np.mean(values, axis=0), np.mean(draws, axis=0)


def depth_groups(reference_depth: int) -> dict[str, np.ndarray]:
    """Each reference layer alone ("layer l") and the lower, middle and upper thirds by relative depth l/L
    (embeddings, layer 0, in the lower third)."""
    layers = np.arange(reference_depth + 1)
    relative = layers / max(reference_depth, 1)
    third = np.minimum((relative * 3).astype(int), 2)
    groups = {f"{name} third": layers[third == i] for i, name in enumerate(THIRDS) if (third == i).any()}
    return {**groups, **{f"layer {l}": np.array([l]) for l in layers}}


def verdict(low: float, high: float, margin: float) -> str:
    """The verdict of u's interval against the equivalence margin δ: no more similar than the floor when it
    contains 0 or lies below δ; less similar when it lies below 1 − δ; as similar as seeds when it lies within
    [1 − δ, 1 + δ]; more similar than seeds above 1 + δ; else inconclusive."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "undefined"
    if low <= 0 <= high or high < margin:
        return "no more similar than the floor"
    if high < 1 - margin:
        return "less similar"
    if low >= 1 - margin and high <= 1 + margin:
        return "as similar as seeds"
    if low > 1 + margin:
        return "more similar than seeds"
    return "inconclusive"


def share(variant: tuple[np.ndarray, np.ndarray], seeds: tuple[np.ndarray, np.ndarray],
          floor: tuple[np.ndarray, np.ndarray], layers: np.ndarray, n: int, m: int, confidence: float,
          margin: float) -> dict:
    """u over the reference `layers` (each term averaged over them first) with its interval and verdict, and the
    three terms with theirs. Undefined when the seed siblings are not clearly above the floor (the interval of
    S_seeds − S_floor reaches 0): the share of nothing is no share."""
    def mean(pair):
        return float(np.mean(pair[0][layers])), np.mean(pair[1][:, layers], axis=1)

    (v, v_r), (s, s_r), (f, f_r) = mean(variant), mean(seeds), mean(floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        u, u_r = (v - f) / (s - f), (v_r - f_r) / (s_r - f_r)
    gap_low, gap_high = interval(s - f, s_r - f_r, n, m, confidence)
    low, high = interval(u, u_r, n, m, confidence)
    defined = np.isfinite(gap_low) and gap_low > 0
    row = {"u": u if defined else np.nan, "ci_low": low if defined else np.nan, "ci_high": high if defined else np.nan,
           "verdict": verdict(low, high, margin) if defined else "undefined",
           "seeds_above_floor": bool(defined)}
    for name, (value, draws) in (("variant", (v, v_r)), ("seeds", (s, s_r)), ("floor", (f, f_r))):
        row[f"s_{name}"] = value
        row[f"s_{name}_low"], row[f"s_{name}_high"] = interval(value, draws, n, m, confidence)
    return row
