"""Claim: models of one group (seed siblings, a base and what was fine-tuned from it) are closer
to each other than to models of other groups, in Brown et al.'s (2023) arccos-CKA model distance."""

from __future__ import annotations

import warnings

import numpy as np

from reprsim.design.relations import groups
from reprsim.inference.resampling import interval
from reprsim.stages.findings.cells import cell, replicate_method, select
from reprsim.stages.findings.context import Setup, Tables, compared_pairs, pair_blocks
from reprsim.stages.findings.profiles import NO_CKA, NO_PAIRS
from reprsim.stages.findings.table import Claim, judged, not_applicable
from reprsim.tables.layers import layer_pairs, model_depths

GROUPS = Claim(
    "groups_closer_within", "Models of the same group (seed siblings, same base) are closer than models of "
    "different groups", "Brown et al. 2023, §4 and appendix C (Figure 8); Wu et al. 2020, §5.1",
    "mean model distance between groups − mean within groups; model distance = sqrt(mean over matching "
    "layers of arccos(CKA)²), i.e. Brown et al.'s sqrt(Σ_l arccos(CKA_l)²) / sqrt(L + 1) at equal depth, so "
    "models of different depth compare too")


def model_distance_rms(values: np.ndarray) -> np.ndarray:
    """values (k, layers) of CKA at matching layers -> (k,) root-mean-square angle (NaN layers left out)."""
    if np.nanmax(np.abs(values), initial=0.0) > 1 + 1e-9:
        raise ValueError(f"a CKA value {np.nanmax(np.abs(values))} lies outside [-1, 1]; arccos is undefined")
    angles = np.arccos(np.clip(values, -1.0, 1.0)) ** 2
    with np.errstate(invalid="ignore"):
        return np.sqrt(np.nanmean(angles, axis=1)) if values.shape[1] else np.full(len(values), np.nan)


def negated_mean(values: np.ndarray) -> np.ndarray:
    """values (k, layers) of a similarity-oriented series at matching layers -> (k,) minus their mean (NaN layers
    left out): the model distance of a measure without an angle (reprsim.stages.findings.by_measure)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return -np.nanmean(values, axis=1) if values.shape[1] else np.full(len(values), np.nan)


def groups_closer_within(tables: Tables, setup: Setup) -> list[dict]:
    if setup.measure is None:
        return [not_applicable(GROUPS, NO_CKA)]
    group_of = groups(setup.models)
    rows = []
    for dataset, representation, pairs, replicates in pair_blocks(tables):
        depth = model_depths(pairs)
        present = sorted(m for m in depth if m in group_of)
        compared = compared_pairs(pairs)
        model_pairs = [(a, b) for i, a in enumerate(present) for b in present[i + 1:] if (a, b) in compared]
        within = [(a, b) for a, b in model_pairs if group_of[a] == group_of[b]]
        between = [(a, b) for a, b in model_pairs if group_of[a] != group_of[b]]
        if not within or not between:
            missing = ("no compared pair of models of one group" if not within
                       else "no compared pair of models of different groups")
            rows.append(not_applicable(GROUPS, f"{missing} among the compared models ({', '.join(present)}); "
                                       "groups come from seed siblings and fine-tuning bases",
                                       dataset, representation))
            continue
        layers = {(a, b): [cell(a, b, la, lb) for la, lb in layer_pairs(depth[a], depth[b], "matching")]
                  for a, b in model_pairs}
        cells = select(pairs, replicates, [c for wanted in layers.values() for c in wanted], setup.measure)
        for key in layers:  # undefined layers (constant rows) are left out of the sum, as in model_distances
            layers[key] = cells.positions(cells.defined(layers[key]))

        model_distance = model_distance_rms if setup.model_distance == "arccos" else negated_mean

        def statistic(values: np.ndarray) -> np.ndarray:
            distance = {key: model_distance(values[:, positions]) for key, positions in layers.items()}
            return (np.mean([distance[k] for k in between], axis=0)
                    - np.mean([distance[k] for k in within], axis=0))

        estimate = float(statistic(cells.estimate[None, :])[0])
        low, high = interval(estimate, statistic(cells.replicates), cells.n, cells.m, setup.confidence)
        named = sorted({tuple(sorted(group_of[m] & set(present))) for m in present})
        models = " | ".join("{" + ", ".join(group) + "}" for group in named)
        method = (f"{len(within)} model pairs within and {len(between)} between {len(named)} groups"
                  + ("" if setup.model_distance == "arccos" else
                     " (model distance: minus the mean over matching layers, not the arccos of CKA)") + "; "
                  + replicate_method(cells))
        rows.append(judged(GROUPS, estimate=estimate, low=low, high=high, n=cells.n, models=models,
                           measure=setup.measure, method=method, confidence=setup.confidence,
                           dataset=dataset, representation=representation))
    return rows or [not_applicable(GROUPS, NO_PAIRS)]
