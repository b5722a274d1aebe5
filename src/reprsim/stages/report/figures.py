"""Figures: one registry, one signature.

Every figure is `FIGURES[name](tables, out_path, **options)`: `tables` maps the names of the
rule's inputs to the tidy tables they hold, and the figure only draws them (what a figure
shows is computed by the stage that wrote the table). Every figure states what it shows in
its title and axis labels, so it reads without a legend hunt. Similarity heatmaps share one
colour scale (0 to 1). The layer × layer heatmaps and the model × model summary draw their panels with
reprsim.plotting.drawing, the drawing code reprsim.plotting.plots shares (a figure drawn from Python reads as the report's).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reprsim.plotting import drawing
# chance_text and not_beyond_chance stay reachable here, where the report's tests and readers found them
from reprsim.plotting.drawing import (CHANCE_HATCH, CHANCE_NOTE, FAMILIES, FAMILY_ORDER, MEASURE_LABELS, chance_text,  # noqa: F401
                             not_beyond_chance)
from reprsim.plotting.drawing import cell_text as _cell_text
from reprsim.plotting.drawing import colours as _colours
from reprsim.plotting.drawing import hatch as _hatch
from reprsim.plotting.drawing import text_colour as _text_colour
from reprsim.plotting.drawing import two as _two
from reprsim.io.outputs import atomic_file
from reprsim.tables.layers import matching_layer
from reprsim.measure_registry import MEASURES as REGISTRY
from reprsim.design.senses import SENSES
from reprsim.stages.report.labels import UNIVERSALITY_VERDICT_RULES, UNIVERSALITY_VERDICTS, representation_text
from reprsim.tables.stitching import first_seed, main_metric, penalty_text, phis, summary_phi

Tables = dict[str, pd.DataFrame]


def _save(fig, out_path: str | Path) -> None:
    """PNG through a temporary sibling, renamed when complete (a killed job leaves no half image)."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_file(out_path) as tmp:
            fig.savefig(tmp, dpi=110, bbox_inches="tight", format=out_path.suffix.lstrip(".") or "png")
    finally:
        plt.close(fig)


def _nothing_to_show(out_path: str | Path, message: str) -> None:
    """A small figure saying why a figure has nothing to draw (the report still finds the file it expects)."""
    fig, ax = plt.subplots(figsize=(6, 1.5))
    ax.text(0.5, 0.5, message, ha="center", va="center")
    ax.set_axis_off()
    _save(fig, out_path)


def _layout_below_title(fig, lines: int) -> None:
    """tight_layout that keeps the panels below a suptitle of `lines` lines (plain tight_layout lets the first row's
    titles run into it once a figure has many rows of panels)."""
    fig.tight_layout(rect=(0, 0, 1, 1 - (0.3 + 0.22 * lines) / fig.get_figheight()))


def _measure_order(labels, measures: dict[str, str] | None) -> list[str]:
    """Measure labels by family (FAMILY_ORDER), in config order within a family; unknown labels last."""
    measures = dict(measures or {})
    labels = list(dict.fromkeys([*[m for m in measures if m in set(labels)], *labels]))
    return sorted(labels, key=lambda label: FAMILY_ORDER.index(FAMILIES.get(measures.get(label, label), "other")))


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


# ----------------------------------------------------------------- model stitching (Bansal et al. 2021; Brown et al. 2023)

PENALTY_HATCH_NOTE = "hatched / hollow marker: the penalty's interval contains 0"


def _penalty_at_chance(rows: pd.DataFrame) -> pd.Series:
    """The penalty a model scoring at chance would have: g's score − chance (chance − g's for a loss)."""
    sign = np.where(rows["higher_is_better"].astype(bool), 1.0, -1.0)
    return sign * (rows["top_score"] - rows["chance"])


def _chance_line(ax, level: float, low: float, high: float, colour="grey") -> str:
    """A dotted line at the penalty at chance when it lies near the plotted values; else its level, in words."""
    if not np.isfinite(level):
        return ""
    span = max(high - low, 1e-9)
    if low - span <= level <= high + 2 * span:
        ax.axhline(level, color=colour, ls=":", lw=1)
        return f"dotted: penalty at chance ({_two(level)})"
    return f"penalty at chance ≈ {_two(level)} (off this scale)"


def _stitch_rows(tables: Tables, model_a: str, model_b: str):
    """(the two directions' rows, the two self-stitches' rows, metric, seed, maps) of one model pair."""
    table = pd.concat([t for t in tables.values() if t is not None and not t.empty], ignore_index=True)
    directed = list(zip(table["model_a"], table["model_b"]))
    rows = table[[pair in ((model_a, model_b), (model_b, model_a)) for pair in directed]]
    if rows.empty:
        raise ValueError(f"the stitching tables hold no row of {model_a} into {model_b} or back")
    metric, seed = main_metric(rows), first_seed(rows)
    keep = (table["metric"] == metric) & (table["seed"] == seed)
    rows = rows[keep.loc[rows.index]]
    selves = table[keep & (table["model_a"] == table["model_b"]) & table["model_a"].isin([model_a, model_b])]
    return rows, selves, metric, seed, phis(rows), sorted(set(table.loc[table["metric"] == metric, "seed"]))


