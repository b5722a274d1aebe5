"""The universality study per sense of similarity (reprsim.design.senses): factor level × sense × third, u pooled over
the sense's grounded measures; the functional sense's u from the stitching penalty; the seed siblings against
identical copies."""

from __future__ import annotations

from typing import Mapping, NamedTuple

import numpy as np
import pandas as pd

from reprsim.design.relations import cross_seed
from reprsim.design.senses import SEEDS_ROW, SENSES
from reprsim.stages.universality.draws import _under_draws
from reprsim.stages.universality.shares import Term, Terms, pooled, share, stitch_arrays, term
from reprsim.stages.universality.study import Study

SENSE_COLUMNS = ["dataset", "representation", "factor", "level", "models", "sense", "question", "depth", "u", "ci_low",
                 "ci_high", "interval_basis", "verdict", "margin", "measures", "n_measures", "left_out", "n", "m"]
FUNCTION_UNMEASURED = "no stitching into the reference in this study: set universality.function"
FUNCTION_MEASURE = "stitching penalty"  # the functional sense's "measure" in the sense table


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
