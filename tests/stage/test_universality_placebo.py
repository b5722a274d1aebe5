"""The dimension placebo (universality.dimension_placebo) on constructed representations whose answer is known:
reference seeds 128 wide share a signal, each with noise of its own. Every seed reduced to 64 dimensions (by the
library's reduction, as rule dimension_placebo reduces them) and scored as a level keeps what dimension alone keeps:
a random projection loses part of each seed's geometry and is never "more similar than seeds"; PCA keeps the
dominant directions, and shows the inflation of an SVCCA whose pca_dims is not below the reduced width (the review's
PWCCA at pca_dims 64 against a 64-wide level). The level's models, couples and fits are the study's own
(with_dimension_placebos)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from universality_study import pair_tables

from reprsim.design.dimension_placebo import dimension_placebos
from reprsim.design.relations import study_pairs
from reprsim.metrics.reduction import reduce_stack
from reprsim.stages.universality.statement import statement
from reprsim.stages.universality.study import Study, with_dimension_placebos
from reprsim.stages.universality.tables import universality_tables

N, D, LAYERS, RESAMPLES, NOISE = 300, 128, 2, 16, 0.7
REFERENCE, FLOOR = ["ref-s0", "ref-s1", "ref-s2"], ["floor-s9", "floor-s10"]
# the CCA family on 32 principal directions, below the narrowest width (config.study_dimension_warnings)
MEASURES = {"linear_cka": ("cka", {"kernel": "linear", "estimator": "biased"}), "procrustes": ("procrustes", {}),
            "svcca": ("svcca", {"pca_dims": 32}), "pwcca": ("pwcca", {"pca_dims": 32}),
            "mutual_knn": ("mutual_knn", {"k": 10}),
            # not below the placebo's width: its 64 columns enter whole, the seeds' 128 are cut to 64 directions
            "svcca_64": ("svcca", {"pca_dims": 64})}


def _model(signal: np.ndarray, rng: np.random.Generator, shared: bool = True) -> np.ndarray:
    out = [(signal[layer] if shared else rng.normal(size=(N, D)) * SCALES) + NOISE * rng.normal(size=(N, D))
           for layer in range(LAYERS + 1)]
    return np.stack(out).astype(np.float32)


SCALES = np.geomspace(3.0, 0.3, D)  # a decaying spectrum, as in trained layers: PCA's top directions matter


@pytest.fixture(scope="module")
def study_tables():
    rng = np.random.default_rng(7)
    signal = rng.normal(size=(LAYERS + 1, N, D)) * SCALES
    models = {name: _model(signal, rng) for name in REFERENCE}
    models.update({name: _model(signal, rng, shared=False) for name in FLOOR})
    specs = {name: {"source": "pretrain", "config": {"n_embd": D}, "seed": int(name.rsplit("s", 1)[1])}
             for name in models}
    study_config = {"reference": REFERENCE, "floor": FLOOR, "factors": {},
                    "dimension_placebo": {"methods": ["random", "pca"], "widths": [64], "seed": 0}}
    placebos = dimension_placebos(specs, study_config)
    assert [p.job for p in placebos] == ["random64", "pca64"]
    for placebo in placebos:
        for seed, name in placebo.names.items():
            reduced = reduce_stack(torch.from_numpy(models[seed].astype(np.float64)), placebo.method, placebo.dims)
            models[name] = reduced.numpy().astype(np.float32)
    factors, specs, _ = with_dimension_placebos({}, specs, {}, [(p.level, p.names) for p in placebos])
    pairs = study_pairs(specs, {**study_config, "factors": factors})
    table, replicates = pair_tables(models, pairs, MEASURES, resamples=RESAMPLES)
    study = Study(reference=REFERENCE, floor=FLOOR, factors=factors, margin=0.1, confidence=0.95, specs=specs,
                  measures={label: name for label, (name, _) in MEASURES.items()},
                  params={label: params for label, (_, params) in MEASURES.items()})
    tables = universality_tables(table, replicates, study, metas={})
    return study, tables


def test_the_placebo_levels_are_the_reduced_seeds_against_the_other_seeds(study_tables):
    _, tables = study_tables
    placebo = tables.universality[tables.universality["factor"] == "dimension"]
    assert set(placebo["level"]) == {"a random projection to 64 dims", "PCA to 64 dims"}
    assert (placebo["n_variant_models"] == 3).all() and (placebo["n_variant_pairs"] == 6).all()  # never own seed
    assert (placebo["interval_basis"] == "seeds and rows").all()


def test_a_random_64_dimensional_projection_is_not_more_similar_than_seeds(study_tables):
    _, tables = study_tables
    thirds = tables.universality[tables.universality["depth"].str.endswith("third")]
    random = thirds[thirds["level"] == "a random projection to 64 dims"]
    assert len(random) == len(MEASURES) * 3
    assert not (random["verdict"] == "more similar than seeds").any(), \
        random[["measure", "depth", "u", "ci_low", "ci_high", "verdict"]].to_string()
    # half the dimensions at random keep part of each seed's geometry, never more than all of it
    assert (random["u"] < 1).all(), random[["measure", "depth", "u"]].to_string()
    senses = tables.senses[(tables.senses["level"] == "a random projection to 64 dims")
                           & (tables.senses["verdict"] != "not measured")]
    assert len(senses) and not (senses["verdict"] == "more similar than seeds").any()


def test_the_statement_says_what_dimension_alone_does(study_tables):
    study, tables = study_tables
    sentences = statement(tables.universality, tables.claims, study, tables.senses)
    said = sentences[sentences["topic"] == "dimension"]
    assert len(said) == 2
    text = said.set_index("level").loc["a random projection to 64 dims", "text"]
    assert text.startswith("The dimension placebo, the reference seeds reduced by a random projection to 64 dims")
    assert "what the width alone does to this measure" in text


def test_pca_dims_not_below_the_width_inflates_the_placebo_and_below_it_does_not(study_tables):
    """PCA to 64 dims keeps the seeds' shared directions: an SVCCA that treats the placebo and the seeds alike (32
    directions each) finds it as similar as another seed, its interval around 1; at pca_dims 64 the placebo enters
    whole while the seeds are cut, and u's interval lies above 1 (inside the margin: the verdict alone hides it)."""
    _, tables = study_tables
    pca = tables.universality[(tables.universality["level"] == "PCA to 64 dims")
                              & tables.universality["depth"].str.endswith("third")].set_index(["measure", "depth"])
    for third in ("lower third", "middle third", "upper third"):
        fair, unfair = pca.loc[("svcca", third)], pca.loc[("svcca_64", third)]
        assert fair["ci_low"] <= 1 <= fair["ci_high"], fair[["u", "ci_low", "ci_high"]].tolist()
        assert unfair["ci_low"] > 1, unfair[["u", "ci_low", "ci_high"]].tolist()
