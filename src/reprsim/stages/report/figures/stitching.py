"""The stitching figures: one model pair's penalties both ways, and identity stitching beside CKA."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reprsim.plotting.drawing import MEASURE_LABELS
from reprsim.plotting.drawing import cell_text as _cell_text
from reprsim.plotting.drawing import hatch as _hatch
from reprsim.plotting.drawing import two as _two
from reprsim.stages.report.figures.base import Tables, _save
from reprsim.stages.report.labels import representation_text
from reprsim.tables.layers import matching_layer
from reprsim.tables.stitching import first_seed, main_metric, penalty_text, phis, summary_phi


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
