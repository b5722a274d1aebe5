"""Unlabelled text (a dataset whose columns name no label): what trains or scores on its labels is refused."""

from __future__ import annotations

from collections.abc import Iterator

from reprsim.config_checks.grounding import grounding_dataset
from reprsim.design.dataset_labels import dataset_is_labelled


def _unlabelled_errors(config: dict, datasets: dict, models: dict) -> Iterator[str]:
    """Unlabelled text (a dataset whose columns name no label) is extracted and compared; what trains or scores on
    its labels is refused, each with the key that asks for it."""
    unlabelled = sorted(name for name, spec in datasets.items() if not dataset_is_labelled(spec))
    why = "which is unlabelled text (its columns name no label)"
    for name in unlabelled:
        spec = datasets[name]
        if spec.get("label_names"):
            yield (f"key 'datasets.{name}.label_names' lists classes, but datasets.{name}.columns names no label "
                   "column; add columns.label, or drop label_names for unlabelled text")
        if spec.get("shortcut"):
            yield (f"key 'datasets.{name}.shortcut' puts each row's label in front of its text; dataset {name!r} "
                   "has no labels (columns.label); add a label column or drop shortcut")
    for model, spec in models.items():
        if spec.get("source") == "finetune" and spec.get("dataset") in unlabelled:
            yield (f"key 'models.{model}.dataset' is {spec['dataset']!r}, {why}: fine-tuning trains a classifier on "
                   "labels; name a labelled dataset (compare the base model on the unlabelled text instead)")
    grounded = grounding_dataset(config)
    if (config.get("grounding") or {}).get("enabled", True) and grounded in unlabelled:
        yield (f"grounding (enabled by default) tests the measures on dataset {grounded!r}, {why}: its probes "
               "and predictions need labels; set grounding: {enabled: false}, or grounding.dataset to a labelled "
               "dataset")
    stitching = config.get("stitching")
    objective = (stitching or {}).get("objective", "auto")
    classifies = objective == "classification" or (objective == "auto" and any(
        spec.get("source") == "finetune" for spec in models.values()))  # auto: fine-tuned models classify
    if stitching and stitching.get("dataset") in unlabelled and classifies:
        yield (f"key 'stitching.dataset' is {stitching['dataset']!r}, {why}: the classification objective "
               "scores the top model's task on labels; set stitching.objective: language_modeling, or stitch on a "
               "labelled dataset")
