"""The universality study's tables: for each factor level, measure and depth the share u of seed-level similarity
that survives (reprsim.stages.universality.shares), beside each level's fit; with the sense table, the convergence
over training time and its claims, and the artefact controls."""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd

from reprsim.design.relations import also_changes, competence_checkpoints, cross_seed
from reprsim.design.senses import SEEDS_ROW
from reprsim.measure_registry import MEASURES
from reprsim.stages.universality.controls import _control_table
from reprsim.stages.universality.convergence import CLAIM_COLUMNS, CONVERGENCE_COLUMNS, _convergence
from reprsim.stages.universality.draws import _seed_draws, _under_draws
from reprsim.stages.universality.fit import _competence, _matched_step, _quality_note, quality
from reprsim.stages.universality.sense_table import _against_identity, _function_terms, _sense_table
from reprsim.stages.universality.shares import Terms, depth_groups, null_share, pair_arrays, share, term
from reprsim.stages.universality.study import PLACEBO, Study
from reprsim.tables.grounding import failed_grounding
from reprsim.tables.layers import model_depths
from reprsim.tables.pair_series import oriented

COLUMNS = ["dataset", "representation", "factor", "level", "models", "measure", "family", "depth", "layer",
           "relative_depth", "u", "ci_low", "ci_high", "interval_basis", "verdict", "margin", "rows_ci_low",
           "rows_ci_high", "seeds_ci_low", "seeds_ci_high", "fieller_g", "denominator_near_zero", "u_null_zero",
           "u_null_zero_low", "u_null_zero_high", "seeds_above_floor", "n_variant_models", "n_reference_models",
           "n_floor_models",
           "s_variant", "s_variant_low", "s_variant_high", "s_seeds", "s_seeds_low", "s_seeds_high",
           "s_floor", "s_floor_low", "s_floor_high", "n_variant_pairs", "n_seed_pairs", "n_floor_pairs",
           "grounding_failed", "conditioning", "control", "headline", "quality_metric", "quality",
           "reference_quality_low", "reference_quality_high", "quality_note", "probe_accuracy", "probe_reference_low",
           "probe_reference_high", "probe_chance", "probe_note", "also_changes", "competence_match", "n", "m",
           "n_resamples"]
MATCHED_UNSTITCHED = "stitching is planned for each level's final models, not for its checkpoints"


class StudyTables(NamedTuple):
    universality: pd.DataFrame  # factor level × measure × depth
    senses: pd.DataFrame  # factor level × sense × third, and the seed siblings against identical copies
    convergence: pd.DataFrame  # cross-seed similarity at each checkpoint
    claims: pd.DataFrame  # that it rises, with intervals
    controls: pd.DataFrame  # each artefact control's verdict beside its twin's, per factor level and third


