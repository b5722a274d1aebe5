"""Figures: one registry, one signature.

Every figure is `FIGURES[name](tables, out_path, **options)`: `tables` maps the names of the
rule's inputs to the tidy tables they hold, and the figure only draws them (what a figure
shows is computed by the stage that wrote the table). Every figure states what it shows in
its title and axis labels, so it reads without a legend hunt. Similarity heatmaps share one
colour scale (0 to 1). The layer × layer heatmaps and the model × model summary draw their panels with
reprsim.plotting.drawing, the drawing code reprsim.plotting.plots shares (a figure drawn from Python reads as the report's).
Each page of the report has its figures in one module here (index, pairs, models, alignment, attention,
stitching, measures, universality), and base holds what they share; this module holds the registry.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # here, before any module of the package imports pyplot
from reprsim.stages.report.figures.alignment import aligner_figure  # noqa: E402
from reprsim.stages.report.figures.attention import attention_heads, attention_layers  # noqa: E402
from reprsim.stages.report.figures.base import Tables  # noqa: E402
from reprsim.stages.report.figures.index import model_distance_figure, model_summary_figure  # noqa: E402
from reprsim.stages.report.figures.measures import measure_agreement_figure  # noqa: E402
from reprsim.stages.report.figures.models import layer_views_figure, skip_heatmap, truncation_curve  # noqa: E402
from reprsim.stages.report.figures.pairs import localization_curves, pair_heatmaps  # noqa: E402
from reprsim.stages.report.figures.stitching import stitch_penalties, stitching_summary  # noqa: E402
from reprsim.stages.report.figures.universality import (convergence_curves, senses_matrix,  # noqa: E402
                                                        universality_matrix)

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
