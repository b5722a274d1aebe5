"""Figures: one registry, one signature.

Every figure is `FIGURES[name](tables, out_path, **options)`: `tables` maps the names of the
rule's inputs to the tidy tables they hold, and the figure only draws them (what a figure
shows is computed by the stage that wrote the table). Every figure states what it shows in
its title and axis labels, so it reads without a legend hunt. Similarity heatmaps share one
colour scale (0 to 1).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from reprsim.layers import matching_layer  # noqa: E402

Tables = dict[str, pd.DataFrame]

MEASURE_LABELS = {"linear_cka": "linear CKA", "unbiased_cka": "unbiased linear CKA", "rbf_cka": "RBF CKA",
                  "svcca": "SVCCA", "pwcca": "PWCCA", "procrustes": "Procrustes distance", "mutual_knn": "mutual k-NN"}
SIMILARITY_RANGE = (0.0, 1.0)


def _save(fig, out_path: str | Path) -> None:
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _colour_range(kind: str, measure: str) -> tuple[float, float]:
    """One fixed scale per measure, so every pair's panel for it reads the same."""
    if kind == "distance":
        return 0.0, float(np.pi / 2)  # Procrustes angular distance
    return SIMILARITY_RANGE


def _heatmap_panel(ax, rows: pd.DataFrame, title: str, model_a: str, model_b: str) -> None:
    matrix = rows.pivot(index="layer_a", columns="layer_b", values="value").sort_index().sort_index(axis=1)
    low, high = _colour_range(rows["kind"].iloc[0], rows["measure"].iloc[0])
    image = ax.imshow(matrix.to_numpy(), origin="lower", cmap="magma", vmin=low, vmax=high, aspect="auto")
    if matrix.size <= 400:
        for (i, j), value in np.ndenumerate(matrix.to_numpy()):
            if np.isnan(value):  # undefined (a layer whose rows are all one vector): say so, not "nan"
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=5.5, color="grey")
                continue
            bright = (value - low) / (high - low) > 0.6
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=5.5, color="black" if bright else "white")
    ax.set_xticks(range(matrix.shape[1]), matrix.columns, fontsize=7)
    ax.set_yticks(range(matrix.shape[0]), matrix.index, fontsize=7)
    ax.set_xlabel(f"layer of {model_b}", fontsize=8)
    ax.set_ylabel(f"layer of {model_a}", fontsize=8)
    ax.set_title(title, fontsize=8)
    plt.colorbar(image, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=6)


def pair_heatmaps(tables: Tables, out_path: str | Path) -> None:
    """One heatmap per configured measure (and direction, for asymmetric ones) for one model pair."""
    rows = tables["table"]
    if rows.empty:
        raise ValueError("table has no similarity measure rows")
    first = rows.iloc[0]
    panels = [(key, group) for key, group in rows.groupby(["measure", "direction"], sort=False)]
    columns = min(4, len(panels))
    panel_rows = int(np.ceil(len(panels) / columns))
    layers_a, layers_b = rows["layer_a"].nunique(), rows["layer_b"].nunique()
    width, height = 1.6 + 0.32 * layers_b, 1.3 + 0.32 * layers_a
    fig, axes = plt.subplots(panel_rows, columns, figsize=(width * columns, height * panel_rows), squeeze=False)
    for ax, ((measure, direction), group) in zip(axes.flat, panels):
        arrow = {"a->b": f" ({first['model_a']}→{first['model_b']})",
                 "b->a": f" ({first['model_b']}→{first['model_a']})"}.get(direction, "")
        kind = "distance" if group["kind"].iloc[0] == "distance" else "similarity"
        _heatmap_panel(ax, group, f"{MEASURE_LABELS.get(measure, measure)}{arrow}\n{kind}", first["model_a"],
                       first["model_b"])
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    fig.suptitle(f"{first['model_a']} vs {first['model_b']}: {first['representation']} pooling, "
                 f"{first['dataset']} {first['split']} split, n={first['n']} (layer 0 = embeddings)", fontsize=10)
    fig.tight_layout()
    _save(fig, out_path)


