"""The layer of Y that matches each layer of X best, with a p-value and an interval that account for the choice.

Picking, for a layer of X, the best of L₂ candidate layers of Y and then reading its value against its own
permutation null overstates it: the best of L₂ values is the maximum of L₂ draws, biased upward (platonic-rep's
users ask whether a model pair's score is that maximum: minyoungg/platonic-rep#9). Two corrections, both from
what the pair engine already has (docs/numerics.md §9.5):

- **p from the null of the maximum.** Each permutation draw breaks the row correspondence of every layer pair at
  once (one permutation of Y's rows per draw, reprsim.metrics.permutation), so the draw's best value over the
  candidates is a draw of the best value under no correspondence. p = (1 + #{draws whose best is at least the
  observed best}) / (1 + draws) is exact for the selected match (a max-T correction; Westfall & Young 1993). The
  uncorrected p, the chosen cell's own, is the pair table's ``null_p`` on that row.
- **An estimate that does not reuse the rows that chose.** The rows are split once (seeded) into a selection half,
  on which the best layer is chosen, and an estimation half, on which that layer pair's value and its half-sample
  interval are computed: the choice cannot inflate them. The chosen layer may differ from the all-row choice;
  both are reported.

Torch-free and free of measure code (the report reads :func:`table`): the pair engine computes the split's values
(reprsim.metrics.pair_engine), the token-level CKA its own (reprsim.stages.compare.tokens).
"""

from __future__ import annotations

import warnings

import numpy as np


# the columns the pair table gains (reprsim.metrics.pair_engine), per row of a (direction, layer_a)
COLUMNS = ("is_best", "selection_p", "split_best", "split_value", "split_low", "split_high")


def best_of(values: np.ndarray, kind: str, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """(index, value) of the best along `axis`: the largest similarity, the smallest distance; NaN cells are never
    chosen, an all-NaN line gives index -1 and NaN."""
    signed = np.asarray(values, dtype=float) * (1.0 if kind == "similarity" else -1.0)
    empty = np.isnan(signed).all(axis=axis)
    index = np.argmax(np.where(np.isnan(signed), -np.inf, signed), axis=axis)
    index = np.where(empty, -1, index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        best = np.nanmax(signed, axis=axis) * (1.0 if kind == "similarity" else -1.0)
    return index, np.where(empty, np.nan, best)


def selection_p(values: np.ndarray, draws: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(best layer index, p of the best against the null of the best) per (direction, layer of X): `values`
    (D, L1, L2), `draws` (P, D, L1, L2), the permutation draws that share one permutation across the layer pairs of
    a draw. A draw's best is taken over the same candidates (finite observed cells)."""
    index, best = best_of(values, kind)
    candidates = np.isfinite(values)[None]
    _, null_best = best_of(np.where(candidates, draws, np.nan), kind)  # (P, D, L1)
    extreme = null_best >= best[None] if kind == "similarity" else null_best <= best[None]
    finite = np.isfinite(null_best).sum(axis=0)
    p = (1 + (extreme & np.isfinite(null_best)).sum(axis=0)) / (1 + finite)
    return index, np.where(np.isfinite(best) & (finite > 0), p, np.nan)


def split_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(selection rows, estimation rows): a seeded split of range(n) into halves (the estimation half takes the odd
    row when n is odd), each sorted."""
    order = np.random.default_rng([seed, 0x5E1EC7]).permutation(n)
    return np.sort(order[: n // 2]), np.sort(order[n // 2:])


def table(pairs):
    """One row per (model pair, measure, direction, layer_a) of a pair table (reprsim.compare's, compare_many's or
    a pair job's): the best layer_b on all rows with its value, its own p (``null_p``, which ignores the choice)
    and ``selection_p`` (the null of the best: use this one); ``split_b``, the layer chosen on the selection half,
    with ``split_value`` [``split_low``, ``split_high``] on the estimation half; ``agrees``: both choices are the
    same layer. A table without the best-match columns (computed with best_matches off) raises ValueError."""
    import pandas as pd

    missing = [column for column in COLUMNS if column not in pairs.columns]
    if missing:
        raise ValueError(f"the table has no best-match columns ({', '.join(missing)}): compute it with "
                         "best_matches=True")
    keys = [key for key in ("dataset", "representation", "split", "model_a", "model_b", "measure", "direction")
            if key in pairs.columns and pairs[key].notna().any()]  # arrays' tables leave the dataset's None
    best = pairs[pairs["is_best"]].set_index([*keys, "layer_a"])
    split = pairs[pairs["split_best"]].set_index([*keys, "layer_a"])
    out = best[["layer_b", "kind", "value", "null_mean", "null_p", "selection_p", "n"]].rename(
        columns={"layer_b": "best_b"}).join(
        split[["layer_b", "split_value", "split_low", "split_high"]].rename(columns={"layer_b": "split_b"}),
        how="outer")
    out["agrees"] = out["best_b"] == out["split_b"]
    out["n_select"] = out["n"] // 2  # split_rows' halves
    out["n_estimate"] = out["n"] - out["n_select"]
    return pd.DataFrame(out).reset_index()
