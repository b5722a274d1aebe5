"""The figure of the page on which measure to believe: the measures' rank agreement."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from reprsim.plotting.drawing import CHANCE_HATCH, MEASURE_LABELS
from reprsim.plotting.drawing import text_colour as _text_colour
from reprsim.stages.report.figures.base import Tables, _measure_order, _nothing_to_show, _save
from reprsim.stages.report.labels import representation_text


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
