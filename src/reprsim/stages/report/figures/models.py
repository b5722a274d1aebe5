"""The fine-tuned models' figures: truncation, layer views (CKA between layers), skipping blocks."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reprsim.stages.report.figures.base import Tables, _save

MODE_STYLE = {  # Phang et al. (2021), Figure 3 colours
    "UNTUNED": ("tab:green", "UNTUNED: tuned head on layer l, no training"),
    "TUNED": ("tab:blue", "TUNED: fresh head on the frozen fine-tuned layer l"),
    "TUNEDORIG": ("goldenrod", "TUNEDORIG: fresh head on the frozen base layer l"),
}
METRIC_NAMES = {"accuracy": "accuracy", "matthews_correlation": "Matthews correlation"}


def truncation_curve(tables: Tables, out_path: str | Path, metric: str = "accuracy") -> None:
    """Score when layer l feeds a classifier head, per mode, with the full model and the majority class."""
    table = tables["table"]
    model = table["model"].iloc[0]
    table = table[table["metric"] == metric]
    full = table[table["mode"] == "FULL"]["value"].iloc[0]
    majority = table[table["mode"] == "MAJORITY"]["value"].iloc[0]
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for mode, (colour, label) in MODE_STYLE.items():
        curve = table[table["mode"] == mode].sort_values("layer")
        if not curve.empty:
            ax.plot(curve["layer"], curve["value"], marker="o", color=colour, label=label)
    layers = table[table["mode"] == "UNTUNED"]["layer"].sort_values()
    ax.scatter([layers.iloc[-1]], [full], marker="*", s=160, color="black", zorder=3,
               label=f"full fine-tuned model ({full:.3f})")
    ax.axhline(majority, color="tab:red", ls=":", label=f"majority class ({majority:.3f})")
    ax.set_xticks(layers)
    ax.set_xlabel("layer fed to the task head (0 = embeddings)")
    ax.set_ylabel(f"{METRIC_NAMES[metric]} ({table['split'].iloc[0]}, n={table['n'].iloc[0]})")
    ax.set_ylim(min(0.0, table["value"].min() - 0.02), 1.02)
    ax.set_title(f"Truncation of {model} (Phang et al. 2021, Figure 3)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    _save(fig, out_path)


def layer_views_figure(tables: Tables, out_path: str | Path) -> None:
    """CLS-token CKA between layers, one panel per view, with the block split drawn on FT–FT and ORIG–ORIG; cells
    whose interval does not exclude their chance level are crossed out."""
    table, blocks = tables["table"], tables["blocks"]
    model = table["model"].iloc[0]
    views = list(dict.fromkeys(table["view"]))
    fig, axes = plt.subplots(1, len(views), figsize=(3.3 * len(views), 3.8), squeeze=False)
    for ax, view in zip(axes[0], views):
        rows = table[table["view"] == view]
        matrix = rows.pivot(index="layer_a", columns="layer_b", values="value").to_numpy()
        image = ax.imshow(matrix, cmap="magma", vmin=0, vmax=1, origin="lower")
        if "beyond_chance" in rows:
            chance = rows[rows["value"].notna() & ~rows["beyond_chance"].astype(bool)]
            ax.scatter(chance["layer_b"], chance["layer_a"], marker="x", s=18, color="white", linewidths=0.8)
            ax.set_title(f"{view}\nchance {rows['null_mean'].min():.2f}–{rows['null_mean'].max():.2f}", fontsize=8)
        else:
            ax.set_title(view, fontsize=8)
        ax.set_xlabel(f"layer of {rows['model_b'].iloc[0]}", fontsize=7)
        ax.set_ylabel(f"layer of {rows['model_a'].iloc[0]}", fontsize=7)
        ax.set_xticks(range(matrix.shape[1]))  # layers are whole numbers, also for shallow models
        ax.set_yticks(range(matrix.shape[0]))
        ax.tick_params(labelsize=6)
        summary = blocks[blocks["view"] == view]
        if not summary.empty and pd.notna(summary["split"].iloc[0]):
            split = int(summary["split"].iloc[0])
            for line in (ax.axhline, ax.axvline):
                line(split - 0.5, color="cyan", lw=1, ls="--")
            bounds = (f" [{summary['ci_low'].iloc[0]:.2f}, {summary['ci_high'].iloc[0]:.2f}]"
                      if "ci_low" in summary and pd.notna(summary["ci_low"].iloc[0]) else "")
            ax.text(0.02, 0.98, f"split at layer {split}\ncontrast {summary['contrast'].iloc[0]:.2f}{bounds}",
                    transform=ax.transAxes, va="top", fontsize=6, color="cyan")
    fig.colorbar(image, ax=axes[0].tolist(), label="linear CKA (CLS token)", fraction=0.02, pad=0.02)
    fig.suptitle(f"{model}: CKA between layers ({table['split'].iloc[0]}, n={table['n'].iloc[0]}); "
                 "dashed: best two-block split; ×: interval does not exclude chance", fontsize=9)
    _save(fig, out_path)


def skip_heatmap(tables: Tables, out_path: str | Path, metric: str = "accuracy") -> None:
    """Triangular heatmap: the score with blocks start..end skipped (Phang et al. 2021, Figure 4 style)."""
    table = tables["table"]
    model = table["model"].iloc[0]
    table = table[table["metric"] == metric]
    spans = table[table["start"] > 0]
    full = table[table["start"] == 0]["value"].item()
    depth = int(spans["end"].max())
    matrix = np.full((depth, depth), np.nan)
    for row in spans.itertuples():
        matrix[row.start - 1, row.end - 1] = row.value
    fig, ax = plt.subplots(figsize=(1.6 + 0.5 * depth, 1.2 + 0.5 * depth))
    image = ax.imshow(matrix, cmap="viridis", vmin=min(0.0, np.nanmin(matrix)), vmax=1, origin="upper")
    for (i, j), value in np.ndenumerate(matrix):
        if not np.isnan(value):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=6, color="white" if value < 0.6 else "black")
    ax.set_xticks(range(depth), range(1, depth + 1))
    ax.set_yticks(range(depth), range(1, depth + 1))
    ax.set_xlabel("last skipped block")
    ax.set_ylabel("first skipped block")
    ax.set_title(f"Skipping blocks of {model}: {METRIC_NAMES[metric]} ({table['split'].iloc[0]}, "
                 f"n={table['n'].iloc[0]})\n"
                 f"no block skipped: {full:.3f}", fontsize=9)
    fig.colorbar(image, ax=ax, label=METRIC_NAMES[metric], fraction=0.046, pad=0.04)
    _save(fig, out_path)
