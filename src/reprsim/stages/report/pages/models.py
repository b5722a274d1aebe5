"""The fine-tuned models' page (models.html): truncation, skipping blocks and CKA between layers per model."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from reprsim.io.tables import read_table, read_tables
from reprsim.stages.report.common import Figure, _anchor, _task_metric_rows, paragraphs
from reprsim.stages.report.inputs import ReportInputs


def _by_model(paths: Iterable[str]) -> dict[str, str]:
    """Per-model outputs (.../{model}/<file>) by model name."""
    return {Path(p).parent.name: p for p in paths}


def _majority(inputs: ReportInputs) -> dict[str, float]:
    """The majority-class score (the chance baseline) per fine-tuned model, from its truncation table."""
    if not inputs.truncation_tables:
        return {}
    scores = _task_metric_rows(read_tables(inputs.truncation_tables), "model", inputs.task_metrics)
    majority = scores[scores["mode"] == "MAJORITY"]
    return dict(zip(majority["model"], majority["value"]))


def _n_of(paths: Iterable[str]) -> dict[str, str]:
    """'n = 500 validation rows' per model, from its per-model tables (split, n columns)."""
    found = {}
    for model, path in _by_model(paths).items():
        table = read_table(path)
        if {"n", "split"} <= set(table.columns) and not table.empty:
            found[model] = f"n = {int(table['n'].iloc[0]):,} {table['split'].iloc[0]} rows"
    return found


def finetuned(inputs: ReportInputs) -> dict | None:
    """Per fine-tuned model its truncation curve, skip map and layer views; block structure; truncation scores."""
    if not (inputs.truncation_figures or inputs.layer_view_figures or inputs.layer_blocks
            or inputs.truncation_tables or inputs.skip_figures):
        return None
    truncation, views = _by_model(inputs.truncation_figures), _by_model(inputs.layer_view_figures)
    skipped = _by_model(inputs.skip_figures)
    majority = _majority(inputs)
    n_truncation, n_skip, n_views = (_n_of(inputs.truncation_tables), _n_of(inputs.skip_tables),
                                     _n_of(inputs.layer_views))
    models = []  # the page's title names the section; each model gets its own heading
    for model in sorted(set(truncation) | set(views) | set(skipped)):
        chance = (f"chance: the majority class, {majority[model]:.3f}" if model in majority
                  else "chance: the majority class (no truncation table)")
        figures = []
        if model in truncation:
            n = n_truncation.get(model, "n in the axis label")
            figures.append(Figure(truncation[model], f"{model}: truncation; {n}; {chance} (dotted line)."))
        if model in skipped:
            figures.append(Figure(skipped[model], f"{model}: skipping blocks; {n_skip.get(model, 'n in the title')}; "
                                                  f"{chance}."))
        if model in views:
            figures.append(Figure(views[model], f"{model}: linear CKA between layers; "
                                                f"{n_views.get(model, 'n in the title')}; chance level: the "
                                                "permutation null of every cell (its range in each panel's title; "
                                                "× where the 95% interval does not exclude it).", wide=True))
        models.append({"name": model, "anchor": _anchor("model", model), "figures": figures})
    truncation_scores = None
    if inputs.truncation_tables:
        scores = _task_metric_rows(read_tables(inputs.truncation_tables), "model", inputs.task_metrics)
        wide = scores.pivot_table(index=["model", "metric", "mode"], columns="layer", values="value")
        wide.columns = ["majority" if layer < 0 else f"layer {layer}" for layer in wide.columns]
        truncation_scores = wide.reset_index()
    return {"models": models,
            "caption": [*(paragraphs("truncation") if truncation else []), *(paragraphs("skip") if skipped else []),
                        *(paragraphs("layer_views") if views else [])],
            "blocks": ({"caption": paragraphs("layer_blocks"), "table": read_tables(inputs.layer_blocks)}
                       if inputs.layer_blocks else None),
            "truncation_scores": truncation_scores}
