"""The stitching page (stitching.html): stitching beside CKA, the penalties per model pair, the asymmetry, the
table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reprsim.io.tables import read_tables
from reprsim.stages.report.common import Figure, _anchor, _number, _with_interval, paragraphs
from reprsim.stages.report.inputs import ReportInputs
from reprsim.tables.stitching import asymmetry as stitching_asymmetry


def _layers_text(row) -> str:
    """'l / m' of one matched cell, or the mean row's 'mean of k cells'."""
    if pd.isna(row["layer_a"]):
        return f"mean of {int(row['cells'])} cells"
    return f"{int(row['layer_a'])} / {int(row['layer_b'])}"


def _asymmetry_display(asymmetry: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """The asymmetry table for reading: each penalty and the difference with its interval in one column."""
    ci = f"[{inputs.confidence:.0%} interval]"
    shown = pd.DataFrame({
        "dataset": asymmetry["dataset"], "model a": asymmetry["model_a"], "model b": asymmetry["model_b"],
        "φ": asymmetry["phi"], "metric": asymmetry["metric"],
        "layers (l of a / m of b)": [_layers_text(row) for _, row in asymmetry.iterrows()]})
    for column, name in (("penalty_ab", f"penalty a → b {ci}"), ("penalty_ba", f"penalty b → a {ci}"),
                         ("difference", f"difference (a → b) − (b → a) {ci}")):
        shown[name] = [_with_interval(v, lo, hi) for v, lo, hi in zip(
            asymmetry[column], asymmetry[f"{column}_low"], asymmetry[f"{column}_high"])]
    if (asymmetry["seeds"] > 1).any():
        shown["seeds (mean over)"] = asymmetry["seeds"]
    shown["n"] = asymmetry["n"]
    return shown


def _stitching_display(table: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """Every row of the stitching table for reading: value, g's score and penalty with their intervals."""
    table = table.sort_values(["dataset", "model_a", "model_b", "phi", "seed", "metric", "layer_a", "layer_b"],
                              kind="stable")
    ci = f"[{inputs.confidence:.0%} interval]"
    return pd.DataFrame({
        "dataset": table["dataset"], "f (bottom) → g (top)": table["model_a"] + " → " + table["model_b"],
        "layers l / m": table["layer_a"].astype(str) + " / " + table["layer_b"].astype(str), "φ": table["phi"],
        "seed": table["seed"], "metric": table["metric"],
        f"stitched {ci}": [_with_interval(v, lo, hi) for v, lo, hi in
                           zip(table["value"], table["ci_low"], table["ci_high"])],
        "chance": table["chance"].map(_number), "g alone": table["top_score"].map(_number),
        f"penalty {ci}": [_with_interval(v, lo, hi) for v, lo, hi in
                          zip(table["penalty"], table["penalty_low"], table["penalty_high"])],
        "self-stitch (f → f)": table["self_stitch"].map(_number), "excess penalty": table["excess_penalty"].map(_number),
        "steps": table["steps"], "n": table["n"]})


def stitching_section(inputs: ReportInputs) -> dict | None:
    """Model stitching (Bansal et al. 2021; Brown et al. 2023): what it measures, identity stitching beside
    CKA per dataset, the penalty figure of every model pair, the asymmetry of every pair (a → b against
    b → a, per matched cell, with intervals from the shared half-samples) and the whole table."""
    if not (inputs.stitching or inputs.stitch_figures or inputs.stitching_figures):
        return None
    table = read_tables(inputs.stitching) if inputs.stitching else pd.DataFrame()
    asymmetry = (stitching_asymmetry(table, read_tables(inputs.stitching_replicates), inputs.confidence)
                 if inputs.stitching_replicates and not table.empty else pd.DataFrame())
    toc = [("stitching-summary", "Stitching beside CKA", bool(inputs.stitching_figures)),
           ("stitching-pairs", "Per model pair", bool(inputs.stitch_figures)),
           ("stitching-asymmetry", "Asymmetry", not asymmetry.empty),
           ("stitching-table", "The stitching table", not table.empty)]
    section = {"contents": [{"anchor": anchor, "text": text} for anchor, text, shown in toc if shown],
               "caption": paragraphs("stitching"), "summary": None, "pairs": None,
               "asymmetry": None if asymmetry.empty else _asymmetry_display(asymmetry, inputs),
               # the asymmetry needs the replicates: say so when the stitching table came without them
               "no_replicates": asymmetry.empty and bool(inputs.stitching) and not inputs.stitching_replicates,
               "table": None if table.empty else {"rows": len(table), "table": _stitching_display(table, inputs)}}

    def evaluated(rows: pd.DataFrame) -> str:
        if rows.empty:
            return "n in the figure title"
        counts = sorted({int(n) for n in rows["n"]})
        return f"n = {' or '.join(f'{n:,}' for n in counts)} {rows['split'].iloc[0]} rows"

    if inputs.stitching_figures:
        figures = []
        for path in inputs.stitching_figures:
            dataset = Path(path).stem
            rows = table[table["dataset"] == dataset] if not table.empty else table
            figures.append(Figure(path, f"{dataset}: stitching penalty against the layer of f (left; {evaluated(rows)}; "
                                        "band = interval; penalty at chance in the panel title) and CKA at matching "
                                        "layers (right; dotted = chance level).",
                                  alt=f"stitching beside CKA, {dataset}", wide=True))
        section["summary"] = {"caption": paragraphs("stitching_summary"), "figures": figures}
    if inputs.stitch_figures:
        pairs = []
        for path in inputs.stitch_figures:
            dataset, (a, b) = Path(path).parent.name, Path(path).stem.split("__", 1)
            rows = table[(table["dataset"] == dataset) & table["model_a"].isin([a, b]) & table["model_b"].isin([a, b])] \
                if not table.empty else table
            pairs.append({"anchor": _anchor("stitch", dataset, a, b), "a": a, "b": b, "dataset": dataset,
                          "figure": Figure(path, f"{a} and {b}, stitched both ways, {dataset}; {evaluated(rows)}; "
                                                 "positive penalty = worse than the top model alone; hatched (or "
                                                 "hollow): the interval contains 0; the penalty at chance in the "
                                                 "figure title.",
                                           alt=f"stitching penalties {a} and {b}", wide=True)})
        section["pairs"] = {"caption": paragraphs("stitch_penalties"), "pairs": pairs}
    return section
