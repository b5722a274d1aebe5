"""The universality study's tables: for each factor level, measure and depth the share u of seed-level
similarity that survives (reprsim.stages.universality.shares), beside each level's quality; the same per sense of
similarity (reprsim.design.senses: the grounded measures of one sense pooled), with a row for how near to identical the
seed siblings come; the convergence of cross-seed similarity over training time (Huh et al. 2024); and the
statement written out from them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd

from reprsim.design.conditioning import describe as describe_conditioning, parse as parse_conditioning
from reprsim.tables.grounding import failed_grounding
from reprsim.tables.layers import model_depths
from reprsim.measure_registry import MEASURES
from reprsim.tables.pair_series import oriented
from reprsim.tables.universality import FACTOR_PHRASES
from reprsim.design.relations import also_changes, competence_checkpoints, cross_seed
from reprsim.inference.resampling import interval
from reprsim.design.senses import AGAINST_IDENTITY, ANSWER_TOPICS, SEEDS_ROW, SENSES, sense_of
from reprsim.stages.universality.shares import (SEED_DRAWS, Term, Terms, depth_groups, null_share, pair_arrays,
                                                pooled, share, stitch_arrays, term)

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
CONVERGENCE_COLUMNS = ["dataset", "representation", "measure", "family", "depth", "layer", "level", "step",
                       "similarity", "ci_low", "ci_high", "validation_cross_entropy", "probe_accuracy", "n_seed_pairs",
                       "n", "m"]
SENSE_COLUMNS = ["dataset", "representation", "factor", "level", "models", "sense", "question", "depth", "u", "ci_low",
                 "ci_high", "interval_basis", "verdict", "margin", "measures", "n_measures", "left_out", "n", "m"]
CONTROL_COLUMNS = ["dataset", "representation", "factor", "level", "depth", "control", "conditioning", "change",
                   "measure", "u", "ci_low", "ci_high", "verdict", "control_u", "control_ci_low", "control_ci_high",
                   "control_verdict", "changed", "control_grounding_failed", "n", "m"]
CLAIM_COLUMNS = ["dataset", "representation", "measure", "family", "depth", "statistic", "estimate", "ci_low",
                 "ci_high", "verdict", "first_step", "last_step", "n_checkpoints", "headline", "n", "m"]
PLACEBO = ("placebo", "another reference seed")  # (factor, level) of the reference seeds scored as a level
assert PLACEBO[0] in ANSWER_TOPICS  # the seed placebo's sentence (the study's resolution) is an answer
FUNCTION_UNMEASURED = "no stitching into the reference in this study: set universality.function"
MATCHED_UNSTITCHED = "stitching is planned for each level's final models, not for its checkpoints"
FUNCTION_MEASURE = "stitching penalty"  # the functional sense's "measure" in the sense table
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


def quality(meta: Mapping) -> tuple[str, float]:
    """(what, value) of a model's fit, higher = better: for a language model the nats per token its validation
    cross-entropy lies below the unigram reference (the same tokens under the train split's token frequencies),
    which puts models scored on different text (the data factor) on one scale; for a fine-tuned model its validation
    accuracy; ("", NaN) without either."""
    if meta.get("validation_cross_entropy") is not None and meta.get("unigram_cross_entropy") is not None:
        return ("nats below the unigram reference",
                float(meta["unigram_cross_entropy"]) - float(meta["validation_cross_entropy"]))
    for key in ("validation_accuracy", "accuracy", "eval_accuracy"):
        if meta.get(key) is not None:
            return "validation accuracy", float(meta[key])
    return "", float("nan")


def _quality_note(factor: str, metric: str, value: float, low: float, high: float) -> str:
    """Where a level's quality lies beyond the seed siblings' spread: its u mixes the factor with how well the
    models fit their data (a wider model on a small corpus can overfit)."""
    if not metric or not np.isfinite(value) or not np.isfinite(low):
        return "quality unknown"
    if factor == "objective":
        return "not comparable: the objectives' cross-entropies score different predictions (masked or next tokens)"
    if low <= value <= high:
        return "within the seed siblings' spread"
    return (f"{'better' if value > high else 'worse'} than every seed sibling ({value:.3f} against "
            f"{low:.3f}–{high:.3f}): u mixes the factor with the change in fit")


class StudyTables(NamedTuple):
    universality: pd.DataFrame  # factor level × measure × depth
    senses: pd.DataFrame  # factor level × sense × third, and the seed siblings against identical copies
    convergence: pd.DataFrame  # cross-seed similarity at each checkpoint
    claims: pd.DataFrame  # that it rises, with intervals
    controls: pd.DataFrame  # each artefact control's verdict beside its twin's, per factor level and third


def _competence(models: Sequence[str], reference: Sequence[str], competence: Mapping[str, Mapping]) -> dict:
    """A level's competence on the shared probe (reprsim.stages.grounding.competence): its models' mean best-layer
    accuracy beside the reference seeds' range and the chance level; NaN and a note where a model was not probed
    (a dimension placebo's reduced copies, a dataset without labels)."""
    accuracy = [competence[m]["accuracy"] for m in models if m in competence]
    seeds = [competence[m]["accuracy"] for m in reference if m in competence]
    if len(accuracy) < len(models) or not seeds:
        return {"probe_accuracy": np.nan, "probe_reference_low": np.nan, "probe_reference_high": np.nan,
                "probe_chance": np.nan, "probe_note": "not probed"}
    value, low, high = float(np.mean(accuracy)), float(np.min(seeds)), float(np.max(seeds))
    # beyond the seeds' range only by more than the probe's own uncertainty (its interval's half-width over rows)
    half = float(np.mean([(competence[m]["ci_high"] - competence[m]["ci_low"]) / 2 for m in models
                          if "ci_low" in competence[m]] or [0.0]))
    note = ("within the seed siblings' spread" if low - half <= value <= high + half else
            f"{'better' if value > high else 'worse'} than every seed sibling")
    if half and note.startswith("within") and not low <= value <= high:
        note += f" (outside their range by less than the probe's ±{half:.3f} over rows)"
    return {"probe_accuracy": value, "probe_reference_low": low, "probe_reference_high": high,
            "probe_chance": float(competence[models[0]]["chance"]), "probe_note": note}


def _matched_step(factor: str, level: str, steps: Mapping[int, list[str]], study: Study,
                  metas: Mapping[str, Mapping], competence: Mapping[str, Mapping]):
    """(label, the level's models at the checkpoint whose competence is nearest the reference seeds', what was
    matched) for a level with checkpoints (reprsim.design.relations.competence_checkpoints): on the shared probe's accuracy
    where every candidate and reference model was probed, else, where the level keeps the reference's objective, on
    the fit (nats below the unigram reference); the models None where the final ones are nearest, None where
    nothing compares."""
    models = list(study.factors[factor][level])
    final = int(study.specs[models[0]].get("steps", 0))
    candidates = {**steps, final: list(models)}
    everyone = [*study.reference, *(m for named in candidates.values() for m in named)]
    if all(m in competence for m in everyone):
        what = "the shared probe's accuracy"

        def value(named):
            return float(np.mean([competence[m]["accuracy"] for m in named]))
    elif (factor != "objective" and all(np.isfinite(quality(metas.get(m, {}))[1]) for m in everyone)):
        what = quality(metas[study.reference[0]])[0]

        def value(named):
            return float(np.mean([quality(metas[m])[1] for m in named]))
    else:
        return None
    target = value(study.reference)
    step = min(candidates, key=lambda s: (abs(value(candidates[s]) - target), -s))
    note = (f"matched on {what}: at step {step} of {final} {value(candidates[step]):.3f}, the reference seeds "
            f"{target:.3f}, the final models {value(models):.3f}")
    if step == final:
        return level, None, note
    return f"{level}, step {step} (competence matched)", candidates[step], note


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


def _control_table(table: pd.DataFrame, study: Study) -> pd.DataFrame:
    """Each artefact control (a measure on conditioned features, or a sweep of one parameter) beside its twin, per
    factor level and third: both u, intervals and verdicts, what the control changes, and whether the verdict
    changed."""
    rows = []
    thirds = table[table["depth"].str.endswith("third")].set_index(["measure", "factor", "level", "depth"])
    for control in study.measures:
        twin = study.twin(control)
        if twin is None or control not in thirds.index or twin not in thirds.index:
            continue
        for (factor, level, depth), mine in thirds.loc[control].iterrows():
            base = thirds.loc[(twin, factor, level, depth)]
            rows.append({"dataset": mine["dataset"], "representation": mine["representation"], "factor": factor,
                         "level": level, "depth": depth, "control": control, "conditioning": mine["conditioning"],
                         "change": mine["control"],
                         "measure": twin, "u": base["u"], "ci_low": base["ci_low"], "ci_high": base["ci_high"],
                         "verdict": base["verdict"], "control_u": mine["u"], "control_ci_low": mine["ci_low"],
                         "control_ci_high": mine["ci_high"], "control_verdict": mine["verdict"],
                         "changed": bool(mine["verdict"] != base["verdict"]),
                         "control_grounding_failed": mine["grounding_failed"], "n": mine["n"], "m": mine["m"]})
    return pd.DataFrame(rows, columns=CONTROL_COLUMNS)


def _under_draws(study: Study, variant: Term, seeds: Term, floor: Term, counts) -> list:
    """Each resampled group's draws at all rows (:func:`_seed_draws`): the (variant, seeds, floor) terms' values
    under its draws, the group's size, whether it is the level."""
    return [((variant.drawn(first, second, study.seed_draws), seeds.drawn(both, both, study.seed_draws),
              floor.drawn(both, both, study.seed_draws)), size, group == "level")
            for group, first, second, both, size in counts]


def _against_identity(study: Study, seeds: Term, floor: Term, reference_draws, identical: float | Term) -> Terms:
    """The seed siblings as a level against identical copies: variant = the seeds' term, the "seeds" term = the
    value on identical inputs (`identical`: a measure's constant, similarity-oriented: a distance's 0; or, for the
    functional sense, each reference seed stitched into itself), so that u = (S_seeds − S_floor) / (S_identical −
    S_floor); the reference's and the floor's models resampled (the reference's draws as the level's)."""
    value, draws = seeds.mean()
    if isinstance(identical, Term):
        same = identical.mean()
    else:
        same = (np.full_like(value, identical), np.full_like(draws, identical))
    under_draws = []
    for group, _, _, both, size in reference_draws:
        drawn = seeds.drawn(both, both, study.seed_draws)
        # a self-stitch is one model: it weighs the times that model is drawn, not their square
        same_drawn = identical.drawn(both, {}, study.seed_draws) if isinstance(identical, Term) else \
            np.full_like(drawn, identical)
        under_draws.append(((drawn, same_drawn, floor.drawn(both, both, study.seed_draws)), size,
                            group == "reference"))
    return Terms((value, draws), same, floor.mean(), under_draws)


class Functional(NamedTuple):
    """The functional sense's terms per (factor, level) (SEEDS_ROW: the seed siblings against each seed stitched
    into itself), on n evaluation rows with replicates of m."""

    terms: Mapping[tuple[str, str], Terms]
    n: int
    m: int


def _function_terms(table: pd.DataFrame, replicates: pd.DataFrame, study: Study, levels, reference_depth: int,
                    reference_draws) -> Functional:
    """The functional sense's terms from the stitch jobs (reprsim.workflow.stitching.function_plan): S = −penalty of
    a model's layers stitched into a reference model at each reference layer (the bottom met at the same relative
    depth); the seed siblings stitched both ways; the identical end each reference seed into itself. A level whose
    models were not stitched is left out."""
    arrays, depths = stitch_arrays(table, replicates)
    if depths.get(study.reference[0]) != reference_depth:
        raise ValueError(f"the stitch tables give {study.reference[0]} {depths.get(study.reference[0])} layers, the "
                         f"pair tables {reference_depth}")
    seed_couples = cross_seed(study.specs, study.reference, study.reference)  # both ways: stitching is directed
    seeds = term(arrays, seed_couples, depths, reference_depth)
    floor = term(arrays, cross_seed(study.specs, study.floor, study.reference), depths, reference_depth)
    identical = term(arrays, [(r, r) for r in study.reference], depths, reference_depth)
    terms = {SEEDS_ROW: _against_identity(study, seeds, floor, reference_draws, identical)}
    for factor, level, _, couples, counts, _ in levels:
        if couples and all(couple in arrays.values for couple in couples):
            variant = term(arrays, couples, depths, reference_depth)
            terms[(factor, level)] = Terms(variant.mean(), seeds.mean(), floor.mean(),
                                           _under_draws(study, variant, seeds, floor, counts))
    return Functional(terms, arrays.n, arrays.m)


def _sense_table(table: pd.DataFrame, kept: Mapping[str, Mapping[tuple[str, str], Terms]], study: Study, levels,
                 groups: Mapping[str, np.ndarray], dataset: str, representation: str,
                 functional: Functional | None = None,
                 function_left_out: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Factor level × sense × third: u pooled over the sense's grounded measures whose seed siblings lie clearly
    above the floor in that third (:func:`reprsim.stages.universality.shares.pooled`), with its interval and verdict;
    a sense without such a measure says why; the functional sense's u from the stitching penalty (`functional`).
    The first row block is the seed siblings against identical copies."""
    labels = list(kept)
    n, m = (int(table["n"].iloc[0]), int(table["m"].iloc[0])) if len(table) else (0, 0)
    sense_of_label = {label: study.sense(label) for label in labels}
    grounded = set(table.loc[table["headline"], "measure"])
    above = {(r.measure, r.factor, r.level, r.depth): bool(r.seeds_above_floor) for r in table.itertuples()}
    named = [(*SEEDS_ROW, ", ".join(study.reference))] + [(f, l, ", ".join(models)) for f, l, models, *_ in levels]
    rows = []
    for factor, level, models in named:
        for sense, question in SENSES.items():
            mine = [label for label in labels if sense_of_label[label] == sense]
            for depth, layers in groups.items():
                if not depth.endswith("third"):
                    continue
                base = {"dataset": dataset, "representation": representation, "factor": factor, "level": level,
                        "models": models, "sense": sense, "question": question, "depth": depth,
                        "margin": study.margin, "n": n, "m": m}
                if sense == "function":
                    rows.append({**base, **_function_row(functional, function_left_out or {}, study, factor, level,
                                                         layers)})
                    continue
                # against identical copies every grounded measure counts (S_identical is the measure's maximum)
                use = [label for label in mine if label in grounded
                       and ((factor, level) == SEEDS_ROW or above.get((label, factor, level, depth)))]
                left = [f"{label} (failed grounding)" for label in mine if label not in grounded]
                left += [f"{label} (seeds not clearly above the floor)" for label in mine
                         if label in grounded and label not in use]
                if not use:
                    why = "no measure of this sense in the study" if not mine else "no grounded measure qualifies"
                    rows.append({**base, "u": np.nan, "ci_low": np.nan, "ci_high": np.nan, "interval_basis": "",
                                 "verdict": "not measured", "measures": "", "n_measures": 0,
                                 "left_out": "; ".join([why, *left])})
                    continue
                terms = pooled([kept[label][(factor, level)] for label in use], layers)
                row = share(terms.variant, terms.seeds, terms.floor, layers, n, m, study.confidence, study.margin,
                            terms.seed_draws)
                rows.append({**base, **{key: row[key] for key in ("u", "ci_low", "ci_high", "interval_basis",
                                                                  "verdict")},
                             "measures": ", ".join(use), "n_measures": len(use), "left_out": "; ".join(left)})
    return pd.DataFrame(rows, columns=SENSE_COLUMNS)


def _function_row(functional: Functional | None, left_out: Mapping[str, str], study: Study, factor: str, level: str,
                  layers: np.ndarray) -> dict:
    """The functional sense's cell of one level and third: u of the stitching penalty, its interval and verdict; or
    why it was not measured."""
    terms = functional.terms.get((factor, level)) if functional is not None else None
    if terms is None:
        why = (FUNCTION_UNMEASURED if functional is None else
               left_out.get(f"{factor}/{level}", "its models were not stitched into the reference"))
        return {"u": np.nan, "ci_low": np.nan, "ci_high": np.nan, "interval_basis": "", "verdict": "not measured",
                "measures": "", "n_measures": 0, "left_out": why}
    row = share(terms.variant, terms.seeds, terms.floor, layers, functional.n, functional.m, study.confidence,
                study.margin, terms.seed_draws)
    return {**{key: row[key] for key in ("u", "ci_low", "ci_high", "interval_basis", "verdict")},
            "measures": FUNCTION_MEASURE, "n_measures": 1, "left_out": "", "n": functional.n, "m": functional.m}


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


def _step(spec: Mapping) -> int:
    """The optimiser steps behind a model: its checkpoint's step, else its training's steps (a hub model: its
    declared recipe.step)."""
    if "checkpoint" in spec:
        return int(spec["checkpoint"])
    if "steps" in spec:
        return int(spec["steps"])
    return int((spec.get("recipe") or {}).get("step", -1))


def _convergence(arrays, study: Study, depths, reference_depth, metas, seeds, seed_couples, groups,
                 competence: Mapping[str, Mapping] | None = None):
    """Cross-seed similarity at each checkpoint (training_time levels) and at the end of training (the reference's
    seed siblings), and the claims that it rises: last minus first, Spearman ρ with the step, with the validation
    cross-entropy falling and (where every stage's models were probed) with the shared probe's accuracy rising
    (convergence against competence, not only steps: Huh et al. 2024), each with its interval from the shared
    replicates."""
    from scipy.stats import spearmanr  # here: the table job needs it only for a study over training time

    stages = []
    for level, models in study.factors["training_time"].items():
        couples = [(a, b) for a, b in cross_seed(study.specs, models, models) if a < b]
        if couples:
            stages.append((level, _step(study.specs[models[0]]), term(arrays, couples, depths, reference_depth).mean(),
                           len(couples), models))
    stages.append(("end of training", _step(study.specs[study.reference[0]]), seeds, len(seed_couples),
                   study.reference))
    stages.sort(key=lambda stage: stage[1])
    points, claims = [], []
    n, m = arrays.n, arrays.m
    losses = np.array([np.mean([float(metas.get(model, {}).get("validation_cross_entropy", np.nan))
                                for model in stage[4]]) for stage in stages])
    accuracies = np.array([np.mean([float((competence or {}).get(model, {}).get("accuracy", np.nan))
                                    for model in stage[4]]) for stage in stages])
    steps = np.array([stage[1] for stage in stages], dtype=float)
    for depth, layers in groups.items():
        values = np.array([np.mean(stage[2][0][layers]) for stage in stages])
        draws = np.stack([np.mean(stage[2][1][:, layers], axis=1) for stage in stages], axis=1)  # (R, stages)
        for (level, step, _, count, _), value, draw, loss, accuracy in zip(stages, values, draws.T, losses,
                                                                           accuracies):
            low, high = interval(value, draw, n, m, study.confidence)
            points.append({"depth": depth, "layer": int(layers[0]) if len(layers) == 1 else -1, "level": level,
                           "step": step, "similarity": value, "ci_low": low, "ci_high": high,
                           "validation_cross_entropy": loss, "probe_accuracy": accuracy, "n_seed_pairs": count})
        if len(stages) < 2:
            continue
        base = {"depth": depth, "first_step": int(steps[0]), "last_step": int(steps[-1]),
                "n_checkpoints": len(stages)}
        rise, rise_draws = values[-1] - values[0], draws[:, -1] - draws[:, 0]
        low, high = interval(rise, rise_draws, n, m, study.confidence)
        claims.append({**base, "statistic": "last minus first", "estimate": rise, "ci_low": low, "ci_high": high,
                       "verdict": "rises" if low > 0 else "falls" if high < 0 else "no clear change"})
        for statistic, against in (("spearman_rho_step", steps), ("spearman_rho_loss", -losses),
                                   ("spearman_rho_competence", accuracies)):
            if len(stages) < 3 or not np.isfinite(against).all():
                continue
            rho = float(spearmanr(values, against).statistic)
            rho_draws = np.array([spearmanr(d, against).statistic for d in draws])
            low, high = (np.clip(bound, -1, 1) for bound in interval(rho, rho_draws, n, m, study.confidence))
            claims.append({**base, "statistic": statistic, "estimate": rho, "ci_low": float(low),
                           "ci_high": float(high),
                           "verdict": "rises" if low > 0 else "falls" if high < 0 else "no clear change"})
    return points, claims


def _format(value: float, low: float, high: float) -> str:
    return f"{value:.2f} [{low:.2f}, {high:.2f}]" if np.isfinite(value) else "undefined"


def _thirds_said(rows: pd.DataFrame, words: Mapping[str, str] | None = None) -> str:
    """A sense's verdicts over the thirds in words ("as similar as seeds in every third", or third by third), with
    the middle third's u and interval; `words` renames verdicts."""
    verdicts = [(words or {}).get(v, v) for v in rows["verdict"]]
    said = (f"{verdicts[0]} in every third" if len(set(verdicts)) == 1 else
            ", ".join(f"{v} in the {d.replace(' third', '')}" for d, v in zip(rows["depth"], verdicts)))
    middle = rows[rows["depth"] == "middle third"]
    if len(middle):
        r = middle.iloc[0]
        said += f" (middle: u = {_format(r.u, r.ci_low, r.ci_high)})"
    return said


def sense_sentence(senses: pd.DataFrame, factor: str, level: str) -> str:
    """A level's answer per sense of similarity, each sense's precise question with its verdicts over the thirds
    (the senses without a measure are left to the table); "" without a measured sense."""
    mine = senses[(senses["factor"] == factor) & (senses["level"] == level) & (senses["verdict"] != "not measured")
                  & senses["depth"].str.endswith("third")]
    words = AGAINST_IDENTITY if (factor, level) == SEEDS_ROW else None
    parts = [f"{SENSES[sense]} ({sense}): {_thirds_said(rows, words)}"
             for sense, rows in mine.groupby("sense", sort=False)]
    return f"In which sense: {'; '.join(parts)}." if parts else ""


def sense_answer(senses: pd.DataFrame, sense: str) -> str:
    """One sense's answer over the factor levels (the seed placebo and the seed row aside): the precise question
    and the verdicts over the thirds of each level measured in that sense in some third; "" where none is."""
    rows = senses[(senses["sense"] == sense) & senses["depth"].str.endswith("third")
                  & ~senses["factor"].isin([SEEDS_ROW[0], PLACEBO[0]])]
    parts = [f"{_level_words(factor, level)}: {_thirds_said(cells)}"
             for (factor, level), cells in rows.groupby(["factor", "level"], sort=False)
             if (cells["verdict"] != "not measured").any()]
    if not parts:
        return ""
    return (f"Does a change of one factor keep {SENSES[sense]} ({sense}; u = 1: as alike as another seed, 0: as the "
            f"floor)? " + "; ".join(parts) + ".")


def _level_words(factor: str, level: str) -> str:
    return f"{FACTOR_PHRASES.get(factor, factor)} {level}"


def controls_sentence(controls: pd.DataFrame) -> str:
    """What the artefact controls did to the verdicts: each changed verdict, or that none changed."""
    named = ", ".join(f"{r.control} ({r.measure}, {r.change})"
                      for r in controls.drop_duplicates("control").itertuples())
    changed = controls[controls["changed"]]
    text = f"Artefact controls ({named}): "
    if changed.empty:
        return text + f"none of their {len(controls)} verdicts differs from their twins' on the stored features."
    parts = [f"{r.control} on {FACTOR_PHRASES.get(r.factor, r.factor)} {r.level} in the {r.depth}: {r.verdict} "
             f"→ {r.control_verdict} ({_format(r.control_u, r.control_ci_low, r.control_ci_high)})"
             for r in changed.itertuples()]
    verb = "differs" if len(changed) == 1 else "differ"
    return text + f"{len(changed)} of {len(controls)} verdicts {verb} from their twins': " + "; ".join(parts) + "."


def convergence_sentence(claims: pd.DataFrame, lead: str) -> str:
    """How cross-seed similarity under the lead measure changes over training time, per third, with Spearman's ρ
    against the validation loss and against competence on the shared probe; "" without the claims."""
    mine = claims[(claims["measure"] == lead) & claims["depth"].str.endswith("third")]
    rises = mine[mine["statistic"] == "last minus first"]
    if rises.empty:
        return ""
    parts = [f"{_format(r.estimate, r.ci_low, r.ci_high)} in the {r.depth} ({r.verdict})" for r in rises.itertuples()]
    text = (f"Over training time (step {int(rises['first_step'].iloc[0])} to {int(rises['last_step'].iloc[0])}), "
            f"cross-seed similarity ({lead}) changes by {'; '.join(parts)}")
    for statistic, against in (("spearman_rho_loss", "the validation loss falling"),
                               ("spearman_rho_competence", "the shared probe's accuracy rising")):
        rhos = mine[mine["statistic"] == statistic]
        if not rhos.empty:
            text += f"; Spearman ρ with {against}: " + "; ".join(
                f"{_format(r.estimate, r.ci_low, r.ci_high)} in the {r.depth}" for r in rhos.itertuples())
    return text + "."


def statement(table: pd.DataFrame, claims: pd.DataFrame, study: Study,
              senses: pd.DataFrame | None = None, controls: pd.DataFrame | None = None) -> pd.DataFrame:
    """The study written out. First the answers (reprsim.design.senses.ANSWER_TOPICS, at most ten sentences): the
    resolution the seed placebo gives; how near to identical the seed siblings come in each sense; per sense of
    similarity, the question and each level's verdicts over the thirds; which artefact controls changed a verdict;
    convergence over training time. Then one quotable sentence per factor level: u with its interval in each third
    under the lead measure (the first grounded one in the configuration's order), in how many grounded measures each
    verdict holds, its verdicts per sense, its fit and competence; last, the measures that failed a grounding test,
    left out."""
    sentences = []
    headline = [label for label in study.measures if label in set(table.loc[table["headline"], "measure"])]
    lead = headline[0] if headline else None
    placebo = table[(table["factor"] == PLACEBO[0]) & (table["measure"] == lead) & table["depth"].str.endswith("third")]
    if lead is not None and not placebo.empty:
        half = float(np.nanmax((placebo["ci_high"] - placebo["ci_low"]) / 2))
        ends = ", ".join(f"[{r.ci_low:.2f}, {r.ci_high:.2f}] in the {r.depth}" for r in placebo.itertuples())
        text = (f"The seed placebo, each reference seed scored as a level against the others ({lead}; u = 1 by "
                f"construction), has seeds-and-rows intervals {ends}: with {len(study.reference)} reference seeds "
                f"and {len(study.floor)} floor models this study resolves u to about ±{half:.2f}")
        margin = study.margin
        text += (f", wider than the margin δ = {margin:g}: no level can be \"as similar as seeds\" within ±{margin:g}"
                 if half > margin else f", within the margin δ = {margin:g}") + "."
        sentences.append({"topic": PLACEBO[0], "level": PLACEBO[1], "text": text})
    seeds = sense_sentence(senses, *SEEDS_ROW) if senses is not None and len(senses) else ""
    if seeds:
        sentences.append({"topic": SEEDS_ROW[0], "level": SEEDS_ROW[1], "text": (
            f"Seed siblings of the reference recipe against identical copies (u = 1: identical, 0: the floor). "
            f"{seeds}")})
    for sense in SENSES if senses is not None and len(senses) else ():
        answer = sense_answer(senses, sense)
        if answer:
            sentences.append({"topic": "sense", "level": sense, "text": answer})
    if controls is not None and len(controls):
        sentences.append({"topic": "controls", "level": "", "text": controls_sentence(controls)})
    converging = convergence_sentence(claims, lead) if not claims.empty and lead is not None else ""
    if converging:
        sentences.append({"topic": "convergence", "level": "", "text": converging})
    for (factor, level), rows in table[table["factor"] != PLACEBO[0]].groupby(["factor", "level"], sort=False):
        thirds = rows[rows["depth"].str.endswith("third") & rows["headline"]]
        if lead is None or thirds.empty:
            continue
        mine = thirds[thirds["measure"] == lead].set_index("depth")
        shares = [f"{_format(r.u, r.ci_low, r.ci_high)} in the {depth}" if i == 0 else
                  f"{_format(r.u, r.ci_low, r.ci_high)} in the {depth.replace(' third', '')}"
                  for i, (depth, r) in enumerate(mine.iterrows())]
        shares = ", ".join(shares[:-1]) + f" and {shares[-1]}" if len(shares) > 1 else "".join(shares)
        count = int(rows["n_variant_models"].iloc[0])
        basis = (f"seeds and rows: {count} models, {len(study.reference)} reference seeds, {len(study.floor)} floor "
                 "models resampled" if rows["interval_basis"].iloc[0] == "seeds and rows"
                 else "rows only: one model, so the interval says nothing of other seeds of this recipe")
        if factor == "dimension":  # nothing learned differently: what the width alone does to the measure
            text = (f"The dimension placebo, the reference seeds reduced by {level} and scored as a level "
                    f"({rows['models'].iloc[0]}), keeps {shares} of the similarity seed siblings share ({lead}; 0 = "
                    f"the floor, 1 = another seed; {basis}): what the width alone does to this measure.")
        else:
            text = (f"Changing {FACTOR_PHRASES.get(factor, factor)} to {level} ({rows['models'].iloc[0]}) keeps "
                    f"{shares} of the similarity seed siblings share ({lead}; 0 = the floor, 1 = another seed; "
                    f"{basis}).")
        if "u_null_zero" in mine and mine["u_null_zero"].notna().any():
            text += (" With the shuffled-row chance level as zero instead of the untrained floor: "
                     + ", ".join(f"{_format(r.u_null_zero, r.u_null_zero_low, r.u_null_zero_high)}"
                                 for r in mine.itertuples()) + " (lower, middle, upper).")
        verdicts = []
        for depth, group in thirds.groupby("depth", sort=False):
            counts = group["verdict"].value_counts()
            verdicts.append(f"{depth.replace(' third', '')}: "
                            + ", ".join(f"{verdict} ({count})" for verdict, count in counts.items()))
        text += f" Under the {thirds['measure'].nunique()} grounded measures, {'; '.join(verdicts)}."
        if senses is not None and len(senses):
            by_sense = sense_sentence(senses, factor, level)
            text += f" {by_sense}" if by_sense else ""
        match = rows["competence_match"].iloc[0]
        if match:  # the level at the checkpoint nearest the reference's competence (or the note that it is final)
            text += f" Competence {match}."
        confound = rows["also_changes"].iloc[0]
        if confound:  # a declared confound (reprsim.design.relations.CONFOUNDS): the level is not one change
            text += (f" This level changes {confound} as well: its u is that of both changes together, not of the "
                     f"{FACTOR_PHRASES.get(factor, factor)} alone.")
        note = rows["quality_note"].iloc[0]
        if note.startswith(("better", "worse")):
            text += f" Its fit ({rows['quality_metric'].iloc[0]}) is {note}."
        first = rows.iloc[0]
        if np.isfinite(first["probe_accuracy"]):  # the shared yardstick: comparable across objectives and data
            text += (f" On the shared probe its best layer decodes the labels at {first['probe_accuracy']:.2f} (the "
                     f"seeds {first['probe_reference_low']:.2f}–{first['probe_reference_high']:.2f}, chance "
                     f"{first['probe_chance']:.2f}): {first['probe_note']}.")
        sentences.append({"topic": factor, "level": level, "text": text})
    left_out = table.loc[table["grounding_failed"] != "", ["measure", "grounding_failed"]].drop_duplicates()
    if not left_out.empty:
        sentences.append({"topic": "grounding", "level": "", "text": "Left out of these statements, having failed a "
                          "grounding test on these models: " + "; ".join(
                              f"{r.measure} ({r.grounding_failed})" for r in left_out.itertuples()) + "."})
    return pd.DataFrame(sentences, columns=["topic", "level", "text"])


def select(frame: pd.DataFrame, dataset: str, representation: str, measures: Sequence[str],
           models: Sequence[str]) -> pd.DataFrame:
    """The rows of a pair table (or its replicates) the study reads."""
    keep = (frame["dataset"] == dataset) & (frame["representation"] == representation) \
        & frame["measure"].isin(measures) & frame["model_a"].isin(models) & frame["model_b"].isin(models)
    return frame[keep]
