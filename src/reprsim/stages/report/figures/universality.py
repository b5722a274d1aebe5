"""The universality study's figures: the factor × depth matrix of verdicts per measure, the factor × sense matrix,
and cross-seed similarity over training."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reprsim.design.senses import SENSES
from reprsim.measure_registry import MEASURES as REGISTRY
from reprsim.plotting.drawing import CHANCE_HATCH, FAMILIES, FAMILY_ORDER, MEASURE_LABELS
from reprsim.plotting.drawing import two as _two
from reprsim.stages.report.figures.base import Tables, _nothing_to_show, _save
from reprsim.stages.report.labels import UNIVERSALITY_VERDICTS, representation_text
from reprsim.tables.universality import FACTOR_LABELS, THIRDS, VERDICT_RULES

# lower, middle, upper third on the convergence curves: Okabe and Ito's orange, bluish green and blue
THIRD_COLOURS = {"lower third": "#E69F00", "middle third": "#009E73", "upper third": "#0072B2"}
THIRD_MARKERS = {"lower third": "o", "middle third": "s", "upper third": "^"}


def _level_name(factor: str, level: str) -> str:
    return f"{FACTOR_LABELS.get(factor, factor)}: {level}"


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
                     label=f"{verdict}: {VERDICT_RULES[verdict]}")
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
