"""The aligners' figure: every aligner's test error per layer, and the INN's layer × layer error."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from reprsim.stages.report.figures.base import Tables, _save
from reprsim.tables.layers import matching_layer


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
