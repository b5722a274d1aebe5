"""The grounding section: the dataset its tests compare on, and the datasets, models and measures it names."""

from __future__ import annotations

from collections.abc import Iterator


def grounding_dataset(config: dict) -> str | None:
    """The dataset the grounding tests compare on: grounding.dataset, else the first extracted dataset in name order
    (the rules' EXTRACT_ON)."""
    extracted = sorted((config.get("extraction") or {}).get("datasets") or config.get("datasets") or {})
    return (config.get("grounding") or {}).get("dataset") or (extracted[0] if extracted else None)


def _grounding_errors(config: dict, datasets: dict, models: dict) -> Iterator[str]:
    """grounding's names refer to this config's datasets, models and measures; its inputs are extracted."""
    grounding = config.get("grounding") or {}
    if not grounding.get("enabled", True):
        return
    extraction = config.get("extraction", {})
    extracted = extraction.get("datasets") or list(datasets)
    name = grounding.get("dataset")
    if name is not None and name not in extracted:
        yield (f"key 'grounding.dataset' is {name!r}, which is not among the extracted datasets "
               f"({', '.join(sorted(extracted))}); add it to datasets and extraction.datasets")
    # the shortcut models alone are extracted there (by the grounding rules), so it need not be extracted for all
    name = grounding.get("shortcut_dataset")
    if name is not None and name not in datasets:
        yield (f"key 'grounding.shortcut_dataset' is {name!r}, which is not a dataset of this config; "
               f"defined datasets: {', '.join(sorted(datasets))}")
    for key, names in (("monotonicity_models", grounding.get("monotonicity_models")),
                       ("deletion.models", (grounding.get("deletion") or {}).get("models")),
                       ("prediction.models", (grounding.get("prediction") or {}).get("models"))):
        for name in names or []:
            if name not in models:
                yield (f"key 'grounding.{key}' names {name!r}, which is not a model in this config; "
                       f"defined models: {', '.join(sorted(models))}")
    for label in grounding.get("measures") or []:
        if label not in config.get("measures", {}):
            yield (f"key 'grounding.measures' names {label!r}, which is not a label of `measures`; defined: "
                   f"{', '.join(config.get('measures', {}))}")