def stitch_penalties(tables: Tables, out_path: str | Path, model_a: str, model_b: str,
                     confidence: float = 0.95) -> None:
    """One unordered model pair's stitching penalties (Bansal et al. 2021; Brown et al. 2023, Fig. 1): one row
    per direction (a into b, b into a), one column per map φ, the task's main metric. Layer of f (bottom) ×
    layer of g (top) heatmaps, each cell annotated with its penalty (diverging colours centred at 0, red =
    worse than g alone; blank = not stitched; hatched = interval contains 0); when every layer of f enters g
    at one layer only (`layers: matching`), penalty against the layer of f instead, one line per φ with its
    interval band and f's self-stitch (dashed)."""
    rows, selves, metric, seed, maps, seeds = _stitch_rows(tables, model_a, model_b)
    directions = [(model_a, model_b), (model_b, model_a)]
    single = all(rows[(rows["model_a"] == f) & (rows["model_b"] == g)].groupby("layer_a")["layer_b"].nunique().max()
                 <= 1 for f, g in directions if ((rows["model_a"] == f) & (rows["model_b"] == g)).any())
    first = rows.iloc[0]
    chance = float(np.nanmedian(_penalty_at_chance(rows)))
    seed_text = f", maps of seed {seed} (of {len(seeds)})" if len(seeds) > 1 else ""
    where = f"{first['dataset']} {first['split']} split, n = {int(first['n']):,}{seed_text}"
    if single:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), squeeze=False)
        colours = dict(zip(maps, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 3))
        notes = []
        for ax, (f, g) in zip(axes[0], directions):
            cells = rows[(rows["model_a"] == f) & (rows["model_b"] == g)]
            own = selves[selves["model_a"] == f]
            for phi in maps:
                line = cells[cells["phi"] == phi].sort_values("layer_a")
                if line.empty:
                    continue
                colour = colours[phi]
                ax.fill_between(line["layer_a"], line["penalty_low"], line["penalty_high"], color=colour, alpha=0.18,
                                lw=0)
                ax.plot(line["layer_a"], line["penalty"], color=colour, lw=1.4, label=f"{f} → {g}, φ = {phi}")
                contains = (line["penalty_low"] <= 0) & (line["penalty_high"] >= 0)
                ax.scatter(line["layer_a"], line["penalty"], s=22, zorder=3, color=colour, edgecolor=colour,
                           facecolor=[("white" if c else colour) for c in contains])
                baseline = own[own["phi"] == phi].sort_values("layer_a")
                if not baseline.empty:
                    ax.plot(baseline["layer_a"], baseline["penalty"], color=colour, ls="--", lw=1,
                            label=f"{f} → {f} (self-stitch), φ = {phi}")
            ax.axhline(0, color="black", lw=0.7)
            values = pd.concat([cells["penalty_low"], cells["penalty_high"], own["penalty"]]).dropna()
            note = _chance_line(ax, chance, float(values.min()) if len(values) else 0.0,
                                float(values.max()) if len(values) else 0.0)
            notes.append(note)
            layers = sorted(set(cells["layer_a"]))
            ax.set_xticks(layers)
            ax.set_xlabel("layer of f (bottom)", fontsize=8)
            ax.set_ylabel(f"penalty: {penalty_text(metric)}", fontsize=8)
            top = ax.twiny()  # the layer of g each layer of f enters
            top.set_xlim(ax.get_xlim())
            entered = cells.drop_duplicates("layer_a").set_index("layer_a")["layer_b"]
            top.set_xticks(layers, [str(int(entered[layer])) for layer in layers], fontsize=7)
            top.set_xlabel("layer of g (top)", fontsize=8)
            ax.set_title(f"f = {f} into g = {g}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6.5)
        note = next((n for n in notes if n), "")
        fig.suptitle(f"Stitching penalty, {first['model_a']} and {first['model_b']} both ways: {where}; line = penalty "
                     f"(positive = worse than g alone), band = {confidence:.0%} interval, dashed = f into itself; "
                     f"{PENALTY_HATCH_NOTE}{'; ' + note if note else ''}", fontsize=9, wrap=True)
        fig.tight_layout()
        _save(fig, out_path)
        return
    from matplotlib.colors import TwoSlopeNorm

    largest = float(np.nanmax(np.abs(rows["penalty"]))) if rows["penalty"].notna().any() else 0.0
    largest = largest if largest > 0 else 1.0
    norm = TwoSlopeNorm(0.0, -largest, largest)
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="white")
    depth_f = {f: int(rows.loc[rows["model_a"] == f, "n_layers_a"].iloc[0]) for f, _ in directions
               if (rows["model_a"] == f).any()}
    side_x = max(depth_f.values(), default=4)
    fig, axes = plt.subplots(2, len(maps), figsize=(1.6 + (0.45 * side_x + 1.4) * len(maps), 2 * (1.5 + 0.42 * side_x)),
                             squeeze=False, layout="constrained")
    image = None
    for (f, g), ax_row in zip(directions, axes):
        cells = rows[(rows["model_a"] == f) & (rows["model_b"] == g)]
        for phi, ax in zip(maps, ax_row):
            panel = cells[cells["phi"] == phi]
            if panel.empty:
                ax.text(0.5, 0.5, f"{f} → {g}: not stitched with φ = {phi}", ha="center", va="center", fontsize=8,
                        transform=ax.transAxes)
                ax.set_axis_off()
                continue
            depth_a, depth_b = int(panel["n_layers_a"].iloc[0]), int(panel["n_layers_b"].iloc[0])
            xs = list(range(min(1, int(panel["layer_a"].min())), depth_a + 1))
            ys = list(range(min(1, int(panel["layer_b"].min())), depth_b + 1))
            matrix = panel.pivot_table(index="layer_b", columns="layer_a", values="penalty").reindex(index=ys, columns=xs)
            image = ax.imshow(matrix.to_numpy(), origin="lower", cmap=cmap, norm=norm, aspect="auto")
            contains = panel[(panel["penalty_low"] <= 0) & (panel["penalty_high"] >= 0)]
            marked = {(ys.index(int(m)), xs.index(int(la))) for la, m in zip(contains["layer_a"], contains["layer_b"])}
            _hatch(ax, sorted(marked))
            if matrix.size <= 400:
                for (i, j), value in np.ndenumerate(matrix.to_numpy()):
                    if np.isfinite(value):
                        _cell_text(ax, j, i, _two(value), cmap, norm, value, (i, j) in marked, 6)
            ax.set_xticks(range(len(xs)), xs, fontsize=7)
            ax.set_yticks(range(len(ys)), ys, fontsize=7)
            ax.set_xlabel(f"layer of f (bottom): {f}", fontsize=8)
            ax.set_ylabel(f"layer of g (top): {g}", fontsize=8)
            own = selves[(selves["model_a"] == f) & (selves["phi"] == phi)]["penalty"].dropna()
            span = _two(own.min()) if len(own) and _two(own.min()) == _two(own.max()) else \
                f"{_two(own.min())}–{_two(own.max())}" if len(own) else ""
            baseline = f"\nf into itself (self-stitch): {span}" if span else ""
            ax.set_title(f"{f} → {g}, φ = {phi}{baseline}", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), fraction=0.03, pad=0.02).set_label(
            f"penalty ({penalty_text(metric)})", fontsize=8)
    fig.suptitle(f"Stitching penalty, {model_a} and {model_b} both ways: {where}; cell = penalty (red = worse than g "
                 f"alone, blue = better), blank = not stitched; hatched: the {confidence:.0%} interval contains 0; "
                 f"penalty at chance ≈ {_two(chance)}", fontsize=9, wrap=True)
    _save(fig, out_path)


