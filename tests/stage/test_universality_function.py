"""The functional sense of the universality study (docs/numerics.md §13c): u from the stitching penalty, on
constructed stitch tables whose answer is known. Every row's penalty is a couple's true penalty plus a row effect
shared by every couple (the same evaluation blocks in every job) and the couple's own noise: the reference seeds'
layers stand in for each other at a penalty of 0.4, the floor's at 1.0, a level's at 0.7, each seed for itself at 0;
so the level's recipe keeps u = (1.0 − 0.7) / (1.0 − 0.4) = 0.5 of what seeds share, and the seeds (1.0 − 0.4) /
(1.0 − 0) = 0.6 of what identical copies share. Each model sits a little off its recipe's penalty (its seed), so the
intervals are checked against these models' own u, and the recipe's within the seed spread."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from universality_study import pair_tables

from reprsim.design.relations import cross_seed
from reprsim.design.senses import SEEDS_ROW
from reprsim.inference.resampling import half_samples
from reprsim.stages.stitch.pairs import layer_pairs
from reprsim.stages.universality.sense_table import FUNCTION_MEASURE, FUNCTION_UNMEASURED
from reprsim.stages.universality.shares import share, stitch_arrays, term
from reprsim.stages.universality.study import Study
from reprsim.stages.universality.tables import universality_tables

N_ROWS, RESAMPLES, DEPTH = 300, 20, 2
REFERENCE, FLOOR, LEVEL = ["ref-s0", "ref-s1", "ref-s2"], ["floor-s9", "floor-s10"], ["wide-s3", "wide-s4", "wide-s5"]
PENALTY = {"seeds": 0.4, "floor": 1.0, "level": 0.7, "self": 0.0}
LEFT_OUT = {"objective/masked": "masked-s3 is a masked LM: next-token stitching would let its bidirectional "
                                "attention see the token it predicts"}


def _specs() -> dict[str, dict]:
    names = [*REFERENCE, *FLOOR, *LEVEL, "masked-s3"]
    return {name: {"source": "init" if name in FLOOR else "pretrain", "seed": int(name.rsplit("s", 1)[1])}
            for name in names}


def _role(bottom: str, top: str) -> str:
    return "self" if bottom == top else "floor" if bottom in FLOOR else "level" if bottom in LEVEL else "seeds"


def _couples(specs) -> dict[str, list[tuple[str, str]]]:
    return {"seeds": cross_seed(specs, REFERENCE, REFERENCE), "self": [(r, r) for r in REFERENCE],
            "floor": cross_seed(specs, FLOOR, REFERENCE), "level": cross_seed(specs, LEVEL, REFERENCE)}


def stitch_tables(specs, offset: dict[str, float], rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tables and replicates as the stitch jobs write them (one map, one seed, next-token loss): per-row penalties,
    their mean, and each half-sample's mean; each bottom model `offset` off its role's penalty."""
    couples = [couple for group in _couples(specs).values() for couple in group]
    rows_effect = 0.3 * rng.normal(size=N_ROWS)  # the same blocks in every job: a shared row effect
    subsets = half_samples(N_ROWS, RESAMPLES, seed=0)
    table, reps = [], []
    for bottom, top in couples:
        truth = PENALTY[_role(bottom, top)] + (offset[bottom] if bottom != top else 0.0)
        for layer_a, layer_b in layer_pairs("reference", DEPTH, DEPTH):
            per_row = truth + rows_effect * (bottom != top) + 0.1 * rng.normal(size=N_ROWS) * (bottom != top)
            common = {"model_a": bottom, "model_b": top, "layer_a": layer_a, "layer_b": layer_b,
                      "metric": "cross_entropy"}
            table.append({**common, "objective": "language_modeling", "penalty": float(per_row.mean()),
                          "n_layers_a": DEPTH, "n_layers_b": DEPTH, "n": N_ROWS})
            reps += [{**common, "replicate": r, "penalty": float(per_row[rows].mean()), "n": N_ROWS,
                      "m": subsets.shape[1]} for r, rows in enumerate(subsets)]
    return pd.DataFrame(table), pd.DataFrame(reps)


def _models_u(specs, offset) -> tuple[float, float]:
    """(the level's u, the seeds' u against identical copies) of these models, row noise aside."""
    mean = {role: np.mean([PENALTY[role] + (offset[b] if b != t else 0.0) for b, t in couples])
            for role, couples in _couples(specs).items()}
    return ((mean["floor"] - mean["level"]) / (mean["floor"] - mean["seeds"]),
            (mean["floor"] - mean["seeds"]) / (mean["floor"] - mean["self"]))


