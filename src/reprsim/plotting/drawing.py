"""How reprsim draws a similarity: the one drawing code of the report's figures and of reprsim.plotting.plots.

The layer × layer heatmap of one model pair and measure (:func:`heatmap_panel`) and the model × model summary of
one measure (:func:`summary_panel`) are drawn here, with what they share: one fixed colour scale per measure
(:func:`colours`), the hatching of cells whose interval does not exclude chance (:func:`not_beyond_chance`,
:func:`hatch`), the chance level in the title (:func:`chance_text`), values in their cells (:func:`cell_text`) and
the note on a panel whose every value is undefined (:func:`undefined_note`). The report stage's figures
(reprsim.stages.report.figures) and the public plots (reprsim.plotting.plots) both call these functions, so a figure drawn
from Python reads as the report's does.

A library module: it draws on the axes it is given and imports no stage; matplotlib's backend is the caller's
(the report's figures choose Agg).
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reprsim.measure_registry import ATTENTION_DISPLAY_NAMES, DISPLAY_NAMES
from reprsim.measure_registry import FAMILIES as REGISTRY_FAMILIES
from reprsim.measure_registry import MEASURES as REGISTRY

# the attention measures by their registry labels (attn_pearson: "attnsim, Pearson", ...; the registry's names are
# the labels the shipped configurations give them)
MEASURE_LABELS = {**DISPLAY_NAMES, "procrustes": "Procrustes distance", **ATTENTION_DISPLAY_NAMES}
# Distances of attention maps (reprsim.metrics.attention): JS lies in [0, ln 2]; Frobenius has no fixed top. The measures'
# fixed ranges come from their registry entries; a distance without a fixed top runs from 0 to the panel's largest.
DISTANCE_RANGES = {"js": (0.0, float(np.log(2))),
                   **{name: spec.range for name, spec in REGISTRY.items()
                      if spec.kind == "distance" and np.isfinite(spec.range[1])}}
SIMILARITY_RANGE = (0.0, 1.0)
# Measure (reprsim.metrics name) -> family, in the order the summary figure shows them (the registry's).
FAMILIES = {name: spec.family for name, spec in REGISTRY.items()}
FAMILY_ORDER = [*REGISTRY_FAMILIES, "other"]
# Cells whose interval does not exclude chance: grey hatching, thin enough to read the value through.
CHANCE_HATCH = {"hatch": "////", "edgecolor": (0.62, 0.62, 0.62), "fill": False, "lw": 0}
CHANCE_NOTE = "hatched: interval does not exclude chance"


def colour_range(kind: str, measure: str, values: pd.Series | None = None) -> tuple[float, float]:
    """One fixed scale per measure, so every pair's panel for it reads the same; a distance without
    a fixed top (Frobenius between attention maps) runs from 0 to the panel's largest value."""
    if kind == "distance":
        if measure in DISTANCE_RANGES:
            return DISTANCE_RANGES[measure]
        if values is None or not np.isfinite(values).any():
            return DISTANCE_RANGES["procrustes"]
        top = float(np.nanmax(values))
        return 0.0, top if top > 0 else 1.0
    # signed similarities (RSA, aligned cosine, correlation match) on their whole range; the unbiased CKA
    # estimators dip below 0 by noise only, so the CKA family keeps [0, 1], and so does an unbounded one (CKNNA:
    # 1 on identical inputs, beyond [0, 1] only on odd neighbourhoods; the cell's text gives its value)
    spec = REGISTRY.get(measure)
    if spec is not None and spec.range[0] < 0 and spec.family != "CKA" and np.isfinite(spec.range).all():
        return spec.range
    return SIMILARITY_RANGE


def not_beyond_chance(rows: pd.DataFrame) -> pd.Series:
    """Rows whose interval does not exclude chance (beyond_chance False); tables without intervals
    fall back to a permutation p above 0.05. Rows with no value or no null are not marked."""
    defined = rows["value"].notna() if "value" in rows else pd.Series(True, index=rows.index)
    if "beyond_chance" in rows:
        return defined & rows["beyond_chance"].notna() & ~rows["beyond_chance"].fillna(True).astype(bool)
    if "null_p" in rows:
        return defined & (rows["null_p"] > 0.05)
    return pd.Series(False, index=rows.index)


