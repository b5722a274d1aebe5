"""What fine-tuning does to each layer, seen through CKA (Phang et al. 2021, §3, Figures 1, 5, 6).

Linear CKA of the first-token (CLS) representation between every pair of layers, for
four views of a fine-tuned model FT and the model it started from, ORIG:
ORIG–ORIG, FT–ORIG (FT's layers on the first axis), FT–FT and FT[a]–FT[b] against each
sibling fine-tuned from the same base with a different seed. The values come from the compare stage's pair
jobs of representation "cls" (rule compare_pair), so each has its chance level (permutation null) and its
half-sample interval like every other similarity. Fine-tuned models show a block-diagonal structure;
:func:`reprsim.tables.blocks.block_structure` finds where the blocks meet. A layer whose first-token rows are all
the same vector has no defined CKA and shows as NaN.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from reprsim.inference.resampling import interval
from reprsim.io.tables import read_tables
from reprsim.tables.blocks import block_structure

POOLING = "cls"
COLUMNS = ["value", "null_mean", "null_std", "null_p", "ci_low", "ci_high", "beyond_chance", "n_permutations",
           "n_resamples", "warning"]


def _oriented(table: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Rows of the pair (a, b) with model a's layer first, whichever order the pair's table has (a symmetric
    measure's value of (layer_a, layer_b) is that of (layer_b, layer_a))."""
    rows = table[(table["model_a"] == a) & (table["model_b"] == b)]
    if rows.empty:
        rows = table[(table["model_a"] == b) & (table["model_b"] == a)].rename(
            columns={"layer_a": "layer_b", "layer_b": "layer_a"}).assign(model_a=a, model_b=b)
    if rows.empty:
        raise ValueError(f"no CLS-token pair table of {a} and {b}")
    return rows.sort_values(["layer_a", "layer_b"])


def views(model: str, base: str, siblings: list[str]) -> list[tuple[str, str, str]]:
    """(view, model_a, model_b): ORIG–ORIG, FT–ORIG (FT's layers on the first axis), FT–FT, FT[a]–FT[b]."""
    return ([("ORIG–ORIG", base, base), ("FT–ORIG", model, base), ("FT–FT", model, model)]
            + [(f"FT[{model}]–FT[{sibling}]", model, sibling) for sibling in sorted(siblings)])


def layer_views(model: str, tables: list, replicates: list, base: str, siblings: list[str], label: str,
                confidence: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tidy rows (view, model_a, model_b, layer_a, layer_b, value with its chance level and interval) for one
    fine-tuned `model`, from the CLS-token pair tables and replicates of its views' pairs (measure `label`), and
    the block summary of its ORIG–ORIG and FT–FT views with the contrast's interval (:func:`block_summary`)."""
    pairs = read_tables(tables)
    pairs = pairs[(pairs["measure"] == label) & (pairs["representation"] == POOLING)]
    draws = read_tables(replicates)
    draws = draws[(draws["measure"] == label) & (draws["representation"] == POOLING)]
    frames, replicate_frames = [], []
    for view, a, b in views(model, base, siblings):
        rows = _oriented(pairs, a, b)
        frames.append(rows[["model_a", "model_b", "layer_a", "layer_b", *COLUMNS, "split", "n"]].assign(view=view))
        replicate_frames.append(_oriented(draws, a, b)[["layer_a", "layer_b", "replicate", "value", "n", "m"]]
                                .assign(view=view))
    table = pd.concat(frames, ignore_index=True)
    table["model"], table["measure"], table["pooling"] = model, label, POOLING
    table = table[["view", "model_a", "model_b", "layer_a", "layer_b", *COLUMNS, "model", "measure", "pooling",
                   "split", "n"]]
    return table, block_summary(table, pd.concat(replicate_frames, ignore_index=True), confidence)


def view_matrix(table: pd.DataFrame, view: str, column: str = "value") -> np.ndarray:
    rows = table[table["view"] == view]
    return rows.pivot(index="layer_a", columns="layer_b", values=column).to_numpy()


def block_summary(table: pd.DataFrame, replicates: pd.DataFrame | None = None,
                  confidence: float = 0.95) -> pd.DataFrame:
    """Block structure of the ORIG–ORIG and FT–FT views of every model in a layer-views table: the best split and
    its contrast (reprsim.tables.blocks), the contrast's half-sample interval (the best split's contrast in every
    replicate, when `replicates` are given) and the contrast of the chance levels (the matrix of null means)."""
    rows = []
    for model, own in table.groupby("model"):
        for view in ("ORIG–ORIG", "FT–FT"):
            summary = {"model": model, "view": view, **block_structure(view_matrix(own, view))}
            summary["null_contrast"] = block_structure(view_matrix(own, view, "null_mean"))["contrast"]
            summary["ci_low"] = summary["ci_high"] = np.nan
            if replicates is not None and not replicates.empty:
                mine = replicates[replicates["view"] == view]
                contrasts = np.array([
                    block_structure(group.pivot(index="layer_a", columns="layer_b", values="value").to_numpy())[
                        "contrast"] for _, group in mine.groupby("replicate")])
                summary["ci_low"], summary["ci_high"] = interval(summary["contrast"], contrasts,
                                                                 int(mine["n"].iloc[0]), int(mine["m"].iloc[0]),
                                                                 confidence)
            rows.append(summary)
    return pd.DataFrame(rows)
