"""The main page's figures: the model × model summary per measure family, and the model distances."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reprsim.plotting import drawing
from reprsim.plotting.drawing import CHANCE_NOTE, FAMILIES, FAMILY_ORDER, MEASURE_LABELS
from reprsim.plotting.drawing import text_colour as _text_colour
from reprsim.stages.report.figures.base import Tables, _layout_below_title, _nothing_to_show, _save
from reprsim.stages.report.labels import representation_text


def _pack(families: dict[str, list[str]], columns: int) -> list[list[str | None]]:
    """Panel rows: a family starts a new row unless it fits in what is left of the current one."""
    rows: list[list[str | None]] = []
    for labels in families.values():
        for start in range(0, len(labels), columns):
            chunk = labels[start:start + columns]
            if rows and len(rows[-1]) + len(chunk) <= columns:
                rows[-1] += chunk
            else:
                rows.append(list(chunk))
    return [row + [None] * (columns - len(row)) for row in rows]


def model_summary_figure(tables: Tables, out_path: str | Path, dataset: str, representation: str,
                         measures: dict[str, str] | None = None, split: str = "", confidence: float = 0.95,
                         columns: int = 3) -> None:
    """One model × model panel per configured measure, grouped by family (CKA, CCA family, neuron-level,
    neighbourhood, Procrustes): the pair summary's mean over matching layers between distinct models,
    with its interval; cells whose interval does not exclude chance are hatched."""
    summary = tables["table"]
    if {"dataset", "representation"} <= set(summary.columns):
        summary = summary[(summary["dataset"] == dataset) & (summary["representation"] == representation)]
    summary = summary[summary["model_a"] != summary["model_b"]]
    if summary.empty:
        _nothing_to_show(out_path, f"fewer than two models on {dataset}: nothing to compare")
        return
    measures = dict(measures or {})
    labels = list(dict.fromkeys([*[m for m in measures if m in set(summary["measure"])], *summary["measure"]]))
    families: dict[str, list[str]] = {family: [] for family in FAMILY_ORDER}
    for label in labels:
        families[FAMILIES.get(measures.get(label, label), "other")].append(label)
    layout = _pack({f: ls for f, ls in families.items() if ls}, columns)
    models = sorted(set(summary["model_a"]) | set(summary["model_b"]))
    side = 1.1 + 0.62 * len(models)
    fig, axes = plt.subplots(len(layout), columns, figsize=(side * columns * 1.12, side * len(layout)),
                             squeeze=False)
    for panel_row, ax_row in zip(layout, axes):
        for label, ax in zip(panel_row, ax_row):
            if label is None:
                ax.set_axis_off()
                continue
            family = FAMILIES.get(measures.get(label, label), "other")
            drawing.summary_panel(ax, fig, summary[summary["measure"] == label], models,
                                  f"{family} · {MEASURE_LABELS.get(label, label)}")
    n = summary["n"].iloc[0] if "n" in summary else "?"
    fig.suptitle(f"Mean over matching layers (same relative depth) between distinct models: "
                 f"{representation_text(representation)}, {dataset}{' ' + split if split else ''} split, "
                 f"n = {n} {'words' if representation == 'word' else 'rows'}\n"
                 f"cell: mean, below it its {confidence:.0%} interval (low–high); {CHANCE_NOTE}; "
                 "diagonal (a model with itself) left blank",
                 fontsize=10)
    _layout_below_title(fig, lines=2)
    _save(fig, out_path)


def model_distance_figure(tables: Tables, out_path: str | Path, label: str) -> None:
    """Per dataset, representation and depth: the arccos-CKA model-distance matrix and an average-linkage
    dendrogram of it, with the distance two models would have at chance when the pair summary is given."""
    distances = tables["table"]
    keys = [key for key in ("dataset", "representation") if key in distances] + ["depth"]
    matrices = {key if isinstance(key, tuple) else (key,): rows.pivot(index="model_a", columns="model_b",
                                                                       values="distance")
                for key, rows in distances.groupby(keys)}
    from scipy.cluster.hierarchy import dendrogram, linkage
    from scipy.spatial.distance import squareform

    if not matrices:
        _nothing_to_show(out_path, "no two models share a depth: no model distances")
        return
    summary = tables.get("summary")
    from matplotlib.colors import Normalize

    fig, axes = plt.subplots(len(matrices), 2, figsize=(11, 0.6 + 2.9 * len(matrices)), squeeze=False,
                             gridspec_kw={"width_ratios": [1, 1.3]})
    for (key, matrix), (ax_matrix, ax_tree) in zip(matrices.items(), axes):
        depth = int(key[-1])
        where = " ".join(str(k) for k in key[:-1])
        chance = _chance_distance(summary, label, list(matrix.index), depth, dict(zip(keys[:-1], key[:-1])))
        # colour up to the chance distance when known, so "as far apart as unrelated models" is the top colour
        cmap, norm = plt.get_cmap("viridis"), Normalize(0, max(chance or 0, float(np.nanmax(matrix.to_numpy())), 1e-9))
        image = ax_matrix.imshow(matrix.to_numpy(), cmap=cmap, norm=norm)
        for (i, j), value in np.ndenumerate(matrix.to_numpy()):
            ax_matrix.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                           color=_text_colour(cmap, norm, value))
        ax_matrix.set_xticks(range(len(matrix)), matrix.columns, rotation=45, ha="right", fontsize=8)
        ax_matrix.set_yticks(range(len(matrix)), matrix.index, fontsize=8)
        ax_matrix.set_title(f"{where}{': ' if where else ''}models with {depth} blocks: "
                            f"sqrt(Σ_l arccos({label})²)", fontsize=9)
        fig.colorbar(image, ax=ax_matrix, label="model distance (radians)", fraction=0.046, pad=0.04)
        links = linkage(squareform(matrix.to_numpy(), checks=False), method="average")
        dendrogram(links, labels=list(matrix.index), ax=ax_tree, orientation="right", leaf_font_size=9)
        tallest = float(links[:, 2].max()) if len(links) else 0.0
        if chance is not None and chance <= 3 * tallest:
            ax_tree.axvline(chance, color="tab:red", ls="--", lw=1)
            ax_tree.text(chance, 0.5, f"chance ≈ {chance:.2f} ", color="tab:red", fontsize=8, va="center",
                         ha="right", rotation=90, transform=ax_tree.get_xaxis_transform())
            ax_tree.set_xlim(0, max(ax_tree.get_xlim()[1], chance * 1.05))
        elif chance is not None:  # far beyond the tree: drawing it would flatten the tree to a line
            ax_tree.text(0.98, 0.02, f"chance ≈ {chance:.2f} (off this scale) →", color="tab:red", fontsize=8,
                         ha="right", va="bottom", transform=ax_tree.transAxes)
        ax_tree.set_xlabel("model distance (average linkage)")
        ax_tree.set_title("hierarchical clustering (joined further left = closer)", fontsize=9)
    fig.tight_layout()
    _save(fig, out_path)


def _chance_distance(summary: pd.DataFrame | None, label: str, models: list[str], depth: int,
                     where: dict[str, str]) -> float | None:
    """The distance at chance: every one of the depth + 1 layers at the CKA permutation null mean
    (the median over these models' pairs in the pair summary), sqrt(depth + 1) · arccos(null)."""
    if summary is None or "null_mean" not in summary:
        return None
    rows = summary[(summary["measure"] == label) & summary["model_a"].isin(models) & summary["model_b"].isin(models)]
    for column, value in where.items():
        if column in rows:
            rows = rows[rows[column] == value]
    null = rows["null_mean"].dropna()
    if null.empty:
        return None
    return float(np.sqrt(depth + 1) * np.arccos(np.clip(null.median(), -1, 1)))