def two(value: float) -> str:
    """Two decimals, without the '-0.00' that a tiny negative value would print."""
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def chance_text(null_means: pd.Series) -> str:
    """The chance level (permutation null mean) of a set of cells: one number, or its range when it varies."""
    null_means = null_means.dropna() if null_means is not None else pd.Series(dtype=float)
    if null_means.empty:
        return "chance: no null"
    low, high = null_means.min(), null_means.max()
    return f"chance {two(null_means.median())}" if high - low < 0.01 else f"chance {two(low)}–{two(high)}"


def hatch(ax, cells) -> None:
    """Hatch the cells (row i, column j) of an image drawn with imshow (cell centres on integers)."""
    from matplotlib.patches import Rectangle

    for i, j in cells:
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, **CHANCE_HATCH))


def undefined_note(ax, rows: pd.DataFrame, values: pd.Series) -> None:
    """When every value of a panel is undefined, say why on it (the table's first warning)."""
    if values.notna().any() or "warning" not in rows:
        return
    warning = next((w for w in rows["warning"] if isinstance(w, str) and w), "")
    if warning:
        ax.text(0.5, 0.5, "undefined:\n" + textwrap.fill(warning, 38), transform=ax.transAxes, ha="center",
                va="center", fontsize=7, bbox={"facecolor": "white", "edgecolor": "0.6", "pad": 3})


def colours(kind: str, measure: str, values: pd.Series | None = None):
    """Colour map and norm of a measure: one fixed scale per measure, brighter = more alike for both kinds."""
    from matplotlib.colors import Normalize

    low, high = colour_range(kind, measure, values)
    return plt.get_cmap("magma_r" if kind == "distance" else "magma"), Normalize(low, high)


def text_colour(cmap, norm, value: float) -> str:
    """Black on light cells, white on dark ones, whatever the colour map's direction."""
    red, green, blue, _ = cmap(norm(value))
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def cell_text(ax, x: float, y: float, text: str, cmap, norm, value: float, marked: bool, fontsize: float) -> None:
    """A value in its cell; on a hatched cell it sits on a patch of the cell's colour, so the hatching
    does not cross the digits."""
    box = {"boxstyle": "square,pad=0.08", "facecolor": cmap(norm(value)), "edgecolor": "none"} if marked else None
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, color=text_colour(cmap, norm, value), bbox=box)


def heatmap_title(label: str, direction: str, model_a: str, model_b: str, kind: str) -> str:
    """A layer × layer panel's title before its chance level: the measure's display name, the direction of an
    asymmetric one (model_a→model_b for a->b) and what its values are."""
    arrow = {"a->b": f" ({model_a}→{model_b})", "b->a": f" ({model_b}→{model_a})"}.get(direction, "")
    kind_text = "distance, lower = more alike" if kind == "distance" else "similarity"
    return f"{MEASURE_LABELS.get(label, label)}{arrow}\n{kind_text}"


def heatmap_panel(ax, rows: pd.DataFrame, title: str, model_a: str, model_b: str, measure: str) -> None:
    """One model pair's layer × layer panel of one measure and direction (`rows`: a pair table's rows, one per
    layer pair; `measure` the registry name, for the colour scale): each value in its cell ("n/a" when undefined),
    cells whose interval does not exclude chance hatched, `title` followed by the chance level, a colour bar."""
    matrix = rows.pivot(index="layer_a", columns="layer_b", values="value").sort_index().sort_index(axis=1)
    marked_rows = rows[not_beyond_chance(rows)]
    rows_at, columns_at = {v: i for i, v in enumerate(matrix.index)}, {v: j for j, v in enumerate(matrix.columns)}
    marked = {(rows_at[a], columns_at[b]) for a, b in zip(marked_rows["layer_a"], marked_rows["layer_b"])}
    cmap, norm = colours(rows["kind"].iloc[0], measure, rows["value"])
    image = ax.imshow(matrix.to_numpy(), origin="lower", cmap=cmap, norm=norm, aspect="auto")
    hatch(ax, sorted(marked))
    if matrix.size <= 400:
        for (i, j), value in np.ndenumerate(matrix.to_numpy()):
            if np.isnan(value):  # undefined (a layer whose rows are all one vector): say so, not "nan"
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=5.5, color="grey")
                continue
            cell_text(ax, j, i, two(value), cmap, norm, value, (i, j) in marked, 5.5)
    undefined_note(ax, rows, rows["value"])
    ax.set_xticks(range(matrix.shape[1]), matrix.columns, fontsize=7)
    ax.set_yticks(range(matrix.shape[0]), matrix.index, fontsize=7)
    ax.set_xlabel(f"layer of {model_b}", fontsize=8)
    ax.set_ylabel(f"layer of {model_a}", fontsize=8)
    ax.set_title(f"{title}, {chance_text(rows['null_mean'] if 'null_mean' in rows else None)}", fontsize=8)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=6)