def universality_tables(pairs: pd.DataFrame, replicates: pd.DataFrame, study: Study, metas: Mapping[str, Mapping],
                        grounding: pd.DataFrame | None = None,
                        competence: Mapping[str, Mapping] | None = None,
                        function: tuple[pd.DataFrame, pd.DataFrame] | None = None,
                        function_left_out: Mapping[str, str] | None = None) -> StudyTables:
    """The study's tables (:class:`StudyTables`) from the pair tables and replicates of one dataset and
    representation; `competence` (model -> {accuracy, chance}: the shared probe's best layer) puts each level's
    competence beside its own loss; `function` (the functional sense's stitch tables and replicates) gives the
    sense table its functional row, and `function_left_out` ("factor/level" -> why) says why a level has none."""
    competence = competence or {}
    if pairs.empty:
        raise ValueError("the universality study has no pair table to read")
    (dataset, representation), = pairs[["dataset", "representation"]].drop_duplicates().itertuples(index=False)
    series, replicate_series = oriented(pairs, replicates)
    null_series = oriented(pairs.assign(value=pairs["null_mean"]), replicates.iloc[:0])[0] \
        if "null_mean" in pairs else None
    depths = model_depths(pairs)
    missing = sorted({*study.reference, *study.floor} - set(depths))
    if missing:
        raise ValueError(f"the pair tables hold no rows of {', '.join(missing)}: the study compares them")
    reference_depth = depths[study.reference[0]]
    failed = failed_grounding(grounding)
    seed_couples = cross_seed(study.specs, study.reference, study.reference)
    seed_couples = [(a, b) for a, b in seed_couples if a < b]
    floor_couples = cross_seed(study.specs, study.floor, study.reference)
    reference_quality = [quality(metas.get(m, {}))[1] for m in study.reference]
    low, high = float(np.min(reference_quality)), float(np.max(reference_quality))
    draw = _seed_draws(study)
    # each level's models, couples, seed draws and fit: the same for every measure; the placebo first
    placebo_couples = cross_seed(study.specs, study.reference, study.reference)
    levels = [(*PLACEBO, list(study.reference), placebo_couples, draw(study.reference, placebo=True), {
        "quality_metric": quality(metas.get(study.reference[0], {}))[0], "quality": float(np.mean(reference_quality)),
        "reference_quality_low": low, "reference_quality_high": high,
        "quality_note": "the reference seeds themselves", "also_changes": "", "competence_match": "",
        **_competence(study.reference, study.reference, competence)})] if len(seed_couples) >= 3 else []

    def fit(factor: str, models: Sequence[str], match: str = "") -> dict:
        metric, _ = quality(metas.get(models[0], {}))
        value = float(np.mean([quality(metas.get(m, {}))[1] for m in models]))
        return {"quality_metric": metric, "quality": value, "reference_quality_low": low,
                "reference_quality_high": high, "quality_note": _quality_note(factor, metric, value, low, high),
                "also_changes": also_changes(study.specs, models[0], study.reference[0]), "competence_match": match,
                **_competence(models, study.reference, competence)}

    checkpointed = competence_checkpoints(study.specs, {"factors": study.factors})
    matches = {key: _matched_step(*key, steps, study, metas, competence)
               for key, steps in checkpointed.items()}
    for factor, named in study.factors.items():
        for level, models in named.items():
            match = matches.get((factor, level))
            note = "" if match is None else (f"{match[2]}; the final models are the nearest" if match[1] is None
                                             else f"{match[2]}; compared there as level {match[0]!r}")
            levels.append((factor, level, models, cross_seed(study.specs, models, study.reference), draw(models),
                           fit(factor, models, note)))
    # each level at the checkpoint matching the reference's competence, after every level (the levels' seed
    # draws come from one generator in this order)
    matched_left_out = {}
    for (factor, _), match in matches.items():
        if match is not None and match[1] is not None:
            label, models, note = match
            levels.append((factor, label, models, cross_seed(study.specs, models, study.reference), draw(models),
                           fit(factor, models, note)))
            matched_left_out[f"{factor}/{label}"] = MATCHED_UNSTITCHED
    rows, curve, claims = [], [], []
    groups = depth_groups(reference_depth)
    kept: dict[str, dict[tuple[str, str], Terms]] = {}  # label -> (factor, level) -> its terms, for the senses
    # the reference's and the floor's seed draws (the same for every level): the seed row's
    reference_draws = [entry for entry in levels[0][4] if entry[0] != "level"] if levels else []
    for label in study.measures:
        if label not in set(series["measure"]):
            continue
        arrays, nulls = pair_arrays(series, replicate_series, label, null_series)
        seeds = term(arrays, seed_couples, depths, reference_depth)
        floor = term(arrays, floor_couples, depths, reference_depth)
        spec = MEASURES[study.measures[label]]
        identical = spec.identical if spec.kind == "similarity" else -spec.identical
        kept[label] = {SEEDS_ROW: _against_identity(study, seeds, floor, reference_draws, identical)}
        seeds_null = term(nulls, seed_couples, depths, reference_depth).mean()[0] if nulls else None
        common = {"dataset": dataset, "representation": representation, "measure": label,
                  "family": study.family(label), "grounding_failed": ", ".join(failed.get(label, [])),
                  "conditioning": study.conditioning(label), "control": study.control(label),
                  "headline": label not in failed and not study.is_control(label), "n": arrays.n, "m": arrays.m,
                  "n_resamples": int(seeds.draws.shape[1])}
        for factor, level, models, couples, counts, fit in levels:
            variant = term(arrays, couples, depths, reference_depth)
            variant_null = term(nulls, couples, depths, reference_depth).mean()[0] if nulls else None
            under_draws = _under_draws(study, variant, seeds, floor, counts)
            kept[label][(factor, level)] = Terms(variant.mean(), seeds.mean(), floor.mean(), under_draws)
            for depth, layers in groups.items():
                row = share(variant.mean(), seeds.mean(), floor.mean(), layers, arrays.n, arrays.m,
                            study.confidence, study.margin, under_draws)
                if variant_null is not None and seeds_null is not None:
                    row.update(null_share(variant.mean(), seeds.mean(), variant_null, seeds_null, layers, arrays.n,
                                          arrays.m, study.confidence))
                rows.append({**common, "factor": factor, "level": level, "models": ", ".join(models),
                             "depth": depth, "layer": int(layers[0]) if len(layers) == 1 else -1,
                             "relative_depth": float(np.mean(layers) / max(reference_depth, 1)), **row,
                             "margin": study.margin, "n_variant_pairs": len(couples),
                             "n_seed_pairs": len(seed_couples), "n_floor_pairs": len(floor_couples),
                             "n_variant_models": len(models), "n_reference_models": len(study.reference),
                             "n_floor_models": len(study.floor), **fit})
        if "training_time" in study.factors:
            points, found = _convergence(arrays, study, depths, reference_depth, metas, seeds.mean(), seed_couples,
                                         groups, competence)
            # a control's curve and claims are drawn and listed like any measure's, not marked as failing grounding
            grounded = {"headline": label not in failed}
            curve += [{**common, **grounded, **point} for point in points]
            claims += [{**common, **grounded, **claim} for claim in found]
    table = pd.DataFrame(rows, columns=COLUMNS)
    functional = (_function_terms(*function, study, levels, reference_depth, reference_draws)
                  if function is not None and len(function[0]) else None)
    senses = _sense_table(table, kept, study, levels, groups, dataset, representation, functional,
                          {**matched_left_out, **(function_left_out or {})})
    curve_table = pd.DataFrame(curve, columns=CONVERGENCE_COLUMNS)
    claim_table = pd.DataFrame(claims, columns=CLAIM_COLUMNS)
    return StudyTables(table, senses, curve_table, claim_table, _control_table(table, study))
