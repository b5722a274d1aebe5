"""The universality study's seed draws: which models each resample draws, one group of models at a time (the
reference, the floor, the level), and a level's terms under them."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from reprsim.stages.universality.shares import Term
from reprsim.stages.universality.study import Study


def _seed_draws(study: Study):
    """A function of a level's models giving its seed draws, one group of models at a time, each drawn with
    replacement from that group alone: [(group, counts for the variant couples' first model, for their reference
    model, for both models of the seed and floor couples, the group's size)], counts being model -> (B,) times
    drawn (a model not named counts once). The reference and the floor are resampled when they have ≥ 2 models, and
    so is the level. The placebo's level is the reference seeds drawn again, for its couples' first model only, and
    its reference draw weighs its couples' reference model only. One generator: the same reference and floor draws
    for every level and measure."""
    rng = np.random.default_rng(study.seed)

    def resample(models: Sequence[str]) -> dict[str, np.ndarray]:
        picks = rng.integers(len(models), size=(study.seed_draws, len(models)))
        return {model: (picks == i).sum(axis=1).astype(float) for i, model in enumerate(models)}

    groups = {name: (resample(models), len(models)) for name, models in (("reference", study.reference),
                                                                         ("floor", study.floor)) if len(models) >= 2}

    def draw(models: Sequence[str], placebo: bool = False):
        found = []
        for name, (counts, size) in groups.items():
            first = {} if placebo and name == "reference" else counts
            found.append((name, first, counts, counts, size))
        if placebo:
            found.append(("level", resample(models), {}, {}, len(models)))
        elif len(models) >= 2:
            counts = resample(models)
            found.append(("level", counts, counts, counts, len(models)))
        return found

    return draw


def _under_draws(study: Study, variant: Term, seeds: Term, floor: Term, counts) -> list:
    """Each resampled group's draws at all rows (:func:`_seed_draws`): the (variant, seeds, floor) terms' values
    under its draws, the group's size, whether it is the level."""
    return [((variant.drawn(first, second, study.seed_draws), seeds.drawn(both, both, study.seed_draws),
              floor.drawn(both, both, study.seed_draws)), size, group == "level")
            for group, first, second, both, size in counts]