def summary_cells(rows: pd.DataFrame, models: list[str]) -> dict[str, pd.DataFrame]:
    """Model × model frames of the summary columns (value: `mean_over_matching_layers`; ci_low, ci_high,
    null_mean; marked: not beyond chance); an asymmetric measure's cell (row x, column y) is the direction in
    which x's layer is X (pair tables: a->b means model_a's layer is X)."""
    frames = {column: pd.DataFrame(np.nan, index=models, columns=models, dtype=float)
              for column in ("value", "ci_low", "ci_high", "null_mean")}
    frames["marked"] = pd.DataFrame(False, index=models, columns=models)
    marked = not_beyond_chance(rows.rename(columns={"mean_over_matching_layers": "value"}))
    for row, mark in zip(rows.itertuples(index=False), marked):
        a, b = row.model_a, row.model_b
        for x, y in {"symmetric": [(a, b), (b, a)], "a->b": [(a, b)], "b->a": [(b, a)]}[row.direction]:
            frames["value"].loc[x, y] = row.mean_over_matching_layers
            for column in ("ci_low", "ci_high", "null_mean"):
                frames[column].loc[x, y] = getattr(row, column, np.nan)
            frames["marked"].loc[x, y] = bool(mark)
    return frames


def summary_panel(ax, fig, rows: pd.DataFrame, models: list[str], title: str, measure: str | None = None) -> None:
    """One measure's model × model panel of a pair summary (`rows`: one row per pair of distinct models and
    direction, with mean_over_matching_layers and, when known, ci_low, ci_high, null_mean, beyond_chance): each
    cell's mean with its interval below it, cells whose interval does not exclude chance hatched, the diagonal
    blank, `title` followed by the kind and the chance level, a colour bar. `measure` names the colour scale (a
    registry name); None takes the rows' measure column."""
    from matplotlib.patches import Rectangle

    kind = rows["kind"].iloc[0] if "kind" in rows else "similarity"
    cmap, norm = colours(kind, rows["measure"].iloc[0] if measure is None else measure)
    cells = summary_cells(rows, models)
    marked = cells["marked"].to_numpy()
    image = ax.imshow(cells["value"].to_numpy(), cmap=cmap, norm=norm)
    hatch(ax, [(i, j) for (i, j), mark in np.ndenumerate(marked) if mark and i != j])
    for (i, j), value in np.ndenumerate(cells["value"].to_numpy()):
        if i == j:  # a model with itself: not a comparison between models
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="0.93", edgecolor="none"))
            continue
        if np.isnan(value):
            ax.text(j, i, "n/a", ha="center", va="center", fontsize=7, color="grey")
            continue
        cell_text(ax, j, i - 0.13, two(value), cmap, norm, value, marked[i, j], 9)
        ci_low, ci_high = cells["ci_low"].iat[i, j], cells["ci_high"].iat[i, j]
        if np.isfinite(ci_low) and np.isfinite(ci_high):
            cell_text(ax, j, i + 0.22, f"{two(ci_low)}–{two(ci_high)}", cmap, norm, value, marked[i, j], 6.5)
    undefined_note(ax, rows, rows["mean_over_matching_layers"])
    ax.set_xticks(range(len(models)), models, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), models, fontsize=8)
    asymmetric = (rows["direction"] != "symmetric").any()
    kind_text = "distance, lower = more alike" if kind == "distance" else "similarity"
    ax.set_title(f"{title}{' (row → column)' if asymmetric else ''}\n"
                 f"{kind_text}, {chance_text(rows['null_mean'] if 'null_mean' in rows else None)}", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03).ax.tick_params(labelsize=7)
