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
    """Test-split relative error of the linear map per layer: one panel per source model,
    one line per target model (each target keeps its colour in every panel)."""
    rows = table[(table["measure"] == "linear_map_rel_error") & (table["model_a"] != table["model_b"])]
    if rows.empty:
        fig, ax = plt.subplots(figsize=(5, 2))
        ax.text(0.5, 0.5, "no model pairs to align", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        _save(fig, out_path)
        return
    forward = rows["direction"] == "a->b"
    curves = pd.DataFrame({
        "source": np.where(forward, rows["model_a"], rows["model_b"]),
        "target": np.where(forward, rows["model_b"], rows["model_a"]),
        "layer": np.where(forward, rows["layer_a"], rows["layer_b"]),
        "value": rows["value"].to_numpy(),
    })
    sources = sorted(curves["source"].unique())
    targets = sorted(curves["target"].unique())
    colours = dict(zip(targets, plt.get_cmap("tab10" if len(targets) <= 10 else "tab20").colors))
    columns = min(3, len(sources))
    panel_rows = int(np.ceil(len(sources) / columns))
    fig, axes = plt.subplots(panel_rows, columns, figsize=(4.2 * columns, 3.0 * panel_rows),
                             sharey=True, squeeze=False)
    for ax, source in zip(axes.flat, sources):
        for target, group in curves[curves["source"] == source].groupby("target"):
            group = group.sort_values("layer")
            depth = group["layer"].max() or 1
            ax.plot(group["layer"] / depth, group["value"], marker="o", ms=3, color=colours[target], label=target)
        ax.set_title(f"from {source}", fontsize=9)
        ax.set_xlabel("relative depth of source layer")
        ax.grid(alpha=0.3)
        ax.legend(title="to", fontsize=7, title_fontsize=7, loc="upper left")
    for ax in axes.flat[len(sources):]:
        ax.set_axis_off()
    for ax in axes[:, 0]:
        ax.set_ylabel("||Y − g(X)||_F / ||Y||_F (test)")
    axes[0, 0].set_ylim(bottom=0)
    fig.suptitle("Linear least-squares map between models, per matching layer (lower = more similar)", fontsize=10)
    fig.tight_layout()
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
