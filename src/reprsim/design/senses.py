"""Senses of "the same representation": each a class of transformations under which two representations count as
the same (Williams et al. 2021: the invariance group defines the metric; Klabunde et al. 2023 sort the field's
measures by it; Li et al. 2015 ask it of units and of subspaces). A measure answers in the sense that its declared
invariances (reprsim.measure_registry, property-tested there) put it in; the functional sense is the stitching
stage's, where one model's layer stands in for another's.

From the declarations, strictest group first: a measure invariant to invertible linear maps answers in the linear
sense; else, invariant to rotations, in the geometric one; else, invariant only to a permutation of units, in the
units sense. Two families answer a question of their own whatever their invariances: the neighbourhood measures
read only which inputs lie near which, and an RSA whose outer comparison is a rank correlation reads only the order
of the distances. The statistics family compares each point cloud's summary without the row correspondence: it
answers in no sense of "the same representation". A measure on conditioned features (reprsim.design.conditioning)
keeps no more of the nested groups than the conditioning commutes with: standardised or clipped features give at
most the units sense, features with their top principal directions removed at most the geometric one.

Torch-free: the configuration check, the docs and the study read it without loading the measures.
"""

from __future__ import annotations

from typing import Mapping

from reprsim.design.conditioning import KEEPS, parse
from reprsim.measure_registry import MEASURES

# name -> the precise question "the same" answers in that sense: the nested groups' senses from the strictest
# (units ⊂ geometry ⊂ linear, the linear sense last but for the functional one), the families' own between
SENSES = {
    "units": "the same units, up to their order",
    "geometry": "the same geometry, up to a rotation",
    "ranks": "the same order of distances between inputs",
    "neighbourhoods": "the same nearest neighbours",
    "linear": "the same linearly decodable information, up to any invertible linear map",
    "function": "the same function, one model's layer standing in for the other's through a learned affine map",
}
RANK_OUTERS = ("spearman", "kendall")
# (factor, level) of a universality study's row of the seed siblings against identical copies: u = (S_seeds −
# S_floor) / (S_identical − S_floor), how near to identical two seeds of one recipe come in each sense; its verdicts
# in words, its u = 1 being an identical copy, not another seed
SEEDS_ROW = ("seeds", "seed siblings against identical copies")
# the universality statement's topics that answer the question, at most ten sentences before the sentences per factor
# level: the resolution (the seed placebo), the seed row, one per sense of similarity, the controls, convergence
ANSWER_TOPICS = ("placebo", SEEDS_ROW[0], "sense", "controls", "convergence")
AGAINST_IDENTITY = {"as similar as seeds": "identical within the margin", "less similar": "short of identical",
                    "more similar than seeds": "beyond identical"}


NESTED = ("units", "geometry", "linear")  # the nested groups' senses, strictest first


def sense_of(measure: str, params: Mapping | None = None, conditioning=None) -> str | None:
    """The sense in which a registered measure, at these params and on features so conditioned, says two
    representations are the same; None for a measure that compares each representation's summary statistics (no
    row correspondence)."""
    if measure not in MEASURES:
        raise KeyError(f"unknown measure {measure!r}; registered: {', '.join(MEASURES)}")
    spec = MEASURES[measure]
    merged = {**spec.params, **(params or {})}
    if not spec.correspondence:
        return None
    if spec.family == "neighbourhood":
        return "neighbourhoods"
    if spec.family == "RSM" and merged.get("outer") in RANK_OUTERS:
        return "ranks"
    declared = spec.declared(merged)
    keeps = NESTED.index(KEEPS[parse(conditioning)["method"]])
    for invariance, sense in (("IL", "linear"), ("OT", "geometry"), ("PU", "units")):
        if invariance in declared:
            return NESTED[min(NESTED.index(sense), keeps)]
    return None


def senses_of(measures: Mapping[str, Mapping]) -> dict[str, str | None]:
    """label -> sense for a configuration's `measures` section (label -> {measure, params, conditioning, ...})."""
    return {label: sense_of(spec["measure"], spec.get("params"), spec.get("conditioning"))
            for label, spec in measures.items()}
