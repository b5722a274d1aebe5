"""The universality stage's arithmetic on synthetic representations with known answers (numerics.md §13c): a
variant that is an orthogonal map of the shared signal plus a seed's own noise keeps u ≈ 1 under rotation-invariant
measures, one of fresh noise u ≈ 0; verdicts at and across the margin; every term on the same rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from universality_study import pair_tables

from reprsim.relations import study_errors, study_pairs
from reprsim.stages.universality.shares import check_same_rows, verdict
from reprsim.stages.universality.study import Study, statement, universality_tables

N, D, LAYERS, RESAMPLES = 240, 12, 3, 20


def _layers(signal: np.ndarray, rng: np.random.Generator, fresh: bool = False) -> np.ndarray:
    """(LAYERS + 1, N, D): layer l carries the shared signal through a random orthogonal map plus this model's own
    noise (a model of `fresh` noise carries no signal)."""
    out = []
    for layer in range(LAYERS + 1):
        rotation = np.linalg.qr(rng.normal(size=(D, D)))[0]
        base = rng.normal(size=(N, D)) if fresh else signal[layer] @ rotation
        out.append(base + 0.6 * rng.normal(size=(N, D)))
    return np.stack(out).astype(np.float32)


def _tables(models: dict[str, np.ndarray], measures: dict[str, tuple[str, dict]], rows=None):
    """Every pair's table and replicates, each model with itself too."""
    names = sorted(models)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i:]]
    return pair_tables(models, pairs, measures, resamples=RESAMPLES, rows=rows)


@pytest.fixture(scope="module")
def synthetic():
    rng = np.random.default_rng(0)
    signal = rng.normal(size=(LAYERS + 1, N, D))
    models = {f"ref-s{s}": _layers(signal, rng) for s in range(3)}
    models["same-s3"] = _layers(signal, rng)  # an orthogonal map of the signal plus a seed's own noise
    models["noise-s4"] = _layers(signal, rng, fresh=True)
    models["floor-s9"] = _layers(signal, rng, fresh=True)
    specs = {name: {"source": "init", "seed": int(name.rsplit("s", 1)[1])} for name in models}
    for name in ("same-s3", "noise-s4"):
        specs[name]["config"] = {"n_embd": 24}
    measures = {"linear_cka": ("cka", {"kernel": "linear", "estimator": "biased"}),
                "procrustes": ("procrustes", {})}
    pairs, replicates = _tables(models, measures)
    study = Study(reference=["ref-s0", "ref-s1", "ref-s2"], floor=["floor-s9"],
                  factors={"width": {"rotated": ["same-s3"], "noise": ["noise-s4"]}}, margin=0.1, confidence=0.95,
                  specs=specs, measures={"linear_cka": "cka", "procrustes": "procrustes"})
    return pairs, replicates, study, models, measures


def test_a_rotated_copy_with_a_seeds_own_noise_keeps_u_near_one_and_fresh_noise_near_zero(synthetic):
    pairs, replicates, study, _, _ = synthetic
    table, _, _ = universality_tables(pairs, replicates, study, metas={})
    thirds = table[table["depth"].str.endswith("third")]
    rotated = thirds[thirds["level"] == "rotated"]
    noise = thirds[thirds["level"] == "noise"]
    assert np.allclose(rotated["u"], 1, atol=0.12), rotated[["measure", "depth", "u"]]
    assert np.allclose(noise["u"], 0, atol=0.12), noise[["measure", "depth", "u"]]
    assert (noise["verdict"] == "no more similar than the floor").all()
    assert (rotated["ci_low"] <= rotated["u"]).all() and (rotated["u"] <= rotated["ci_high"]).all()
    assert set(table["depth"]) == {"lower third", "middle third", "upper third", *(f"layer {l}" for l in range(4))}
    assert (table["n"] == N).all() and (table["n_seed_pairs"] == 3).all() and (table["n_variant_pairs"] == 3).all()
    sentences = statement(table, pd.DataFrame(), study)
    assert sentences["text"].str.contains("keeps").all()


@pytest.mark.parametrize("low, high, expected", [
    (0.9, 1.1, "as similar as seeds"),  # at the margin's ends
    (0.89, 1.05, "inconclusive"),  # across 1 − δ
    (0.5, 0.899, "less similar"),
    (-0.05, 0.3, "no more similar than the floor"),  # contains 0
    (0.01, 0.099, "no more similar than the floor"),  # below δ
    (0.01, 0.1, "less similar"),  # reaches δ, clear of 0
    (1.11, 1.3, "more similar than seeds"),
    (np.nan, 1.0, "undefined"),
])
def test_verdicts_at_and_across_each_margin(low, high, expected):
    assert verdict(low, high, 0.1) == expected


def test_terms_on_different_rows_are_refused(synthetic):
    _, _, study, models, measures = synthetic
    pairs, replicates = _tables({k: models[k] for k in ("ref-s0", "ref-s1")}, {"linear_cka": measures["linear_cka"]},
                                rows={("ref-s0", "ref-s1"): N - 40})
    with pytest.raises(ValueError, match="different rows"):
        check_same_rows(pairs, replicates, "measure 'linear_cka'")


def test_a_variant_differing_in_two_factors_is_refused_naming_both():
    base = {"source": "pretrain", "dataset": "sst2", "tokenizer": "floor", "config": {"n_embd": 64, "n_layer": 2},
            "steps": 100}
    specs = {"floor": {"source": "init", "tokenizer": {"train": {"dataset": "sst2"}}, "seed": 9},
             "r0": {**base, "seed": 0}, "r1": {**base, "seed": 1},
             "wide": {**base, "config": {"n_embd": 128, "n_layer": 2}, "seed": 2},
             "wide_deep": {**base, "config": {"n_embd": 128, "n_layer": 3}, "learning_rate": 1e-3, "seed": 3}}
    study = {"reference": ["r0", "r1"], "floor": ["floor"],
             "factors": {"width": {"128": ["wide"], "128 and deeper": ["wide_deep"]}}}
    problems = study_errors(specs, study)
    assert len(problems) == 1
    assert "wide_deep" in problems[0] and "config.n_layer (depth" in problems[0] and "learning_rate" in problems[0]
    assert ("r0", "wide") in study_pairs(specs, study) and ("r1", "r0") not in study_pairs(specs, study)