def stitching_summary(tables: Tables, out_path: str | Path, dataset: str, measure_label: str = "",
                      confidence: float = 0.95) -> None:
    """Brown et al. (2023), Fig. 2: left, the identity-stitching penalty (else the first map's) against the
    layer of f (relative depth when the models differ in depth), one line per directed pair, self-stitches
    dashed, with interval bands; right, `measure_label` (a CKA of the pair tables) between the same model
    pairs at matching layers, with its interval band and chance level (dotted). Without pair-table rows for
    these models only the left panel is drawn, and the title says so."""
    table = tables["table"]
    table = table[table["dataset"] == dataset]
    if table.empty:
        raise ValueError(f"the stitching table has no rows for dataset {dataset!r}")
    metric, phi = main_metric(table), summary_phi(phis(table))
    seed = first_seed(table[table["phi"] == phi])
    rows = table[(table["metric"] == metric) & (table["phi"] == phi) & (table["seed"] == seed)]
    depth = dict(zip(rows["model_a"], rows["n_layers_a"].astype(int)))
    depth.update(zip(rows["model_b"], rows["n_layers_b"].astype(int)))
    relative = len(set(depth.values())) > 1
    cka = _cka_rows(tables.get("pairs"), dataset, measure_label,
                    sorted({tuple(sorted(p)) for p in zip(rows["model_a"], rows["model_b"]) if p[0] != p[1]}))
    directed = sorted(set(zip(rows["model_a"], rows["model_b"])), key=lambda p: (p[0] == p[1], p))
    width = (12.5 if cka is not None else 7) + (2.5 if len(directed) > 6 else 0)  # room for a legend beside
    fig, axes = plt.subplots(1, 2 if cka is not None else 1, figsize=(width, 4.6), squeeze=False)
    ax = axes[0, 0]
    palette = plt.get_cmap("tab10" if len(directed) <= 10 else "tab20").colors
    for k, (f, g) in enumerate(directed):
        line = rows[(rows["model_a"] == f) & (rows["model_b"] == g)]
        line = line[line["layer_b"] == line["layer_a"].map(lambda la: matching_layer(la, depth[f], depth[g]))]
        line = line.sort_values("layer_a")
        x = line["layer_a"] / depth[f] if relative else line["layer_a"]
        colour = palette[k % len(palette)]
        self_stitch = f == g
        ax.fill_between(x, line["penalty_low"], line["penalty_high"], color=colour, alpha=0.08 if self_stitch else 0.16,
                        lw=0)
        ax.plot(x, line["penalty"], color=colour, marker="o", ms=3, ls="--" if self_stitch else "-", lw=1.2,
                label=f"{f} → {g}{' (self-stitch)' if self_stitch else ''}")
    ax.axhline(0, color="black", lw=0.7)
    values = pd.concat([rows["penalty_low"], rows["penalty_high"]]).dropna()
    chance = _chance_line(ax, float(np.nanmedian(_penalty_at_chance(rows))), float(values.min()) if len(values) else 0,
                          float(values.max()) if len(values) else 0)
    if not relative:  # whole layers
        ax.set_xticks(sorted(set(rows["layer_a"])))
    ax.set_xlabel("relative depth of f (bottom): l / L_f" if relative else "layer of f (bottom), entering g (top) "
                  "at the same layer", fontsize=8)
    ax.set_ylabel(f"penalty: {penalty_text(metric)}", fontsize=8)
    ax.set_title(f"{'Identity' if phi == 'identity' else f'φ = {phi}'} stitching of f into g (positive = worse than "
                 f"g alone)\n{chance or 'no chance level'}", fontsize=8)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)
    if len(directed) > 6:  # many pairs: the legend beside the panel, not over the lines
        ax.legend(fontsize=6.5, ncol=1 + len(directed) // 12, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(fontsize=6.5)
    first = rows.iloc[0]
    title = (f"Stitching beside similarity, {dataset} (Brown et al. 2023, Fig. 2): {first['split']} split, "
             f"n = {int(first['n']):,}; band = {confidence:.0%} interval")
    if cka is not None:
        _cka_panel(axes[0, 1], cka, measure_label, depth, relative)
    elif tables.get("pairs") is None:
        title += "; no pair table (the dataset is not extracted): no CKA panel"
    elif measure_label:
        title += f"; no {MEASURE_LABELS.get(measure_label, measure_label)} rows for these models in the pair tables"
    else:
        title += "; no CKA measure configured"
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    _save(fig, out_path)


def _cka_rows(pairs: pd.DataFrame | None, dataset: str, label: str, model_pairs) -> pd.DataFrame | None:
    """The pair table's `label` rows of these model pairs on `dataset`: representation mean if present, else the
    first; symmetric rows, else a->b. None when there are none."""
    if pairs is None or pairs.empty or not label or not model_pairs:
        return None
    rows = pairs[(pairs["dataset"] == dataset) & (pairs["measure"] == label)]
    rows = rows[[p in set(model_pairs) for p in zip(rows["model_a"], rows["model_b"])]]
    if rows.empty:
        return None
    representations = sorted(set(rows["representation"]))
    rows = rows[rows["representation"] == ("mean" if "mean" in representations else representations[0])]
    direction = "symmetric" if (rows["direction"] == "symmetric").any() else "a->b"
    return rows[rows["direction"] == direction]


def _cka_panel(ax, rows: pd.DataFrame, label: str, depth: dict[str, int], relative: bool) -> None:
    palette = plt.get_cmap("tab10").colors
    for k, ((a, b), pair) in enumerate(rows.groupby(["model_a", "model_b"], sort=True)):
        depth_a = depth.get(a, int(pair["layer_a"].max()))
        depth_b = depth.get(b, int(pair["layer_b"].max()))
        line = pair[(pair["layer_a"] >= 1)
                    & (pair["layer_b"] == pair["layer_a"].map(lambda la: matching_layer(la, depth_a, depth_b)))]
        line = line.sort_values("layer_a")
        x = line["layer_a"] / depth_a if relative else line["layer_a"]
        colour = palette[k % len(palette)]
        ax.fill_between(x, line["ci_low"], line["ci_high"], color=colour, alpha=0.18, lw=0)
        ax.plot(x, line["value"], color=colour, marker="o", ms=3, label=f"{a} vs {b}")
        if "null_mean" in line:
            ax.plot(x, line["null_mean"], color=colour, ls=":", lw=1)
    first = rows.iloc[0]
    if not relative:
        ax.set_xticks(sorted(set(rows["layer_a"]) - {0}))
    ax.set_xlabel("relative depth l / L of the first model" if relative else
                  "layer (the same layer of both models)", fontsize=8)
    ax.set_ylabel(f"{MEASURE_LABELS.get(label, label)} (higher = more alike)", fontsize=8)
    ax.set_ylim(bottom=min(0.0, float(rows["value"].min())))
    ax.set_title(f"{MEASURE_LABELS.get(label, label)} at matching layers ({representation_text(first['representation'])}, "
                 f"{first['split']} split, n = {int(first['n']):,})\ndotted: chance level (rows shuffled)", fontsize=8)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6.5)


