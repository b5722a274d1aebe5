"""Claim: fine-tuning produces a two-block structure in a model's layer × layer similarity
(Phang et al. 2021, §3): the best split's within-block minus between-block CKA of the fine-tuned
model with itself exceeds its base's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from reprsim.design.relations import finetuned_from
from reprsim.stages.findings.cells import Cells, cell, mean_of_units, select
from reprsim.stages.findings.context import Setup, Tables, compared_pairs, pair_blocks
from reprsim.stages.findings.profiles import NO_CKA, NO_PAIRS
from reprsim.stages.findings.table import Claim, judged, not_applicable
from reprsim.tables.blocks import block_structure
from reprsim.tables.layers import model_depths

TWO_BLOCKS = Claim(
    "two_block_structure", "Fine-tuning produces a two-block structure across a model's layers",
    "Phang et al. 2021, §3 (FT–FT vs ORIG–ORIG, Figure 2)",
    "mean over fine-tuned models of [block contrast of FT–FT − block contrast of ORIG–ORIG], where the "
    "block contrast of a layer × layer CKA matrix is max over splits s of (mean within blocks − mean "
    "across blocks), off the diagonal (reprsim.tables.blocks)")


def _contrast(cells: Cells, model: str, depth: int):
    """values (k, cells) -> (k,) the block contrast of `model`'s own layer × layer matrix."""
    size = depth + 1
    positions = cells.positions([cell(model, model, i, j) for i in range(size) for j in range(size)])

    def contrast(values: np.ndarray) -> np.ndarray:
        return np.array([block_structure(row[positions].reshape(size, size))["contrast"] for row in values])
    return contrast


def two_block_structure(tables: Tables, setup: Setup) -> list[dict]:
    if setup.measure is None:
        return [not_applicable(TWO_BLOCKS, NO_CKA)]
    bases = finetuned_from(setup.models)
    if not bases:
        return [not_applicable(TWO_BLOCKS, "no model is fine-tuned (source: finetune)")]
    rows = []
    for dataset, representation, pairs, replicates in pair_blocks(tables):
        depth = model_depths(pairs)
        compared = compared_pairs(pairs)  # each model with itself
        usable = {m: b for m, b in bases.items() if m in depth and b in depth and depth[m] == depth[b] >= 2
                  and {(m, m), (b, b)} <= compared}
        if not usable:
            rows.append(not_applicable(TWO_BLOCKS, "no fine-tuned model and its base, both with 3 layers or more, "
                                       "are each compared with itself in the pair tables of this dataset and "
                                       "representation",
                                       dataset, representation))
            continue
        wanted = [cell(name, name, i, j) for m, b in usable.items() for name in (m, b)
                  for i in range(depth[m] + 1) for j in range(depth[m] + 1)]
        cells = select(pairs, replicates, wanted, setup.measure)
        units = {}
        for m, b in usable.items():
            tuned, base = _contrast(cells, m, depth[m]), _contrast(cells, b, depth[b])
            units[f"{m} (base {b})"] = lambda values, tuned=tuned, base=base: tuned(values) - base(values)
        estimate, low, high, method = mean_of_units(cells, units, setup.confidence, "fine-tuned models")
        reason_extra = _cls_blocks(tables.layer_blocks, list(usable))
        row = judged(TWO_BLOCKS, estimate=estimate, low=low, high=high, n=cells.n, models="; ".join(units),
                     measure=setup.measure, method=method + reason_extra, confidence=setup.confidence,
                     dataset=dataset, representation=representation)
        rows.append(row)
    return rows or [not_applicable(TWO_BLOCKS, NO_PAIRS)]


def _cls_blocks(layer_blocks: pd.DataFrame | None, models: list[str]) -> str:
    """The finetune stage's CLS-token block summary, quoted for reference, with the contrasts' intervals."""
    if layer_blocks is None or layer_blocks.empty:
        return ""
    quoted = []
    for model in models:
        rows = layer_blocks[layer_blocks["model"] == model].set_index("view")
        if {"FT–FT", "ORIG–ORIG"} <= set(rows.index):
            quoted.append(f"{model} {_contrast_text(rows.loc['FT–FT'])} vs {_contrast_text(rows.loc['ORIG–ORIG'])}")
    return ("; for reference, the CLS-token layer views' contrasts FT–FT vs ORIG–ORIG: " + ", ".join(quoted)
            if quoted else "")


def _contrast_text(row: pd.Series) -> str:
    if "ci_low" in row and pd.notna(row["ci_low"]):
        return f"{row['contrast']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
    return f"{row['contrast']:.3f}"
