"""Statistics that combine stitching jobs, shared by the report and the findings (torch-free: tables in,
numbers out; the stitch stage writes the tables, docs/numerics.md §12a).

A stitching table has one row per bottom model f (model_a), top model g (model_b), layer pair (l, m),
map φ, seed and metric; its replicates table the same cells' penalties on each half-sample of the
evaluation rows. Every job of one dataset draws the same half-samples (same n, same seed), so
replicate r of a → b, of b → a and of a → a rest on the same rows: a statistic that combines jobs (one
direction against the other, a pair against f's self-stitch) is computed on the estimates and on each
replicate alike and gets its interval from :func:`reprsim.inference.resampling.interval`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from reprsim.inference.resampling import interval

Cell = tuple[str, str, int, int]  # (f, g, l, m): bottom model, top model, layer of f, layer of g
KEY = ["model_a", "model_b", "layer_a", "layer_b"]
# the score a task's figures, tables and claims read
MAIN_METRIC = {"classification": "accuracy", "language_modeling": "cross_entropy"}
METRIC_TEXT = {"accuracy": "accuracy", "matthews_correlation": "Matthews correlation",
               "cross_entropy": "cross-entropy (nats per token)"}


def main_metric(rows: pd.DataFrame) -> str:
    """accuracy for classification, cross_entropy for language modelling (else the first metric present)."""
    metrics = list(dict.fromkeys(rows["metric"]))
    if not metrics:
        raise ValueError("the stitching table has no rows")
    objectives = list(dict.fromkeys(rows["objective"])) if "objective" in rows else []
    preferred = MAIN_METRIC.get(objectives[0]) if len(objectives) == 1 else None
    return preferred if preferred in metrics else metrics[0]


def phis(rows: pd.DataFrame) -> list[str]:
    """The maps φ of a table, in the order the jobs ran them (the config's)."""
    return list(dict.fromkeys(rows["phi"]))


def learned_phi(names) -> str:
    """The first learned map (not identity); identity when it is the only one."""
    names = list(names)
    return next((phi for phi in names if phi != "identity"), names[0] if names else "identity")


def summary_phi(names) -> str:
    """Identity stitching when it was run (Brown et al. 2023, Fig. 2), else the first map."""
    names = list(names)
    return "identity" if "identity" in names else names[0]


def first_seed(rows: pd.DataFrame) -> int:
    """The seed every map was run under: the identity's (scored under the first seed), else the first row's."""
    identity = rows[rows["phi"] == "identity"]
    return int((identity if len(identity) else rows)["seed"].iloc[0])


def penalty_text(metric: str) -> str:
    """What a penalty of this metric is, for axis labels and table headers."""
    if metric == "cross_entropy":
        return "cross-entropy of the stitched model − of g (nats per token)"
    return f"{METRIC_TEXT.get(metric, metric)} of g − of the stitched model"


@dataclass(frozen=True)
class Penalties:
    """The penalties of one dataset's stitched cells for one map and metric, each the mean over the seeds
    it was run under: estimates (cells,) and half-sample replicates (R, cells) on n evaluation rows."""

    dataset: str
    phi: str
    metric: str
    cells: tuple[Cell, ...]
    estimate: np.ndarray
    replicates: np.ndarray
    n: int
    m: int
    seeds: tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "_index", {c: i for i, c in enumerate(self.cells)})

    def __contains__(self, cell) -> bool:
        return tuple(cell) in self._index

    def weighted(self, weights: dict[Cell, float]) -> tuple[float, np.ndarray]:
        """(estimate, replicates (R,)) of the linear statistic Σ w_c · penalty_c."""
        index = self._index
        positions = np.array([index[c] for c in weights], dtype=int)
        w = np.array(list(weights.values()), dtype=float)
        return float(self.estimate[positions] @ w), self.replicates[:, positions] @ w

    def interval(self, estimate: float, replicates: np.ndarray, confidence: float) -> tuple[float, float]:
        return interval(estimate, replicates, self.n, self.m, confidence)

    def method(self) -> str:
        seeds = f"; each cell the mean over seeds {', '.join(map(str, self.seeds))}" if len(self.seeds) > 1 else ""
        return (f"half-sample interval: the statistic on each of {len(self.replicates)} replicates of m = {self.m} "
                f"of the n = {self.n} evaluation rows (the same rows in every stitching job of the dataset), "
                f"t interval{seeds}")