def measure_agreement_figure(tables: Tables, out_path: str | Path, measures: dict[str, str] | None = None) -> None:
    """Kendall τ_b between every two measures, one measure × measure matrix per dataset, representation and scope
    (every compared cell; model pairs at matching layers), each cell with its value; a cell whose interval
    contains 0 hatched (the two measures' orders are not shown to be related)."""
    table = tables["table"]
    table = table[table["statistic"] == "kendall_tau_b"]
    keys = list(table.groupby(["dataset", "representation", "scope"], sort=False).groups)
    if not keys:
        _nothing_to_show(out_path, "fewer than two measures per representation: no agreement to show")
        return
    cmap = plt.get_cmap("RdBu")
    from matplotlib.colors import Normalize
    norm = Normalize(-1, 1)
    size = len(set(table["measure_x"]) | set(table["measure_y"]))
    side = 1.2 + 0.55 * size
    fig, axes = plt.subplots(1, len(keys), figsize=(side * len(keys) + 1.2, side + 0.9), squeeze=False)
    shown, longest = [], 0  # each panel's measures; the longest name a panel right of the first labels
    for ax, key in zip(axes[0], keys):
        # .loc[[key]]: a frame even where the key has one row (two measures: one pair)
        rows = table.set_index(["dataset", "representation", "scope"]).loc[[key]].reset_index()
        labels = _measure_order(list(dict.fromkeys([*rows["measure_x"], *rows["measure_y"]])), measures)
        shown.append(labels)
        index = {label: i for i, label in enumerate(labels)}
        matrix = np.eye(len(labels))
        hatched = []
        for row in rows.itertuples():
            i, j = index[row.measure_x], index[row.measure_y]
            matrix[i, j] = matrix[j, i] = row.estimate
            if not (row.ci_low > 0 or row.ci_high < 0):
                hatched += [(i, j), (j, i)]
        image = ax.imshow(matrix, cmap=cmap, norm=norm)
        for (i, j), value in np.ndenumerate(matrix):
            if i != j:
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color=_text_colour(cmap, norm, value))
        for i, j in hatched:
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, **CHANCE_HATCH))
        names = [MEASURE_LABELS.get(label, label) for label in labels]
        ax.set_xticks(range(len(labels)), names, rotation=45, ha="right", fontsize=7)
        if len(shown) > 1 and labels == shown[-2]:  # the same measures as the panel on its left: its labels serve
            ax.set_yticks(range(len(labels)), [])
        else:
            ax.set_yticks(range(len(labels)), names, fontsize=7)
            longest = max(longest, max(map(len, names))) if len(shown) > 1 else longest
        dataset, representation, scope = key
        items = int(rows["n_items"].max())
        what = "every compared cell (model pair × layer pair)" if scope == "cells" else "model pairs (mean over " \
            "matching layers)"
        ax.set_title(f"{dataset}, {representation_text(representation)}:\n{what}, {items} items", fontsize=8)
    # room between panels for the y labels of a panel whose measures differ from its left neighbour's (about 0.06
    # inches per character at 7 points), as a share of a panel's width
    fig.subplots_adjust(wspace=max(0.2, (0.06 * longest + 0.2) / (side * 0.8)) if longest else 0.12)
    fig.colorbar(image, ax=list(axes[0]), label="Kendall τ_b between the two measures' values", fraction=0.03,
                 pad=0.02)
    fig.suptitle("Do the measures order the same things alike? (1 = same order, 0 = unrelated, −1 = reversed; "
                 "hatched: the interval contains 0)", fontsize=9)
    _save(fig, out_path)


