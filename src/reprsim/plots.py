"""Figures: per-pair similarity heatmaps, alignment error curves, truncation curves.

Every figure states what it shows in its title and axis labels, so it reads
without a legend hunt. Similarity heatmaps share one colour scale (0 to 1).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

MEASURE_LABELS = {"linear_cka": "linear CKA"}
SIMILARITY_RANGE = (0.0, 1.0)


def _save(fig, out_path: str | Path) -> None:
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def similarity_heatmap(table: pd.DataFrame, measure: str, out_path: str | Path) -> None:
    """Layer × layer heatmap of `measure` for the one model pair in `table`."""
    rows = table[table["measure"] == measure]
    if rows.empty:
        raise ValueError(f"table has no rows for measure {measure!r}")
    first = rows.iloc[0]
    matrix = rows.pivot(index="layer_a", columns="layer_b", values="value").sort_index().sort_index(axis=1)
    fig, ax = plt.subplots(figsize=(1.2 + 0.45 * matrix.shape[1], 1.0 + 0.45 * matrix.shape[0]))
    image = ax.imshow(matrix.to_numpy(), origin="lower", cmap="magma", vmin=SIMILARITY_RANGE[0],
                      vmax=SIMILARITY_RANGE[1], aspect="auto")
    if matrix.size <= 400:
        for (i, j), value in np.ndenumerate(matrix.to_numpy()):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=6,
                    color="black" if value > 0.6 else "white")
    ax.set_xticks(range(matrix.shape[1]), matrix.columns)
    ax.set_yticks(range(matrix.shape[0]), matrix.index)
    ax.set_xlabel(f"layer of {first['model_b']}  (0 = embeddings)")
    ax.set_ylabel(f"layer of {first['model_a']}  (0 = embeddings)")
    ax.set_title(
        f"{MEASURE_LABELS.get(measure, measure)}: {first['model_a']} vs {first['model_b']}\n"
        f"{first['representation']} pooling, {first['dataset']} {first['split']} split, n={first['n']}",
        fontsize=9,
    )
    fig.colorbar(image, ax=ax, label=MEASURE_LABELS.get(measure, measure), fraction=0.046, pad=0.04)
    _save(fig, out_path)


def alignment_curves(table: pd.DataFrame, out_path: str | Path) -> None:
    """Test-split relative error of the linear map per layer, one line per ordered model pair."""
    rows = table[(table["measure"] == "linear_map_rel_error") & (table["model_a"] != table["model_b"])]
    fig, ax = plt.subplots(figsize=(7, 4))
    if rows.empty:
        ax.text(0.5, 0.5, "no model pairs to align", ha="center", va="center", transform=ax.transAxes)
    for (model_a, model_b, direction), group in rows.groupby(["model_a", "model_b", "direction"]):
        source, target = (model_a, model_b) if direction == "a->b" else (model_b, model_a)
        layer_col = "layer_a" if direction == "a->b" else "layer_b"
        group = group.sort_values(layer_col)
        depth = group[layer_col].max() or 1
        ax.plot(group[layer_col] / depth, group["value"], marker="o", ms=3, label=f"{source} → {target}")
    ax.set_xlabel("relative depth of the source layer (0 = embeddings, 1 = last block)")
    ax.set_ylabel("relative error ||Y − g(X)||_F / ||Y||_F  (test)")
    ax.set_title("Linear least-squares map between models, per matching layer (lower = more similar)", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if not rows.empty:
        ax.legend(fontsize=6, ncol=2, loc="best")
    _save(fig, out_path)


def truncation_curve(table: pd.DataFrame, out_path: str | Path) -> None:
    """Accuracy when layer l feeds the tuned head (UNTUNED), with full model and majority baseline."""
    model = table["model"].iloc[0]
    untuned = table[table["mode"] == "UNTUNED"].sort_values("layer")
    full = table[table["mode"] == "FULL"]["value"].iloc[0]
    majority = table[table["mode"] == "MAJORITY"]["value"].iloc[0]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.plot(untuned["layer"], untuned["value"], marker="o", color="tab:green", label="UNTUNED (tuned head on layer l)")
    ax.axhline(full, color="black", lw=1, label=f"full fine-tuned model ({full:.3f})")
    ax.axhline(majority, color="tab:red", ls=":", label=f"majority class ({majority:.3f})")
    ax.set_xticks(untuned["layer"])
    ax.set_xlabel("layer fed to the task head (0 = embeddings)")
    ax.set_ylabel(f"accuracy ({table['split'].iloc[0]}, n={table['n'].iloc[0]})")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"Truncation of {model} (Phang et al. 2021, UNTUNED)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    _save(fig, out_path)