def penalties(table: pd.DataFrame, replicates: pd.DataFrame, dataset: str, phi: str, metric: str) -> Penalties:
    """Every cell of `dataset` stitched with `phi`, scored by `metric`, with its replicates."""
    rows = table[(table["dataset"] == dataset) & (table["phi"] == phi) & (table["metric"] == metric)]
    if rows.empty:
        raise ValueError(f"the stitching table has no {phi} rows of {metric} on {dataset}")
    estimate = rows.groupby(KEY, sort=True)["penalty"].mean()
    cells = tuple((str(a), str(b), int(la), int(lb)) for a, b, la, lb in estimate.index)
    reps = replicates[(replicates["dataset"] == dataset) & (replicates["phi"] == phi)
                      & (replicates["metric"] == metric)]
    sizes = reps[["n", "m"]].drop_duplicates()
    if len(sizes) != 1:
        raise ValueError(f"stitching replicates of {dataset} ({phi}, {metric}) rest on row counts "
                         f"{sizes.values.tolist()}: every job of a dataset must score the same split; rerun "
                         "aggregate_stitching")
    per_cell = reps.groupby([*KEY, "replicate"], sort=True)["penalty"].mean().reset_index()
    positions = pd.DataFrame(list(cells), columns=KEY).assign(position=np.arange(len(cells)))
    per_cell = per_cell.merge(positions, on=KEY, how="inner")
    lacking = sorted(set(range(len(cells))) - set(per_cell["position"]))
    if lacking:
        raise ValueError(f"stitching_resamples.parquet has no replicates for {cells[lacking[0]]} ({phi}, {metric}) "
                         f"and {len(lacking) - 1} more cell(s); rerun aggregate_stitching")
    values = np.full((int(reps["replicate"].max()) + 1, len(cells)), np.nan)
    values[per_cell["replicate"].to_numpy(), per_cell["position"].to_numpy()] = per_cell["penalty"].to_numpy(float)
    return Penalties(dataset, phi, metric, cells, estimate.to_numpy(dtype=float), values,
                     int(sizes["n"].iloc[0]), int(sizes["m"].iloc[0]), tuple(sorted(int(s) for s in set(rows["seed"]))))


def matched_cells(pens: Penalties, a: str, b: str) -> list[tuple[Cell, Cell]]:
    """(a → b at (l, m), b → a at (m, l)) for every cell stitched both ways, by layer."""
    return [(c, (b, a, c[3], c[2])) for c in pens.cells if c[:2] == (a, b) and (b, a, c[3], c[2]) in pens]


def difference_weights(pairs: list[tuple[Cell, Cell]], scale: float = 1.0) -> dict[Cell, float]:
    """Weights of scale · mean over (first, second) of penalty(first) − penalty(second)."""
    weights: dict[Cell, float] = {}
    for first, second in pairs:
        weights[first] = weights.get(first, 0.0) + scale / len(pairs)
        weights[second] = weights.get(second, 0.0) - scale / len(pairs)
    return weights


ASYMMETRY_COLUMNS = ["dataset", "model_a", "model_b", "phi", "metric", "layer_a", "layer_b", "cells", "penalty_ab",
                     "penalty_ab_low", "penalty_ab_high", "penalty_ba", "penalty_ba_low", "penalty_ba_high",
                     "difference", "difference_low", "difference_high", "n", "seeds"]


def asymmetry(table: pd.DataFrame, replicates: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Every unordered pair {a, b} of distinct models stitched both ways (a < b by name), per dataset and
    map, the main metric: one row per matched cell (a → b at (l, m) against b → a at (m, l)) and one row of
    their mean (layer_a, layer_b missing; `cells` counts them). Penalties and the difference
    a → b − b → a with intervals from the replicates."""
    out = []
    for dataset, rows in table.groupby("dataset", sort=True):
        metric = main_metric(rows)
        directed = set(zip(rows["model_a"], rows["model_b"]))
        pairs = sorted({tuple(sorted(p)) for p in directed if p[0] != p[1] and (p[1], p[0]) in directed})
        if not pairs:
            continue
        for phi in phis(rows):
            pens = penalties(table, replicates, dataset, phi, metric)
            for a, b in pairs:
                matched = matched_cells(pens, a, b)
                if not matched:
                    continue
                groups = [([pair], (pair[0][2], pair[0][3])) for pair in matched] + [(matched, (None, None))]
                for group, (layer_a, layer_b) in groups:
                    row = {"dataset": dataset, "model_a": a, "model_b": b, "phi": phi, "metric": metric,
                           "layer_a": layer_a, "layer_b": layer_b, "cells": len(group), "n": pens.n,
                           "seeds": len(pens.seeds)}
                    for name, weights in (("penalty_ab", {f: 1.0 / len(group) for f, _ in group}),
                                          ("penalty_ba", {s: 1.0 / len(group) for _, s in group}),
                                          ("difference", difference_weights(group))):
                        estimate, reps = pens.weighted(weights)
                        row[name] = estimate
                        row[f"{name}_low"], row[f"{name}_high"] = pens.interval(estimate, reps, confidence)
                    out.append(row)
    frame = pd.DataFrame(out, columns=ASYMMETRY_COLUMNS)
    for column in ("layer_a", "layer_b"):
        frame[column] = frame[column].astype("Int64")
    return frame