def model_distance_figure(tables: Tables, out_path: str | Path, label: str) -> None:
    """Per depth: the arccos-CKA model-distance matrix and an average-linkage dendrogram of it."""
    distances = tables["table"]
    matrices = {depth: rows.pivot(index="model_a", columns="model_b", values="distance")
                for depth, rows in distances.groupby("depth")}
    from scipy.cluster.hierarchy import dendrogram, linkage
    from scipy.spatial.distance import squareform

    if not matrices:
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.text(0.5, 0.5, "no two models share a depth: no model distances", ha="center", va="center")
        ax.set_axis_off()
        _save(fig, out_path)
        return
    fig, axes = plt.subplots(len(matrices), 2, figsize=(11, 4.2 * len(matrices)), squeeze=False)
    for (depth, matrix), (ax_matrix, ax_tree) in zip(matrices.items(), axes):
        image = ax_matrix.imshow(matrix.to_numpy(), cmap="viridis", vmin=0)
        for (i, j), value in np.ndenumerate(matrix.to_numpy()):
            ax_matrix.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color="white")
        ax_matrix.set_xticks(range(len(matrix)), matrix.columns, rotation=45, ha="right", fontsize=8)
        ax_matrix.set_yticks(range(len(matrix)), matrix.index, fontsize=8)
        ax_matrix.set_title(f"models with {depth} blocks: sqrt(Σ_l arccos({label})²)", fontsize=9)
        fig.colorbar(image, ax=ax_matrix, label="model distance (radians)", fraction=0.046, pad=0.04)
        dendrogram(linkage(squareform(matrix.to_numpy(), checks=False), method="average"),
                   labels=list(matrix.index), ax=ax_tree, orientation="right")
        ax_tree.set_xlabel("model distance (average linkage)")
        ax_tree.set_title("hierarchical clustering", fontsize=9)
    fig.tight_layout()
    _save(fig, out_path)


