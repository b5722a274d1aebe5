"""Do the measures agree? Every configured measure as one series over the compared cells (higher = more
similar), the rank agreement of every two measures, and the model pairs two measures order oppositely.

A measure's series: its values with distances negated, and an asymmetric measure's two directions averaged
(cell by cell, and replicate by replicate: replicate r of every pair job rests on the same rows), so every
measure has one value per cell in one orientation. Two scopes: every compared cell (model pair × layer pair;
a model's layer with itself left out, where every measure gives its identity value) and the model pairs
(two distinct models; the mean over matching layers, as the pair summary). Intervals: the statistic on the
estimates and on each shared replicate, t interval (reprsim.inference.resampling), as every finding.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reprsim.inference.resampling import interval
from reprsim.tables.layers import layer_pairs, model_depths
from reprsim.tables.pair_series import BLOCK, CELL, oriented

STATISTICS = ("kendall_tau_b", "spearman_rho")
AGREEMENT_COLUMNS = ["dataset", "representation", "scope", "measure_x", "measure_y", "statistic", "estimate",
                     "ci_low", "ci_high", "n_items", "n", "m"]
DISCORDANCE_COLUMNS = ["dataset", "representation", "measure_x", "measure_y", "pair_1", "pair_2",
                       "difference_x", "x_low", "x_high", "difference_y", "y_low", "y_high", "strength", "n", "m"]


@dataclass(frozen=True)
class Block:
    """One dataset's and representation's series: items (cells or model pairs) × measures, with replicates."""

    dataset: str
    representation: str
    scope: str
    items: list
    measures: list[str]
    values: np.ndarray  # (items, measures)
    replicates: np.ndarray  # (R, items, measures)
    n: int
    m: int


def blocks(series: pd.DataFrame, replicate_series: pd.DataFrame, measures: list[str] | None = None):
    """Block per dataset, representation and scope ("cells", "model pairs"), over `measures` (default: every
    measure of the block, in table order) that each dataset's and representation's tables hold."""
    replicate_groups = dict(iter(replicate_series.groupby(BLOCK)))
    for (dataset, representation), frame in series.groupby(BLOCK, sort=False):
        labels = [m for m in (measures or list(dict.fromkeys(frame["measure"]))) if m in set(frame["measure"])]
        if len(labels) < 2:
            continue
        reps = replicate_groups.get((dataset, representation))
        if reps is None:
            raise ValueError(f"pair_resamples.parquet has no replicates for {dataset}/{representation}; "
                             "rerun aggregate_pairs")
        frame = frame[frame["measure"].isin(labels)]
        reps = reps[reps["measure"].isin(labels)]
        different = ~((frame["model_a"] == frame["model_b"]) & (frame["layer_a"] == frame["layer_b"]))
        wide = frame[different].pivot_table(index=CELL, columns="measure", values="value", dropna=False)
        wide = wide.reindex(columns=labels)
        cells = list(wide.index)
        position = {c: i for i, c in enumerate(cells)}
        sizes = reps[["n", "m"]].drop_duplicates()
        if len(sizes) != 1:
            raise ValueError(f"replicates of {dataset}/{representation} rest on different row counts "
                             f"{sizes.values.tolist()}")
        n, m = (int(v) for v in sizes.iloc[0])
        R = int(reps["replicate"].max()) + 1
        draws = np.full((R, len(cells), len(labels)), np.nan)
        keys = list(zip(*(reps[c] for c in CELL)))
        rows = np.array([position.get(k, -1) for k in keys])
        kept = rows >= 0
        column = reps["measure"].map({label: j for j, label in enumerate(labels)}).to_numpy()
        draws[reps["replicate"].to_numpy()[kept], rows[kept], column[kept]] = reps["value"].to_numpy(float)[kept]
        values = wide.to_numpy(float)
        yield Block(dataset, representation, "cells", cells, labels, values, draws, n, m)
        model_pairs, pair_values, pair_draws = _model_pairs(cells, values, draws, frame)
        if model_pairs:
            yield Block(dataset, representation, "model pairs", model_pairs, labels, pair_values, pair_draws, n, m)


def _model_pairs(cells: list, values: np.ndarray, draws: np.ndarray, frame: pd.DataFrame):
    """Distinct model pairs: the mean over matching layers (NaN layers left out), estimates and replicates."""
    depth = model_depths(frame)
    position = {c: i for i, c in enumerate(cells)}
    names, means, mean_draws = [], [], []
    for a, b in sorted({(c[0], c[1]) for c in cells if c[0] != c[1]}):
        wanted = [position.get((a, b, la, lb)) for la, lb in layer_pairs(depth[a], depth[b], "matching")]
        if any(w is None for w in wanted):
            continue  # a pair compared on fewer layers than its models have (not written by the compare stage)
        with warnings.catch_warnings():  # a pair whose layers are all undefined gives NaN, as it should
            warnings.simplefilter("ignore", RuntimeWarning)
            means.append(np.nanmean(values[wanted], axis=0))
            mean_draws.append(np.nanmean(draws[:, wanted], axis=1))
        names.append((a, b))
    if not names:
        return [], np.empty((0, values.shape[1])), np.empty((draws.shape[0], 0, values.shape[1]))
    return names, np.stack(means), np.stack(mean_draws, axis=1)


def rank_agreement(x: np.ndarray, y: np.ndarray, statistic: str) -> float:
    """Kendall τ_b or Spearman ρ (scipy; average ranks for ties) over the items where both are defined;
    NaN with fewer than 3 such items or a constant side."""
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    from scipy import stats  # here, not at the top: scipy.stats alone takes 0.5 s to import
    if statistic == "kendall_tau_b":
        return float(stats.kendalltau(x, y, variant="b").statistic)
    if statistic == "spearman_rho":
        return float(stats.spearmanr(x, y).statistic)
    raise ValueError(f"unknown agreement statistic {statistic!r}; one of {STATISTICS}")


def agreement(block: Block, confidence: float) -> list[dict]:
    """Every two measures' rank agreement over the block's items, with its half-sample interval."""
    rows = []
    for i, j in itertools.combinations(range(len(block.measures)), 2):
        x, y = block.values[:, i], block.values[:, j]
        items = int((np.isfinite(x) & np.isfinite(y)).sum())
        for statistic in STATISTICS:
            estimate = rank_agreement(x, y, statistic)
            draws = [rank_agreement(d[:, i], d[:, j], statistic) for d in block.replicates]
            low, high = interval(estimate, draws, block.n, block.m, confidence)
            low, high = max(low, -1.0), min(high, 1.0)  # recentring can cross the statistic's bounds; NaN stays NaN
            rows.append({"dataset": block.dataset, "representation": block.representation, "scope": block.scope,
                         "measure_x": block.measures[i], "measure_y": block.measures[j], "statistic": statistic,
                         "estimate": estimate, "ci_low": low, "ci_high": high, "n_items": items,
                         "n": block.n, "m": block.m})
    return rows


def discordance(block: Block, confidence: float) -> list[dict]:
    """Every two model pairs that two measures order oppositely, each difference's interval excluding 0.
    strength: the smaller of the two differences in units of its own interval's half-width (how far both
    intervals stay from 0); the table is sorted by it, strongest first."""
    if block.scope != "model pairs" or len(block.items) < 2:
        return []
    first, second = np.triu_indices(len(block.items), k=1)
    difference = block.values[first] - block.values[second]  # (pairs of pairs, measures)
    draws = block.replicates[:, first] - block.replicates[:, second]
    low, high = interval(difference, draws, block.n, block.m, confidence)
    sign = np.where(low > 0, 1, np.where(high < 0, -1, 0))
    half = np.maximum((high - low) / 2, np.finfo(float).tiny)
    rows = []
    for i, j in itertools.combinations(range(len(block.measures)), 2):
        for k in np.flatnonzero(sign[:, i] * sign[:, j] < 0):
            strength = min(abs(difference[k, i]) / half[k, i], abs(difference[k, j]) / half[k, j])
            rows.append({"dataset": block.dataset, "representation": block.representation,
                         "measure_x": block.measures[i], "measure_y": block.measures[j],
                         "pair_1": " vs ".join(block.items[first[k]]), "pair_2": " vs ".join(block.items[second[k]]),
                         "difference_x": difference[k, i], "x_low": low[k, i], "x_high": high[k, i],
                         "difference_y": difference[k, j], "y_low": low[k, j], "y_high": high[k, j],
                         "strength": float(strength), "n": block.n, "m": block.m})
    return sorted(rows, key=lambda row: -row["strength"])


def measure_agreement(pairs: pd.DataFrame, replicates: pd.DataFrame, confidence: float,
                      measures: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(agreement table, discordance table) of the pair tables (see AGREEMENT_COLUMNS, DISCORDANCE_COLUMNS)."""
    series, replicate_series = oriented(pairs, replicates)
    agreed, discordant = [], []
    for block in blocks(series, replicate_series, measures):
        agreed += agreement(block, confidence)
        discordant += discordance(block, confidence)
    return (pd.DataFrame(agreed, columns=AGREEMENT_COLUMNS),
            pd.DataFrame(discordant, columns=DISCORDANCE_COLUMNS).sort_values("strength", ascending=False,
                                                                              ignore_index=True))
