"""The attention figures: head × head similarity, and attention similarity of matching layers along depth."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from reprsim.plotting.drawing import MEASURE_LABELS
from reprsim.plotting.drawing import colours as _colours
from reprsim.stages.report.figures.base import Tables, _save
from reprsim.tables.layers import matching_layer


def attention_heads(tables: Tables, out_path: str | Path, measures: dict[str, str] | None = None) -> None:
    """Head × head similarity of the chosen layer pairs (Wu et al. 2020, §3.4): one panel per head-level
    measure (`measures`: label -> measure, for its colour scale) and layer pair; each row's best head (the
    one attnsim takes) outlined."""
    rows = tables["table"]
    if rows.empty:
        raise ValueError("the head table is empty: similarity.attention.detail_layers names no layer pair")
    first = rows.iloc[0]
    panels = list(rows.groupby(["layer_a", "layer_b", "measure"], sort=True))
    columns = min(3, len(panels))
    heads_a, heads_b = rows["head_a"].nunique(), rows["head_b"].nunique()
    side_w, side_h = 1.8 + 0.36 * heads_b, 1.4 + 0.34 * heads_a
    fig, axes = plt.subplots(int(np.ceil(len(panels) / columns)), columns, figsize=(side_w * columns, side_h *
                             int(np.ceil(len(panels) / columns))), squeeze=False)
    for ax, ((layer_a, layer_b, label), group) in zip(axes.flat, panels):
        matrix = group.pivot(index="head_a", columns="head_b", values="value").sort_index().sort_index(axis=1)
        kind = group["kind"].iloc[0]
        cmap, norm = _colours(kind, (measures or {}).get(label, label), group["value"])
        image = ax.imshow(matrix.to_numpy(), origin="lower", cmap=cmap, norm=norm, aspect="auto")
        best = np.nanargmin(matrix.to_numpy(), axis=1) if kind == "distance" else np.nanargmax(matrix.to_numpy(), axis=1)
        from matplotlib.patches import Rectangle

        for i, j in enumerate(best):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="tab:cyan", lw=1.2))
        ax.set_xticks(range(matrix.shape[1]), matrix.columns, fontsize=6)
        ax.set_yticks(range(matrix.shape[0]), matrix.index, fontsize=6)
        ax.set_xlabel(f"head of {first['model_b']}, layer {layer_b}", fontsize=8)
        ax.set_ylabel(f"head of {first['model_a']}, layer {layer_a}", fontsize=8)
        better = "lower" if kind == "distance" else "higher"
        ax.set_title(f"{MEASURE_LABELS.get(label, label)} ({better} = more alike)", fontsize=8)
        plt.colorbar(image, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=6)
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    fig.suptitle(f"{first['model_a']} vs {first['model_b']}: every head against every head, {first['dataset']}; "
                 f"outlined: each head's best match in {first['model_b']}", fontsize=10)
    fig.tight_layout()
    _save(fig, out_path)


def attention_layers(tables: Tables, out_path: str | Path, dataset: str, confidence: float = 0.95) -> None:
    """Wu et al. (2020), Figure 6: attention similarity of matching layers (same relative depth) along
    depth, one line per model pair, with its interval (band) and chance level (dotted); one panel per
    measure (head-level ones in the a->b direction)."""
    table = tables["table"]
    table = table[(table["dataset"] == dataset) & (table["direction"].isin(["a->b", "symmetric"]))]
    if table.empty:
        raise ValueError(f"the attention table has no rows for dataset {dataset!r}")
    labels = list(dict.fromkeys(table["measure"]))
    fig, axes = plt.subplots(1, len(labels), figsize=(4.2 * len(labels), 3.6), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, label in zip(axes.flat, labels):
        rows = table[table["measure"] == label]
        for k, ((a, b), pair) in enumerate(rows.groupby(["model_a", "model_b"], sort=True)):
            depth_a, depth_b = int(pair["layer_a"].max()), int(pair["layer_b"].max())
            matched = pair[pair["layer_b"] == pair["layer_a"].map(lambda la: max(1, matching_layer(la, depth_a, depth_b)))]
            matched = matched.sort_values("layer_a")
            colour = colours[k % len(colours)]
            ax.plot(matched["layer_a"], matched["value"], marker="o", ms=3, color=colour, label=f"{a} vs {b}")
            ax.fill_between(matched["layer_a"], matched["ci_low"], matched["ci_high"], color=colour, alpha=0.2, lw=0)
            ax.plot(matched["layer_a"], matched["null_mean"], ls=":", color=colour, lw=1)
        kind = rows["kind"].iloc[0]
        ax.set_title(f"{MEASURE_LABELS.get(label, label)}\n({'lower' if kind == 'distance' else 'higher'} = more "
                     f"alike; n = {int(rows['n'].iloc[0])} sentences)", fontsize=8)
        ax.set_xlabel("layer (block) of model A, against the same relative depth of B", fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"Attention similarity of matching layers, {dataset}: line = value, band = {confidence:.0%} interval, "
                 "dotted = chance level (sentences re-paired)", fontsize=10)
    fig.tight_layout()
    _save(fig, out_path)