# ----------------------------------------------------------------- what is universal (stage universality)

THIRDS = ("lower third", "middle third", "upper third")
FACTOR_NAMES = {"training_time": "training time", "data": "training data", "placebo": "seed placebo",
                "dimension": "dimension placebo"}
# lower, middle, upper third on the convergence curves: Okabe and Ito's orange, bluish green and blue
THIRD_COLOURS = {"lower third": "#E69F00", "middle third": "#009E73", "upper third": "#0072B2"}
THIRD_MARKERS = {"lower third": "o", "middle third": "s", "upper third": "^"}


def _level_name(factor: str, level: str) -> str:
    return f"{FACTOR_NAMES.get(factor, factor)}: {level}"


def _headline_order(rows: pd.DataFrame) -> list[str]:
    """The measures of a universality table: grounded ones first, each group by family (FAMILY_ORDER), in the
    table's (the configuration's) order within a family."""
    measures = list(dict.fromkeys(rows["measure"]))
    first = rows.drop_duplicates("measure").set_index("measure")
    family = first["family"] if "family" in first else pd.Series("other", index=first.index)
    headline = first["headline"].astype(bool) if "headline" in first else pd.Series(True, index=first.index)
    return sorted(measures, key=lambda m: (not headline[m], FAMILY_ORDER.index(family[m]) if family[m] in FAMILY_ORDER
                                           else len(FAMILY_ORDER), measures.index(m)))


def _failed_grounding(rows: pd.DataFrame) -> bool:
    """Whether a universality table's measure failed a grounding test (an artefact control is off the headline
    without failing one)."""
    if "grounding_failed" in rows:
        return bool(str(rows["grounding_failed"].iloc[0]))
    return "headline" in rows and not bool(rows["headline"].iloc[0])


def _verdict_legend(fig, top: float, columns: int) -> None:
    """The verdicts' colours, each with the rule it stands for, under the title."""
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=colour, edgecolor="0.4", hatch="////" if verdict == "undefined" else None,
                     label=f"{verdict}: {UNIVERSALITY_VERDICT_RULES[verdict]}")
               for verdict, colour in UNIVERSALITY_VERDICTS.items()]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, top), ncol=columns, fontsize=8, frameon=False,
               handlelength=1.6, columnspacing=1.6)


