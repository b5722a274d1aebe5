"""The page per model pair (pairs.html): the pair summary, localization, every pair's heatmaps with its layers' best
matches, and token-level CKA."""

from __future__ import annotations

import numpy as np
import pandas as pd

from reprsim.inference.best_match import table as best_match_table
from reprsim.io.tables import read_tables
from reprsim.stages.report.common import (Figure, _anchor, _measure_name, _number, _pair_label, _pair_parts,
                                          _rows_compared, _with_interval, caption, paragraphs)
from reprsim.stages.report.inputs import ReportInputs
from reprsim.stages.report.labels import representation_text

# the command that draws one pair's heatmaps when the workflow draws none (reprsim.cli)
ON_DEMAND = "reprsim heatmap MODEL_A MODEL_B"


def pair_details(inputs: ReportInputs) -> dict | None:
    """Per model pair: the pair summary table, then every pair's heatmaps, with an index of pairs."""
    if not inputs.heatmaps and not inputs.pair_summary:
        return None
    summary = None
    if inputs.pair_summary:
        table = read_tables(inputs.pair_summary)
        if not table.empty:
            summary = {"caption": paragraphs("pair_summary"), "rows": len(table),
                       "table": _pair_summary_display(table, inputs)}
    localization = []
    if inputs.localization_figure:
        rows = _rows_compared(inputs) or "n in the pair tables"
        localization = [Figure(p, f"{caption('localization')} {rows}; the score has no permutation null of its "
                                  "own: 0 = neuron-level and distributed similarity agree.", alt="localization",
                               wide=False) for p in inputs.localization_figure]
    heatmaps = []
    best = _best_matches(inputs)
    for path in inputs.heatmaps:
        representation, dataset, a, b = _pair_parts(path)
        matches = best.get((representation, dataset, a, b))
        heatmaps.append({"anchor": _anchor("pair", representation, dataset, a, b), "a": a, "b": b,
                         "where": f"{representation_text(representation)}, {dataset}",
                         "figure": Figure(path, f"{_pair_label(path)}; n and each measure's chance level in the panel "
                                                "titles; hatched cells: the interval does not exclude chance.",
                                          alt=_pair_label(path), wide=True),
                         "best": None if matches is None else {"rows": len(matches), "table": matches}})
    # pairs computed in blocks (similarity.block_size > 1): the workflow draws no per-pair heatmaps; the page says
    # how to draw one
    on_demand = ON_DEMAND if not heatmaps and summary else None
    return {"summary": summary, "localization": localization, "heatmaps": heatmaps, "on_demand": on_demand,
            "heatmap_caption": paragraphs("heatmap") if heatmaps else [],
            "best_caption": paragraphs("best_match") if best else []}


def _best_matches(inputs: ReportInputs) -> dict[tuple, pd.DataFrame]:
    """Per (representation, dataset, model_a, model_b): each layer of A's best match in B, for reading
    (reprsim.inference.best_match): the all-row choice with its own p and the selection-corrected p, and the layer chosen on
    half the rows with its value and interval on the other half."""
    if not inputs.pairs:
        return {}
    pairs = read_tables(inputs.pairs)
    if pairs.empty or "is_best" not in pairs:
        return {}
    best = best_match_table(pairs)
    out = {}
    for key, rows in best.groupby(["representation", "dataset", "model_a", "model_b"], sort=False):
        shown = pd.DataFrame({"measure": rows["measure"].map(_measure_name), "direction": rows["direction"],
                              "layer of A": rows["layer_a"], "best layer of B": rows["best_b"],
                              "value": rows["value"].map(_number), "chance": rows["null_mean"].map(_number),
                              "p (that cell)": rows["null_p"].map(_number),
                              "p (best of B's layers)": rows["selection_p"].map(_number),
                              "chosen on half the rows": rows["split_b"].astype("Int64"),
                              f"on the other half [{inputs.confidence:.0%} interval]": [
                                  _with_interval(v, lo, hi) for v, lo, hi in
                                  zip(rows["split_value"], rows["split_low"], rows["split_high"])],
                              "rows (choose / estimate)": [f"{a} / {b}" for a, b in
                                                           zip(rows["n_select"], rows["n_estimate"])]})
        out[key] = shown.reset_index(drop=True)
    return out


def _pair_summary_display(summary: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """The pair summary for reading: the mean with its interval in one column, chance beside it."""
    shown = pd.DataFrame({column: summary[column] for column in ("dataset", "representation", "model_a", "model_b")
                          if column in summary})
    shown["measure"] = summary["measure"].map(_measure_name)
    shown["direction"] = summary["direction"]
    if "n_layers" in summary:
        shown["layers"] = summary["n_layers"]
    shown[f"mean [{inputs.confidence:.0%} interval]"] = [
        _with_interval(v, lo, hi) for v, lo, hi in zip(
            summary["mean_over_matching_layers"], summary.get("ci_low", pd.Series(np.nan, index=summary.index)),
            summary.get("ci_high", pd.Series(np.nan, index=summary.index)))]
    shown["chance"] = summary["null_mean"].map(_number) if "null_mean" in summary else "–"
    if "beyond_chance" in summary:
        shown["beyond chance"] = summary["beyond_chance"].map({True: "yes", False: "no"}).fillna("–")
    if "largest_null_p" in summary:
        shown["largest null p"] = summary["largest_null_p"].map(_number)
    if "n" in summary:
        shown["n"] = summary["n"]
    if "warning" in summary:
        shown["warning"] = summary["warning"].fillna("")
    return shown


def token_section(inputs: ReportInputs) -> dict | None:
    """Token-level minibatch CKA (Brown et al. 2023) of the configured pairs, as a table."""
    if not inputs.token_tables:
        return None
    table = read_tables(inputs.token_tables)
    if table.empty:
        return None
    shown = pd.DataFrame({"dataset": table["dataset"], "pair": table["model_a"] + " vs " + table["model_b"],
                          "layers": table["layer_a"].astype(str) + " / " + table["layer_b"].astype(str),
                          f"minibatch CKA [{inputs.confidence:.0%} interval]": [
                              _with_interval(v, lo, hi) for v, lo, hi in
                              zip(table["value"], table["ci_low"], table["ci_high"])],
                          "chance": table["null_mean"].map(_number),
                          "beyond chance": table["beyond_chance"].map({True: "yes", False: "no"}).fillna("–"),
                          "n (tokens)": table["n"]})
    return {"rows": len(shown), "table": shown}
