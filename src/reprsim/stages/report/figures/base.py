"""What the report's figures share: saving a PNG, the figure that says why there is nothing to draw, room for a
title, and the measures' order by family."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from reprsim.io.outputs import atomic_file
from reprsim.plotting.drawing import FAMILIES, FAMILY_ORDER

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
