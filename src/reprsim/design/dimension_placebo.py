"""The dimension placebo of a universality study (`universality.dimension_placebo`): which widths the reference seeds
are reduced to, by which methods, and the names of the reduced copies. Torch-free: the configuration check, the
rules and the study read it; reprsim.metrics.reduction reduces the rows."""

from __future__ import annotations

from typing import Mapping, NamedTuple

Specs = Mapping[str, Mapping]
WIDTH_KEYS = ("n_embd", "hidden_size", "d_model")  # a model's width where its `config` gives it


def model_width(specs: Specs, name: str) -> int | None:
    """A model's width where its `config` gives it (:data:`WIDTH_KEYS`), or a hub model's declared `recipe.width`;
    None otherwise."""
    spec = specs.get(name) or {}
    given = spec.get("config") or {}
    found = next((given[key] for key in WIDTH_KEYS if isinstance(given.get(key), int)), None)
    declared = (spec.get("recipe") or {}).get("width")
    return found if found is not None or not isinstance(declared, int) else declared


class DimensionPlacebo(NamedTuple):
    """One dimension placebo of a universality study: every reference seed's layers reduced to a width level's width
    (by `method`, reprsim.metrics.reduction.reduce_stack) and scored as a level of factor "dimension"."""

    level: str  # its level's label in the study's tables
    method: str  # pca or random
    dims: int
    width_level: str  # the width level whose width it takes; "" for a width the configuration gives
    names: dict[str, str]  # reference seed -> the name of its reduced copy

    @property
    def job(self) -> str:
        """The placebo's job (rule dimension_placebo) and tables: one per method and width."""
        return f"{self.method}{self.dims}"


PLACEBO_METHODS = {"pca": "PCA", "random": "a random projection"}


def dimension_placebos(specs: Specs, study: Mapping) -> list[DimensionPlacebo]:
    """The dimension placebos `study` asks for (`dimension_placebo: {methods, widths, seed}`, absent or null: none):
    one per method and width, in the order of the methods, then of the widths: those given, else each width level's
    narrower than the reference (widths as :func:`model_width` reads them)."""
    asked = study.get("dimension_placebo")
    if not asked:
        return []
    reference = list(study["reference"])
    full = model_width(specs, reference[0])
    if asked.get("widths"):
        widths = [(dims, None) for dims in asked["widths"]]
    else:
        levels = ((study.get("factors") or {}).get("width") or {}).items()
        widths = [(model_width(specs, models[0]), level) for level, models in levels if models]
    placebos = []
    for method in asked.get("methods") or ["random"]:
        for dims, level in widths:
            if full is None or dims is None or dims >= full:
                continue
            label = f"{PLACEBO_METHODS[method]} to {dims} dims" + (f" (as {level})" if level else "")
            placebos.append(DimensionPlacebo(label, method, dims, level or "",
                                             {seed: f"{seed}~{method}{dims}" for seed in reference}))
    return placebos