def _universality_panel(ax, rows: pd.DataFrame, levels: list[tuple[str, str]], depths: list[str],
                        labelled: bool) -> None:
    """One measure's factor-level × depth-third cells, each coloured by its verdict and annotated with u and its
    interval; a measure that failed a grounding test drawn faded."""
    from matplotlib.patches import Rectangle

    faded = _failed_grounding(rows)
    cells = rows.set_index(["factor", "level", "depth"])
    for i, (factor, level) in enumerate(levels):
        for j, depth in enumerate(depths):
            key = (factor, level, depth)
            row = cells.loc[key] if key in cells.index else None
            verdict = str(row["verdict"]) if row is not None else "undefined"
            colour = UNIVERSALITY_VERDICTS.get(verdict, "#FFFFFF")
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=colour, edgecolor="white", lw=1.5,
                                   alpha=0.45 if faded else 1.0))
            if verdict == "undefined" or row is None or not np.isfinite(row["u"]):
                ax.add_patch(Rectangle((j, i), 1, 1, **CHANCE_HATCH))
                said = "–" if row is None else "not measured" if verdict == "not measured" else "undefined"
                ax.text(j + 0.5, i + 0.5, said, ha="center", va="center",
                        fontsize=7, color="0.35", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
                continue
            rows_only = row.get("interval_basis", "") == "rows only"
            ax.text(j + 0.5, i + 0.5, f"{_two(row['u'])}{' rows' if rows_only else ''}\n"
                                      f"[{_two(row['ci_low'])}, {_two(row['ci_high'])}]",
                    ha="center", va="center", fontsize=7.5, linespacing=1.25, color="0.45" if faded else "black")
    factors = [factor for factor, _ in levels]
    for i in range(1, len(levels)):  # a line between factors
        if factors[i] != factors[i - 1]:
            ax.axhline(i, color="0.25", lw=1.2)
    ax.set_xlim(0, len(depths))
    ax.set_ylim(len(levels), 0)
    ax.set_xticks([j + 0.5 for j in range(len(depths))], [d.replace(" third", "\nthird") for d in depths],
                  fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(len(levels))],
                  [_level_name(f, lv) for f, lv in levels] if labelled else [], fontsize=8)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)


def _verdict_panels(panels: list[tuple[str, pd.DataFrame, bool]], levels: list[tuple[str, str]],
                    depths: list[str], title: list[str], out_path: str | Path, columns: int) -> None:
    """Panels of factor-level × depth-third cells coloured by verdict (:func:`_universality_panel`), `columns` to a
    row, each titled (a faded title for a panel marked so), under the wrapped `title` lines and the verdicts'
    legend."""
    columns = min(columns, len(panels))
    panel_rows = int(np.ceil(len(panels) / columns))
    title_lines = max(title_text.count("\n") + 1 for title_text, _, _ in panels)
    # in inches: the level names left of the first column, each panel's cells, above each panel its title and the
    # thirds (two lines), above all the title and the legend
    label_width = 0.075 * max(len(_level_name(f, lv)) for f, lv in levels) + 0.3
    cells_w, cells_h, gap = 0.95 * len(depths), 0.42 * len(levels), 0.3
    decoration = max(0.85, 0.5 + 0.175 * title_lines)
    fig_w = label_width + cells_w * columns + gap * (columns - 1) + 0.15
    # the title and the legend wrap to a narrow figure's width (one or two panels)
    wrapped = "\n".join(textwrap.fill(line, max(60, int(fig_w * 15))) for line in title)
    legend_columns = 3 if fig_w >= 11 else 2 if fig_w >= 7.5 else 1
    legend_top = 0.25 + 0.19 * (wrapped.count("\n") + 1)
    header = legend_top + 0.19 * int(np.ceil(len(UNIVERSALITY_VERDICTS) / legend_columns)) + 0.2
    fig_h = header + (decoration + cells_h) * panel_rows + 0.1
    fig, axes = plt.subplots(panel_rows, columns, figsize=(fig_w, fig_h), squeeze=False)
    fig.subplots_adjust(left=label_width / fig_w, right=1 - 0.15 / fig_w, top=1 - (header + decoration) / fig_h,
                        bottom=0.1 / fig_h, wspace=gap / cells_w, hspace=decoration / cells_h)
    for k, (ax, (name, rows, faded)) in enumerate(zip(axes.flat, panels)):
        _universality_panel(ax, rows, levels, depths, labelled=k % columns == 0)
        ax.set_title(name, fontsize=9, color="0.45" if faded else "black", fontweight="normal" if faded else "bold")
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    fig.suptitle(wrapped, fontsize=10, y=1 - 0.08 / fig_h)
    _verdict_legend(fig, top=1 - legend_top / fig_h, columns=legend_columns)
    _save(fig, out_path)


def _grid(thirds: pd.DataFrame) -> tuple[list[str], list[tuple[str, str]], float]:
    """(the thirds present, the factor levels in the table's order, the margin δ) of a study table's thirds."""
    depths = [d for d in THIRDS if d in set(thirds["depth"])]
    levels = list(dict.fromkeys(zip(thirds["factor"], thirds["level"])))
    return depths, levels, float(thirds["margin"].iloc[0]) if "margin" in thirds else float("nan")


