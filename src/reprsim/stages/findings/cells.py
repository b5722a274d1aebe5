"""Cells of the pair tables (one value per model pair, layer pair, measure, direction) with their
half-sample replicates, and statistics over them with intervals (reprsim.inference.resampling).

Replicate r of every pair job of one dataset and split rests on the same rows, so a statistic
that combines cells (a difference between layers, between model pairs) is computed on the
estimates and on each replicate alike, and gets the t interval of reprsim.inference.resampling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from reprsim.inference.resampling import interval
from reprsim.stages.findings.intervals import MIN_UNITS, t_interval

KEY = ("model_a", "model_b", "layer_a", "layer_b")
Cell = tuple[str, str, int, int]
# statistic: values (k, cells) -> (k,), the same function on the estimates (k = 1) and the replicates
Statistic = Callable[[np.ndarray], np.ndarray]


def cell(a: str, b: str, layer_a: int, layer_b: int) -> Cell:
    """A cell with the models in the pair tables' order (names sorted; layers follow their model)."""
    return (a, b, int(layer_a), int(layer_b)) if a <= b else (b, a, int(layer_b), int(layer_a))


@dataclass(frozen=True)
class Cells:
    """Chosen cells of one measure and direction: the estimates (cells,) and replicates (R, cells)."""

    cells: tuple[Cell, ...]
    estimate: np.ndarray
    replicates: np.ndarray
    n: int
    m: int

    def positions(self, wanted) -> np.ndarray:
        index = {c: i for i, c in enumerate(self.cells)}
        return np.array([index[c] for c in wanted], dtype=int)

    def defined(self, wanted) -> list[Cell]:
        """The cells of `wanted` whose estimate is defined (a constant layer gives NaN)."""
        values = self.estimate[self.positions(wanted)] if wanted else np.array([])
        return [c for c, v in zip(wanted, values) if np.isfinite(v)]


def select(pairs: pd.DataFrame, replicates: pd.DataFrame, wanted, measure: str,
           direction: str = "symmetric") -> Cells:
    """The estimates and replicates of `wanted` cells of one dataset's and representation's tables."""
    wanted = list(dict.fromkeys(wanted))
    keys = pd.DataFrame(wanted, columns=list(KEY)).assign(position=np.arange(len(wanted)))
    rows = pairs[(pairs["measure"] == measure) & (pairs["direction"] == direction)]
    found = keys.merge(rows[[*KEY, "value"]], on=list(KEY), how="left", indicator=True)
    missing = found[found["_merge"] == "left_only"]
    if len(missing):
        raise ValueError(f"pairs.parquet has no {measure!r} ({direction}) row for {len(missing)} cell(s), "
                         f"e.g. {tuple(missing.iloc[0][list(KEY)])}; rerun aggregate_pairs")
    if found["position"].duplicated().any():
        raise ValueError(f"pairs.parquet holds duplicate {measure!r} rows for one cell")
    estimate = found.sort_values("position")["value"].to_numpy(dtype=float)
    reps = replicates[(replicates["measure"] == measure) & (replicates["direction"] == direction)]
    reps = keys.merge(reps[[*KEY, "replicate", "value", "n", "m"]], on=list(KEY), how="inner")
    if reps.empty:
        raise ValueError(f"pair_resamples.parquet has no {measure!r} ({direction}) replicates for these cells; "
                         "rerun aggregate_pairs")
    sizes = reps[["n", "m"]].drop_duplicates()
    if len(sizes) != 1:
        raise ValueError(f"replicates of {measure!r} rest on different row counts {sizes.values.tolist()}: "
                         "cells of one statistic must come from the same split")
    lacking = sorted(set(range(len(wanted))) - set(reps["position"]))
    if lacking:
        raise ValueError(f"pair_resamples.parquet has no {measure!r} ({direction}) replicates for cell "
                         f"{wanted[lacking[0]]} (and {len(lacking) - 1} more); rerun aggregate_pairs")
    values = np.full((int(reps["replicate"].max()) + 1, len(wanted)), np.nan)
    values[reps["replicate"].to_numpy(), reps["position"].to_numpy()] = reps["value"].to_numpy(dtype=float)
    return Cells(tuple(wanted), estimate, values, int(sizes["n"].iloc[0]), int(sizes["m"].iloc[0]))


def replicate_method(cells: Cells) -> str:
    return (f"half-sample interval: the statistic on each of {len(cells.replicates)} replicates of "
            f"m = {cells.m} of the n = {cells.n} rows (shared by all cells), t interval")


def mean_of_units(cells: Cells, units: dict[str, Statistic], confidence: float, unit_name: str,
                  independent: bool = True) -> tuple[float, float, float, str]:
    """(estimate, low, high, method) of the mean over units of a per-unit statistic.

    With at least MIN_UNITS `independent` units (e.g. seed pairs: the issue's "seed pairs are the
    unit for statements about models of this kind"), the units are the sample: a t interval over
    their estimates. Otherwise the interval comes from the replicates of the pooled statistic.
    """
    names = list(units)
    if not names:
        raise ValueError("no units to average over")

    def pooled(values: np.ndarray) -> np.ndarray:
        return np.mean([units[name](values) for name in names], axis=0)

    if independent and len(names) >= MIN_UNITS:
        per_unit = [float(units[name](cells.estimate[None, :])[0]) for name in names]
        estimate, low, high = t_interval(per_unit, confidence)
        return estimate, low, high, (f"t interval over the {len(names)} {unit_name} as independent units "
                                     f"(unit values {', '.join(f'{v:.4g}' for v in per_unit)})")
    estimate = float(pooled(cells.estimate[None, :])[0])
    low, high = interval(estimate, pooled(cells.replicates), cells.n, cells.m, confidence)
    pooling = f"fewer than {MIN_UNITS}, pooled" if independent else "pooled"
    return estimate, low, high, f"{len(names)} {unit_name} ({pooling}); " + replicate_method(cells)


def weighted(cells: Cells, weights: dict[Cell, float]) -> Statistic:
    """The linear statistic Σ w_c · value_c over some cells."""
    positions = cells.positions(list(weights))
    w = np.array(list(weights.values()), dtype=float)
    return lambda values: values[:, positions] @ w


def mean_difference(first: list[Cell], second: list[Cell]) -> dict[Cell, float]:
    """Weights of mean(first) − mean(second) (a cell in both gets both weights)."""
    weights: dict[Cell, float] = {}
    for group, sign in ((first, 1.0), (second, -1.0)):
        for c in group:
            weights[c] = weights.get(c, 0.0) + sign / len(group)
    return weights