def localization_curves(tables: Tables, out_path: str | Path) -> None:
    """Wu et al.'s localization score per layer, one line per model."""
    scores = tables["table"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for model, group in scores.groupby("model"):
        depth = group["layer"].max() or 1
        ax.plot(group["layer"] / depth, group["localization"], marker="o", ms=3, label=model)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("relative depth (0 = embeddings, 1 = last block)")
    ax.set_ylabel("mean neuronsim − mean SVCCA to all other layers")
    ax.set_title("Localization score per layer (Wu et al. 2020): higher = more localized", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    _save(fig, out_path)


MODE_STYLE = {  # Phang et al. (2021), Figure 3 colours
    "UNTUNED": ("tab:green", "UNTUNED: tuned head on layer l, no training"),
    "TUNED": ("tab:blue", "TUNED: fresh head on the frozen fine-tuned layer l"),
    "TUNEDORIG": ("goldenrod", "TUNEDORIG: fresh head on the frozen base layer l"),
}
METRIC_NAMES = {"accuracy": "accuracy", "matthews_correlation": "Matthews correlation"}


def aligner_figure(tables: Tables, out_path: str | Path) -> None:
    """Ren et al. (2023): test error of every aligner per layer (left, one line per aligner and
    direction) and, when every layer pair was aligned, the INN's layer × layer error (their Figure 3)."""
    table = tables["table"]
    scored = table[table["role"] == "score"]
    a, b = table["model_a"].iloc[0], table["model_b"].iloc[0]
    all_pairs = scored.groupby("layer_a")["layer_b"].nunique().max() > 1
    inn = scored[scored["method"] == "inn"]
    panels = 2 if all_pairs and not inn.empty else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4), squeeze=False)
    ax = axes[0, 0]
    matching = scored
    if all_pairs:  # the line plot follows the layers at the same relative depth
        depth_a, depth_b = int(scored["layer_a"].max()), int(scored["layer_b"].max())
        matching = scored[scored["layer_b"] == scored["layer_a"].map(lambda layer: matching_layer(layer, depth_a, depth_b))]
    colours = dict(zip(dict.fromkeys(matching["aligner"]), plt.rcParams["axes.prop_cycle"].by_key()["color"] * 3))
    for (direction, aligner), rows in matching.groupby(["direction", "aligner"], sort=False):
        rows = rows.sort_values("layer_a")
        ax.plot(rows["layer_a"], rows["rel_error"], marker="o", ms=3, color=colours[aligner],
                ls="-" if direction == "a->b" else "--", label=f"{aligner} ({a if direction == 'a->b' else b} → "
                                                               f"{b if direction == 'a->b' else a})")
    ax.set_xlabel(f"layer of {a} (paired with the same relative depth of {b})")
    ax.set_ylabel(f"||Y − g(X)||_F / ||Y||_F ({scored['split'].iloc[0]}, n={scored['n'].iloc[0]})")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    ax.set_title(f"Aligners between {a} and {b} (lower = more alike)", fontsize=9)
    if panels == 2:
        forward = inn[inn["direction"] == "a->b"]
        matrix = forward.pivot_table(index="layer_a", columns="layer_b", values="rel_error").to_numpy()
        image = axes[0, 1].imshow(matrix, cmap="viridis_r", origin="lower", vmin=0)
        axes[0, 1].set_xlabel(f"layer of {b} (Y)")
        axes[0, 1].set_ylabel(f"layer of {a} (X)")
        axes[0, 1].set_title(f"INN test error, every layer pair ({a} → {b})", fontsize=9)
        fig.colorbar(image, ax=axes[0, 1], label="relative error")
    _save(fig, out_path)


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
    """CLS-token CKA between layers, one panel per view, with the block split drawn on FT–FT and ORIG–ORIG."""
    table, blocks = tables["table"], tables["blocks"]
    model = table["model"].iloc[0]
    views = list(dict.fromkeys(table["view"]))
    fig, axes = plt.subplots(1, len(views), figsize=(3.3 * len(views), 3.6), squeeze=False)
    for ax, view in zip(axes[0], views):
        rows = table[table["view"] == view]
        matrix = rows.pivot(index="layer_a", columns="layer_b", values="value").to_numpy()
        image = ax.imshow(matrix, cmap="magma", vmin=0, vmax=1, origin="lower")
        ax.set_title(view, fontsize=8)
        ax.set_xlabel(f"layer of {rows['model_b'].iloc[0]}", fontsize=7)
        ax.set_ylabel(f"layer of {rows['model_a'].iloc[0]}", fontsize=7)
        ax.tick_params(labelsize=6)
        summary = blocks[blocks["view"] == view]
        if not summary.empty and pd.notna(summary["split"].iloc[0]):
            split = int(summary["split"].iloc[0])
            for line in (ax.axhline, ax.axvline):
                line(split - 0.5, color="cyan", lw=1, ls="--")
            ax.text(0.02, 0.98, f"split at layer {split}\ncontrast {summary['contrast'].iloc[0]:.2f}",
                    transform=ax.transAxes, va="top", fontsize=6, color="cyan")
    fig.colorbar(image, ax=axes[0].tolist(), label="linear CKA (CLS token)", fraction=0.02, pad=0.02)
    fig.suptitle(f"{model}: CKA between layers ({table['split'].iloc[0]}, n={table['n'].iloc[0]}); "
                 "dashed: best two-block split", fontsize=9)
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


FIGURES = {
    "heatmap": pair_heatmaps,
    "model_distance": model_distance_figure,
    "localization": localization_curves,
    "aligners": aligner_figure,
    "truncation": truncation_curve,
    "layer_views": layer_views_figure,
    "skip": skip_heatmap,
}


def draw(name: str, tables: Tables, out_path: str | Path, **options) -> None:
    """Draw figure `name` of the registry from `tables` into `out_path`."""
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; the registry has {', '.join(FIGURES)}")
    FIGURES[name](tables, out_path, **options)