def _where(thirds: pd.DataFrame) -> str:
    """The study's dataset, representation and rows, as a figure's title says them."""
    if not {"dataset", "representation"} <= set(thirds.columns):
        return ""
    n = int(thirds["n"].iloc[0]) if "n" in thirds else None
    where = f"{thirds['dataset'].iloc[0]}, {representation_text(thirds['representation'].iloc[0])}"
    return where + (f", n = {n:,} rows" if n else "")


def universality_matrix(tables: Tables, out_path: str | Path, confidence: float = 0.95, columns: int = 3) -> None:
    """What is universal: per measure (grounded ones first, grouped by family; a measure that failed a grounding
    test faded, its title naming the tests), each factor level's share u of seed-level similarity in the lower,
    middle and upper third of the reference's layers, coloured by its verdict against the margin δ and annotated
    with u and its interval."""
    table = tables["table"]
    thirds = table[table["depth"].isin(THIRDS)]
    if thirds.empty:
        _nothing_to_show(out_path, "the universality table has no depth thirds: nothing to show")
        return
    depths, levels, margin = _grid(thirds)
    where = _where(thirds)
    title = ["What is universal? u = the share of seed-level similarity a factor level keeps (1 = as alike as "
             "another seed of the reference, 0 = as alike as the floor)",
             f"per third of the reference's layers{'; ' + where if where else ''}; cell: u and its {confidence:.0%} "
             "interval over seeds and rows (\"rows\": a level of one model, its rows only); colour: the verdict "
             f"against the margin δ = {margin:g}"]
    panels = []
    for label in _headline_order(thirds):
        rows = thirds[thirds["measure"] == label]
        family = rows["family"].iloc[0] if "family" in rows else ""
        name = f"{family} · {MEASURE_LABELS.get(label, label)}" if family else MEASURE_LABELS.get(label, label)
        failed = str(rows["grounding_failed"].iloc[0]) if "grounding_failed" in rows else ""
        control = str(rows["control"].iloc[0])  # what it changes as an artefact control ("" for none)
        if control:  # an artefact control: its twin's panel is beside it
            name = f"{name}\ncontrol: {control}"
        if _failed_grounding(rows):
            # the tests without their variants (monotonicity:spearman -> monotonicity): a panel's width holds them
            tests = ", ".join(dict.fromkeys(t.strip().split(":")[0] for t in failed.split(",") if t.strip()))
            name = f"{name}\nfailed grounding: {tests or 'a test'}"
        panels.append((name, rows, _failed_grounding(rows)))
    _verdict_panels(panels, levels, depths, title, out_path, columns)


def senses_matrix(tables: Tables, out_path: str | Path, confidence: float = 0.95, columns: int = 3) -> None:
    """In which sense: per sense of similarity that the study measures (reprsim.design.senses' order), each factor level's
    u (pooled over the sense's grounded measures; for the functional sense the share of the stitching penalty) in
    each third of the reference's layers, coloured by its verdict; the first row the seed siblings against identical
    copies (u = 1: identical, 0: the floor). A cell not measured says so; the senses no cell measures are left out
    (the page lists them with the reason)."""
    table = tables["table"]
    thirds = table[table["depth"].isin(THIRDS)]
    measured = thirds[thirds["verdict"] != "not measured"]
    if measured.empty:
        _nothing_to_show(out_path, "no sense of similarity is measured in this study: nothing to show")
        return
    depths, levels, margin = _grid(thirds)
    where = _where(measured[measured["sense"] != "function"])
    title = ["In which sense? u per sense of \"the same representation\" (1 = as alike as another seed of the "
             "reference, 0 = as alike as the floor; first row: the seed siblings against identical copies)",
             f"per third of the reference's layers{'; ' + where if where else ''}; cell: u and its {confidence:.0%} "
             f"interval over seeds and rows; colour: the verdict against the margin δ = {margin:g}"]
    panels = []
    for sense in [s for s in SENSES if s in set(measured["sense"])]:
        rows = thirds[thirds["sense"] == sense]
        used = sorted({m for value in rows["measures"] for m in str(value).split(", ") if m})
        name = textwrap.fill(f"{sense}: {SENSES[sense]}", 44)
        said = ", ".join(MEASURE_LABELS.get(m, m) for m in used)
        if sense == "function" and "n" in rows:  # the stitch jobs' own evaluation rows
            said += f", n = {int(rows.loc[rows['verdict'] != 'not measured', 'n'].iloc[0]):,} rows"
        panels.append((f"{name}\n({said})", rows, False))
    _verdict_panels(panels, levels, depths, title, out_path, columns)


