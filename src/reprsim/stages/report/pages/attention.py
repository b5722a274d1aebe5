"""The attention page (attention.html): attention similarity along depth, per layer pair and head by head."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reprsim.io.tables import read_tables
from reprsim.stages.report.common import (Figure, _anchor, _measure_name, _number, _pair_parts, _with_interval,
                                          paragraphs)
from reprsim.stages.report.inputs import ReportInputs
from reprsim.tables.layers import matching_layer


def _attention_display(table: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """Matching layers (same relative depth) of every attention pair: value [interval], chance, n."""
    rows = []
    for (dataset, a, b, label, direction), pair in table.groupby(
            ["dataset", "model_a", "model_b", "measure", "direction"], sort=False):
        depth_a, depth_b = int(pair["layer_a"].max()), int(pair["layer_b"].max())
        for _, row in pair.sort_values("layer_a").iterrows():
            if row["layer_b"] != max(1, matching_layer(row["layer_a"], depth_a, depth_b)):
                continue
            arrow = {"a->b": f"{a} → {b}", "b->a": f"{b} → {a}"}.get(direction, "both")
            rows.append({"dataset": dataset, "pair": f"{a} vs {b}", "measure": _measure_name(label),
                         "heads matched": arrow, "layers": f"{row['layer_a']} / {row['layer_b']}",
                         f"value [{inputs.confidence:.0%} interval]": _with_interval(row["value"], row["ci_low"],
                                                                                     row["ci_high"]),
                         "chance": _number(row["null_mean"]),
                         "beyond chance": {True: "yes", False: "no"}.get(row["beyond_chance"], "–"),
                         "n (sentences)": row["n"]})
    return pd.DataFrame(rows)


def attention_section(inputs: ReportInputs) -> dict | None:
    """Attention similarity (Wu et al. 2020): matching layers along depth, the layer x layer heatmaps per
    pair, the head x head detail, and the matching-layer values as a table."""
    if not inputs.attention:
        return None
    table = read_tables(inputs.attention)

    def sentences(dataset: str, *pair: str) -> str:
        rows = table[table["dataset"] == dataset]
        if pair:
            rows = rows[(rows["model_a"] == pair[0]) & (rows["model_b"] == pair[1])]
        counts = rows["n"].astype(int) if "n" in rows and len(rows) else pd.Series([], dtype=int)
        if counts.empty:
            return "n = ? sentences"
        low, high = counts.min(), counts.max()
        return f"n = {low} sentences" if low == high else f"n = {low}–{high} sentences"

    section = {"caption": paragraphs("attention_layers"), "table": None, "heatmaps": None, "heads": None}
    section["figures"] = [
        Figure(p, f"{Path(p).stem}: attention similarity of matching layers, {sentences(Path(p).stem)}; band = "
                  "interval, dotted = chance level.", alt=f"attention similarity along depth, {Path(p).stem}",
               wide=True)
        for p in inputs.attention_layer_figures]
    if not table.empty:
        shown = _attention_display(table, inputs)
        section["table"] = {"rows": len(shown), "table": shown}
    if inputs.attention_heatmaps:
        pairs = []
        for path in inputs.attention_heatmaps:
            _, dataset, a, b = _pair_parts(path)
            pairs.append({"anchor": _anchor("attention", dataset, a, b), "a": a, "b": b, "dataset": dataset,
                          "figure": Figure(path, f"{a} vs {b}, {dataset}: attention similarity of every layer pair, "
                                                 f"{sentences(dataset, a, b)}; chance in the panel titles; hatched: "
                                                 "the interval does not exclude chance.",
                                           alt=f"attention heatmaps {a} vs {b}", wide=True)})
        section["heatmaps"] = {"caption": paragraphs("attention_heatmap"), "pairs": pairs}
    if inputs.attention_head_figures:
        figures = []
        for path in inputs.attention_head_figures:
            _, dataset, a, b = _pair_parts(path.replace(".heads.png", ".png"))
            figures.append(Figure(path, f"{a} vs {b}, {dataset}: every head against every head in the chosen layer "
                                        f"pairs, {sentences(dataset, a, b)}; outlined: each head's best match (its "
                                        "chance level: the layer pair's in the heatmaps above).",
                                  alt=f"heads {a} vs {b}", wide=True))
        section["heads"] = {"caption": paragraphs("attention_heads"), "figures": figures}
    return section
