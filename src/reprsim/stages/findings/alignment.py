"""Claim: the invertible aligner (INN) maps one model's layer onto another's with a smaller
held-out error than the linear map (Ren et al. 2023, §4.4, Table 4).

The interval resamples the held-out (score split) examples: δ = ‖Y − g(X)‖_F / ‖Y‖_F is
sqrt(Σ_i e_i / Σ_i ‖y_i‖²) over the examples, so it is recomputed exactly on each half-sample
from the align stage's per-example errors e_i (paths.ALIGNER_ROWS).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from reprsim.inference.resampling import half_samples, interval, subsample_size
from reprsim.stages.findings.context import Setup, Tables
from reprsim.stages.findings.table import Claim, judged, not_applicable
from reprsim.tables.layers import layer_pairs

INN_BEATS_LINEAR = Claim(
    "inn_aligns_better", "The INN aligns layers better than the linear map on held-out rows",
    "Ren et al. 2023, §4.4 (Table 4)",
    "mean over aligned model pairs, matching layer pairs and both directions of [rel_error(linear) − "
    "rel_error(inn)] on the held-out (score) split, rel_error = ‖Y − g(X)‖_F / ‖Y‖_F")
CELL = ["model_a", "model_b", "layer_a", "layer_b", "direction"]
TOLERANCE = 1e-8  # relative: the recomputed δ must equal the aligner table's


def first_label(aligners, method: str) -> str | None:
    return next((label for label, name in aligners.items() if name == method), None)


def _matching(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows at matching layers only (align.layers: all aligns every layer pair)."""
    keep = []
    for (a, b), pair in rows.groupby(["model_a", "model_b"]):
        matched = set(layer_pairs(int(pair["layer_a"].max()), int(pair["layer_b"].max()), "matching"))
        keep.append(pair[[(la, lb) in matched for la, lb in zip(pair["layer_a"], pair["layer_b"])]])
    return pd.concat(keep)


def _errors(rows: pd.DataFrame, label: str, cells: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(cells, n) squared errors and squared target norms of aligner `label`, rows in example order."""
    mine = rows[rows["aligner"] == label].sort_values([*CELL, "row"])
    if mine.empty:
        raise ValueError(f"the per-example aligner errors have no rows of aligner {label!r}; rerun align_layers")
    counts = mine.groupby(CELL).size()
    if counts.nunique() != 1:
        raise ValueError(f"aligner {label!r}: cells hold different numbers of held-out examples")
    mine = (cells.assign(position=np.arange(len(cells))).merge(mine, on=CELL, how="left")
            .sort_values(["position", "row"]))
    if mine["sq_error"].isna().any():
        raise ValueError(f"the per-example errors lack aligner {label!r} for some layer pairs; rerun align_layers")
    n = int(counts.iloc[0])
    return (mine["sq_error"].to_numpy(float).reshape(len(cells), n),
            mine["target_sq"].to_numpy(float).reshape(len(cells), n))


def _check_against_table(delta: np.ndarray, cells: pd.DataFrame, label: str, table: pd.DataFrame | None,
                         dataset: str, representation: str) -> None:
    """The recomputed δ must be the aligner table's score-split rel_error (same rows, same formula)."""
    if table is None:
        return
    scored = table[(table["aligner"] == label) & (table["role"] == "score") & (table["dataset"] == dataset)
                   & (table["pooling"] == representation)]
    expected = cells.merge(scored[[*CELL, "rel_error"]], on=CELL, how="left")["rel_error"].to_numpy(float)
    if not np.allclose(delta, expected, rtol=TOLERANCE, atol=0):
        worst = int(np.nanargmax(np.abs(delta - expected)))
        raise ValueError(f"aligner {label!r}: δ recomputed from the per-example errors ({delta[worst]}) differs from "
                         f"the aligner table's rel_error ({expected[worst]}) at {tuple(cells.iloc[worst])}; "
                         "the two outputs of align_layers are out of step: rerun it")


def inn_aligns_better(tables: Tables, setup: Setup) -> list[dict]:
    linear, inn = first_label(setup.aligners, "linear"), first_label(setup.aligners, "inn")
    if linear is None or inn is None:
        return [not_applicable(INN_BEATS_LINEAR, "align.aligners needs a `linear` and an `inn` aligner"
                               if setup.aligners else "align is disabled (align.enabled: false) or has no aligners")]
    if tables.aligner_rows is None or tables.aligner_rows.empty:
        return [not_applicable(INN_BEATS_LINEAR, "no aligned model pairs (align.enabled is false, or align.pairs "
                               "is empty)")]
    rows_out = []
    for (dataset, representation), rows in tables.aligner_rows.groupby(["dataset", "pooling"]):
        rows = _matching(rows[rows["aligner"].isin([linear, inn])])
        cells = rows[CELL].drop_duplicates().sort_values(CELL).reset_index(drop=True)
        (e_lin, t_lin), (e_inn, t_inn) = _errors(rows, linear, cells), _errors(rows, inn, cells)
        n = e_lin.shape[1]
        if e_inn.shape[1] != n or not np.array_equal(t_lin, t_inn):
            raise ValueError("the linear and INN rows hold different held-out examples; rerun align_layers")
        delta_lin = np.sqrt(e_lin.sum(axis=1) / t_lin.sum(axis=1))
        delta_inn = np.sqrt(e_inn.sum(axis=1) / t_inn.sum(axis=1))
        for label, delta in ((linear, delta_lin), (inn, delta_inn)):
            _check_against_table(delta, cells, label, tables.aligners, dataset, representation)
        estimate = float(np.mean(delta_lin - delta_inn))
        subsets = half_samples(n, setup.resamples, setup.seed)

        def on(errors: np.ndarray, targets: np.ndarray) -> np.ndarray:  # (R, cells) δ on each half-sample
            return np.sqrt(errors[:, subsets].sum(axis=2) / targets[:, subsets].sum(axis=2)).T

        replicates = (on(e_lin, t_lin) - on(e_inn, t_inn)).mean(axis=1)
        m = subsample_size(n)
        low, high = interval(estimate, replicates, n, m, setup.confidence)
        pairs = sorted({f"{a} vs {b}" for a, b in zip(cells["model_a"], cells["model_b"])})
        method = (f"{len(cells)} cells (model pair × matching layer pair × direction), aligners {linear!r} and "
                  f"{inn!r}; half-sample interval over the held-out examples: δ recomputed on each of "
                  f"{setup.resamples} replicates of m = {m} of the n = {n} examples, t interval")
        rows_out.append(judged(INN_BEATS_LINEAR, estimate=estimate, low=low, high=high, n=n, models="; ".join(pairs),
                               measure="rel_error", method=method, confidence=setup.confidence, dataset=dataset,
                               representation=representation))
    return rows_out
