"""The universality study as configured (the configuration's `universality` section): the :class:`Study`, its
measures' families, senses and artefact controls; the dimension placebos as a factor; the seed placebo's level; the
rows of a pair table the study reads."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Sequence

import pandas as pd

from reprsim.design.conditioning import describe as describe_conditioning, parse as parse_conditioning
from reprsim.design.senses import ANSWER_TOPICS, sense_of
from reprsim.measure_registry import MEASURES
from reprsim.stages.universality.shares import SEED_DRAWS

PLACEBO = ("placebo", "another reference seed")  # (factor, level) of the reference seeds scored as a level
assert PLACEBO[0] in ANSWER_TOPICS  # the seed placebo's sentence (the study's resolution) is an answer
# parameters a measure can be swept in (a k sweep of a neighbourhood measure; the dimensions a CCA-family measure
# keeps): a second configuration of the measure that changes one of them is read as a control of the first
SWEPT = ("k", "pca_dims", "threshold")


@dataclass(frozen=True)
class Study:
    """The configuration's `universality` section, with what the stage needs of the rest."""

    reference: list[str]
    floor: list[str]
    factors: Mapping[str, Mapping[str, list[str]]]
    margin: float
    confidence: float
    specs: Mapping[str, Mapping]
    measures: Mapping[str, str]  # label -> registry name, in the configuration's order
    seed_draws: int = SEED_DRAWS
    seed: int = 0
    params: Mapping[str, Mapping] | None = None  # label -> the measure's params (its sense may depend on them)
    # label -> its conditioning (reprsim.design.conditioning) for the measures on conditioned features: artefact
    # controls, each read against its twin (the same measure and params on the stored features), not pooled
    conditionings: Mapping[str, Mapping] | None = None

    def family(self, label: str) -> str:
        return MEASURES[self.measures[label]].family

    def conditioning(self, label: str) -> str:
        return describe_conditioning(parse_conditioning((self.conditionings or {}).get(label)))

    def _params(self, label: str) -> Mapping:
        return (self.params or {}).get(label) or {}

    def _swept(self, label: str) -> tuple[str, str] | None:
        """(the measure `label` sweeps, the parameter it changes): the first measure before it in the configuration
        with the same measure on the stored features whose params differ from its own in one of :data:`SWEPT`
        alone, itself no sweep of another; None for a measure that sweeps none."""
        return self._sweeps.get(label)

    @cached_property
    def _sweeps(self) -> dict[str, tuple[str, str]]:
        """label -> (the measure it sweeps, the parameter it changes), found once in the configuration's order."""
        sweeps: dict[str, tuple[str, str]] = {}
        stored = [label for label in self.measures if self.conditioning(label) == "none"]
        for k, label in enumerate(stored):
            mine = self._params(label)
            for other in stored[:k]:
                theirs = self._params(other)
                differ = {key for key in {*mine, *theirs} if mine.get(key) != theirs.get(key)}
                if (self.measures[other] == self.measures[label] and len(differ) == 1 and differ <= set(SWEPT)
                        and other not in sweeps):
                    sweeps[label] = (other, differ.pop())
                    break
        return sweeps

    def is_control(self, label: str) -> bool:
        """A measure on conditioned features, or one that sweeps an earlier measure's k, pca_dims or threshold."""
        return self.conditioning(label) != "none" or self._swept(label) is not None

    def control(self, label: str) -> str:
        """What a control changes from its twin ("" for a measure that is no control): its features' conditioning,
        or the swept parameter with both values."""
        if self.conditioning(label) != "none":
            return f"features conditioned by {self.conditioning(label)}"
        swept = self._swept(label)
        if swept is None:
            return ""
        twin, key = swept
        return f"{key} {self._params(twin).get(key, 'default')} → {self._params(label).get(key, 'default')}"

    def sense(self, label: str) -> str | None:
        """The sense the label's measure answers in; None for a control (its twin answers for it)."""
        return None if self.is_control(label) else sense_of(self.measures[label], self._params(label))

    def twin(self, label: str) -> str | None:
        """The measure a control is read against: for one on conditioned features the first measure on the stored
        features with its measure and params; for a sweep the measure it sweeps; None without one, and for a measure
        that is no control."""
        swept = self._swept(label)
        if swept is not None:
            return swept[0]
        if not self.is_control(label):
            return None
        params = self._params(label)
        return next((other for other in self.measures if not self.is_control(other)
                     and self.measures[other] == self.measures[label] and self._params(other) == params), None)


def with_dimension_placebos(factors: Mapping[str, Mapping[str, list[str]]], specs: Mapping[str, Mapping],
                            metas: Mapping[str, Mapping], placebos: Sequence[tuple[str, Mapping[str, str]]]):
    """(factors, specs, metas) with each dimension placebo (level label, {reference seed: its reduced copy's name};
    reprsim.design.dimension_placebo.DimensionPlacebo) a level of factor "dimension": each copy stands in for a model with its
    seed's spec (so that it never meets its own seed, reprsim.design.relations.cross_seed) and its seed's fit."""
    if not placebos:
        return factors, specs, metas
    copies = {name: seed for _, names in placebos for seed, name in names.items()}
    return ({**factors, "dimension": {level: list(names.values()) for level, names in placebos}},
            {**specs, **{name: specs[seed] for name, seed in copies.items()}},
            {**metas, **{name: metas[seed] for name, seed in copies.items() if seed in metas}})


def select(frame: pd.DataFrame, dataset: str, representation: str, measures: Sequence[str],
           models: Sequence[str]) -> pd.DataFrame:
    """The rows of a pair table (or its replicates) the study reads."""
    keep = (frame["dataset"] == dataset) & (frame["representation"] == representation) \
        & frame["measure"].isin(measures) & frame["model_a"].isin(models) & frame["model_b"].isin(models)
    return frame[keep]
