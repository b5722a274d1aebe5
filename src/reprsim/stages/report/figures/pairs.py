"""The figures of the page per model pair: every pair's layer × layer heatmaps, and the localization score."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from reprsim.plotting import drawing
from reprsim.plotting.drawing import CHANCE_NOTE
from reprsim.stages.report.figures.base import Tables, _layout_below_title, _measure_order, _save
from reprsim.stages.report.labels import representation_text


def pair_heatmaps(tables: Tables, out_path: str | Path, measures: dict[str, str] | None = None) -> None:
    """One heatmap per configured measure (and direction, for asymmetric ones) for one model pair,
    measures grouped by family when `measures` (label -> measure) is given."""
    rows = tables["table"]
    if rows.empty:
        raise ValueError("table has no similarity measure rows")
    first = rows.iloc[0]
    order = {label: k for k, label in enumerate(_measure_order(list(rows["measure"]), measures))}
    panels = sorted(((key, group) for key, group in rows.groupby(["measure", "direction"], sort=False)),
                    key=lambda panel: (order[panel[0][0]], panel[0][1]))
    columns = min(4, len(panels))
    panel_rows = int(np.ceil(len(panels) / columns))
    layers_a, layers_b = rows["layer_a"].nunique(), rows["layer_b"].nunique()
    width, height = 1.6 + 0.32 * layers_b, 1.3 + 0.32 * layers_a
    fig, axes = plt.subplots(panel_rows, columns, figsize=(width * columns, height * panel_rows), squeeze=False)
    for ax, ((measure, direction), group) in zip(axes.flat, panels):
        title = drawing.heatmap_title(measure, direction, first["model_a"], first["model_b"], group["kind"].iloc[0])
        drawing.heatmap_panel(ax, group, title, first["model_a"], first["model_b"],
                              (measures or {}).get(measure, measure))
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    rows_are = {"word": " words", "attention": " sentences"}.get(first["representation"], "")
    layers = "layer l = block l" if first["representation"] == "attention" else "layer 0 = embeddings"
    fig.suptitle(f"{first['model_a']} vs {first['model_b']}: {representation_text(first['representation'])}, "
                 f"{first['dataset']} {first['split']} split, n={first['n']}{rows_are} ({layers}); "
                 f"{CHANCE_NOTE}", fontsize=10)
    _layout_below_title(fig, lines=1)
    _save(fig, out_path)


def localization_curves(tables: Tables, out_path: str | Path) -> None:
    """Wu et al.'s localization score per layer, one line per model."""
    scores = tables["table"]
    # one line per model, and per dataset and representation when the table holds several
    keys = [k for k in ("dataset", "representation") if k in scores and scores[k].nunique() > 1] + ["model"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, group in scores.groupby(keys):
        depth = group["layer"].max() or 1
        label = " · ".join(map(str, key)) if isinstance(key, tuple) else str(key)
        ax.plot(group["layer"] / depth, group["localization"], marker="o", ms=3, label=label)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("relative depth (0 = embeddings, 1 = last block)")
    ax.set_ylabel("mean neuronsim − mean SVCCA to all other layers")
    ax.set_title("Localization score per layer (Wu et al. 2020): higher = more localized", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    _save(fig, out_path)