def convergence_curves(tables: Tables, out_path: str | Path, measures: dict[str, str] | None = None,
                       confidence: float = 0.95, columns: int = 4) -> None:
    """Cross-seed similarity over training (Huh et al. 2024): per grounded measure, the mean similarity of the
    reference's seed siblings at each checkpoint and at the end of training, one line per third of the layers with
    its interval band and its last-minus-first claim in the legend; the last panel the validation cross-entropy."""
    curve = tables["table"]
    claims = tables.get("claims", pd.DataFrame())
    curve = curve[curve["depth"].isin(THIRDS)]
    if curve.empty:
        _nothing_to_show(out_path, "no checkpoints: no convergence to show")
        return
    labels = list(dict.fromkeys(curve["measure"]))
    failed = set()
    if len(claims) and "headline" in claims:
        failed = set(claims.loc[~claims["headline"].astype(bool), "measure"])
    shown = [label for label in labels if label not in failed] or labels
    shown = sorted(shown, key=lambda m: (FAMILY_ORDER.index(FAMILIES.get((measures or {}).get(m, m), "other")),
                                         labels.index(m)))
    rises = {}
    if len(claims):
        for row in claims[claims["statistic"] == "last minus first"].itertuples():
            rises[(row.measure, row.depth)] = (f"{row.verdict}, {'+' if row.estimate >= 0 else '−'}"
                                               f"{abs(row.estimate):.2f} [{_two(row.ci_low)}, {_two(row.ci_high)}]")
    panels = len(shown) + 1
    columns = min(columns, panels)
    panel_rows = int(np.ceil(panels / columns))
    fig, axes = plt.subplots(panel_rows, columns, figsize=(3.9 * columns, 3.3 * panel_rows + 0.5), squeeze=False)
    steps = sorted(set(curve["step"]))
    log = min(steps) > 0 and max(steps) / min(steps) >= 8
    ends = curve.drop_duplicates("step").set_index("step")["level"]
    ticks = [f"{step:g}" + ("\n(end)" if ends.get(step) == "end of training" else "") for step in steps]

    def steps_axis(ax) -> None:
        if log:
            ax.set_xscale("log")
        ax.set_xticks(steps, ticks, fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel("optimiser step", fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)

    for ax, label in zip(axes.flat, shown):
        rows = curve[curve["measure"] == label]
        for depth in [d for d in THIRDS if d in set(rows["depth"])]:
            line = rows[rows["depth"] == depth].sort_values("step")
            colour = THIRD_COLOURS[depth]
            claim = rises.get((label, depth))
            ax.plot(line["step"], line["similarity"], marker=THIRD_MARKERS[depth], ms=4, color=colour,
                    label=f"{depth}" + (f": {claim}" if claim else ""))
            ax.fill_between(line["step"], line["ci_low"], line["ci_high"], color=colour, alpha=0.2, lw=0)
        steps_axis(ax)
        kind = REGISTRY[(measures or {}).get(label, label)].kind if (measures or {}).get(label, label) in REGISTRY \
            else "similarity"
        ax.set_ylabel("cross-seed " + ("similarity (distance negated)" if kind == "distance" else "similarity"),
                      fontsize=8)
        family = rows["family"].iloc[0] if "family" in rows else ""
        ax.set_title(f"{family + ' · ' if family else ''}{MEASURE_LABELS.get(label, label)}", fontsize=9)
        ax.legend(fontsize=6.5, loc="best", title=f"first to last step [{confidence:.0%} interval]", title_fontsize=6.5)
    ax = axes.flat[len(shown)]
    loss = curve.drop_duplicates("step").sort_values("step")
    ax.plot(loss["step"], loss["validation_cross_entropy"], marker="D", ms=4, color="0.25")
    steps_axis(ax)
    ax.set_ylabel("validation cross-entropy (nats)", fontsize=8)
    ax.set_title("the seed siblings' fit (lower = better)", fontsize=9)
    for other in axes.flat[panels:]:
        other.set_axis_off()
    seeds = int(curve["n_seed_pairs"].max()) if "n_seed_pairs" in curve else None
    n = int(curve["n"].iloc[0]) if "n" in curve else None
    left_out = sorted(set(labels) - set(shown))
    fig.suptitle("Cross-seed similarity over training: line = mean over the seed siblings' pairs"
                 f"{f' ({seeds})' if seeds else ''} at each checkpoint, band = {confidence:.0%} interval (row "
                 f"half-samples{f', n = {n:,} rows' if n else ''})"
                 + (f"\nnot shown, having failed a grounding test: {', '.join(left_out)}" if left_out else ""),
                 fontsize=9)
    fig.tight_layout()  # makes room for the suptitle too
    _save(fig, out_path)


FIGURES = {
    "heatmap": pair_heatmaps,
    "model_summary": model_summary_figure,
    "model_distance": model_distance_figure,
    "localization": localization_curves,
    "aligners": aligner_figure,
    "truncation": truncation_curve,
    "layer_views": layer_views_figure,
    "skip": skip_heatmap,
    "attention_heads": attention_heads,
    "attention_layers": attention_layers,
    "stitch_penalties": stitch_penalties,
    "stitching_summary": stitching_summary,
    "measure_agreement": measure_agreement_figure,
    "universality": universality_matrix,
    "senses": senses_matrix,
    "convergence": convergence_curves,
}


def draw(name: str, tables: Tables, out_path: str | Path, **options) -> None:
    """Draw figure `name` of the registry from `tables` into `out_path`."""
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; the registry has {', '.join(FIGURES)}")
    FIGURES[name](tables, out_path, **options)