@pytest.fixture(scope="module")
def study():
    """(the sense table, these models' level u, their seeds' u against identical copies)."""
    rng = np.random.default_rng(3)
    specs = _specs()
    offset = {name: 0.02 * rng.normal() for name in specs}
    # one measure's pair tables, which every study reads: the models' layers at random (the function sense is
    # the stitching's alone)
    models = {name: rng.normal(size=(DEPTH + 1, 60, 4)).astype(np.float32) for name in specs}
    names = sorted(models)
    pairs, replicates = pair_tables(models, [(a, b) for i, a in enumerate(names) for b in names[i + 1:]],
                                    {"linear_cka": ("cka", {"kernel": "linear", "estimator": "biased"})},
                                    resamples=RESAMPLES)
    study = Study(reference=REFERENCE, floor=FLOOR, factors={"width": {"wide": LEVEL},
                                                             "objective": {"masked": ["masked-s3"]}},
                  margin=0.1, confidence=0.95, specs=specs, measures={"linear_cka": "cka"},
                  params={"linear_cka": {"kernel": "linear", "estimator": "biased"}})
    senses = universality_tables(pairs, replicates, study, metas={}, function=stitch_tables(specs, offset, rng),
                                 function_left_out=LEFT_OUT).senses
    return senses, *_models_u(specs, offset)


def _cells(senses, factor, level):
    mine = senses[(senses["sense"] == "function") & (senses["factor"] == factor) & (senses["level"] == level)]
    return mine.set_index("depth")


def test_the_level_keeps_half_of_the_seeds_functional_similarity(study):
    senses, level_u, _ = study
    cells = _cells(senses, "width", "wide")
    assert len(cells) == 3 and (cells["measures"] == FUNCTION_MEASURE).all()
    assert (cells["n"] == N_ROWS).all() and level_u == pytest.approx(0.5, abs=0.05)
    for depth, cell in cells.iterrows():
        assert cell["ci_low"] <= level_u <= cell["ci_high"], (depth, level_u, cell["ci_low"], cell["ci_high"])
        assert cell["verdict"] == "less similar" and cell["interval_basis"] == "seeds and rows"


def test_the_seeds_come_three_fifths_of_the_way_to_identical_copies(study):
    senses, _, seeds_u = study
    assert seeds_u == pytest.approx(0.6, abs=0.05)
    for depth, cell in _cells(senses, *SEEDS_ROW).iterrows():
        assert cell["ci_low"] <= seeds_u <= cell["ci_high"], (depth, seeds_u, cell["ci_low"], cell["ci_high"])
        assert cell["verdict"] == "less similar"


def test_the_seed_placebo_is_one_in_the_functional_sense(study):
    cells = _cells(study[0], "placebo", "another reference seed")
    assert np.allclose(cells["u"], 1.0) and ((cells["ci_low"] < 1) & (cells["ci_high"] > 1)).all()


def test_a_level_left_out_of_the_stitching_says_why(study):
    cells = _cells(study[0], "objective", "masked")
    assert (cells["verdict"] == "not measured").all() and cells["u"].isna().all()
    assert (cells["left_out"] == LEFT_OUT["objective/masked"]).all()


def test_without_stitching_the_functional_sense_is_not_measured():
    rng = np.random.default_rng(4)
    specs = _specs()
    models = {name: rng.normal(size=(DEPTH + 1, 60, 4)).astype(np.float32) for name in [*REFERENCE, *FLOOR]}
    names = sorted(models)
    pairs, replicates = pair_tables(models, [(a, b) for i, a in enumerate(names) for b in names[i + 1:]],
                                    {"linear_cka": ("cka", {"kernel": "linear", "estimator": "biased"})},
                                    resamples=RESAMPLES)
    study = Study(reference=REFERENCE, floor=FLOOR, factors={}, margin=0.1, confidence=0.95, specs=specs,
                  measures={"linear_cka": "cka"})
    senses = universality_tables(pairs, replicates, study, metas={}).senses
    function = senses[senses["sense"] == "function"]
    assert len(function) and (function["verdict"] == "not measured").all()
    assert (function["left_out"] == FUNCTION_UNMEASURED).all()


def test_the_rows_interval_of_the_functional_u_covers_these_models_u_at_its_level():
    """Over 200 draws of the evaluation rows (the models fixed), the rows-only interval of the level's u, over all
    reference layers, holds these models' u about 95 % of the time (Monte Carlo standard error 1.5 %)."""
    specs, rng = _specs(), np.random.default_rng(5)
    offset = {name: 0.02 * rng.normal() for name in specs}
    truth, _ = _models_u(specs, offset)
    couples = _couples(specs)
    covered = []
    for draw in range(200):
        arrays, depths = stitch_arrays(*stitch_tables(specs, offset, np.random.default_rng([7, draw])))
        seeds, floor, level = (term(arrays, couples[role], depths, DEPTH).mean() for role in ("seeds", "floor", "level"))
        row = share(level, seeds, floor, np.arange(DEPTH + 1), arrays.n, arrays.m, confidence=0.95, margin=0.1)
        covered.append(row["rows_ci_low"] <= truth <= row["rows_ci_high"])
    assert 0.9 <= np.mean(covered) <= 0.99, np.mean(covered)
