"""Artefact controls in the universality study on constructed representations whose answer is known: every trained
model (the reference seeds and the level) carries one rogue unit of large variance driven by the same inputs, which
untrained models (the floor) lack; the level shares nothing else with the reference. Linear CKA on the stored
features is carried by the rogue unit and finds the level as similar as seeds; with the top principal direction
removed (the control) it finds the level no more similar than the floor. The controls table and the statement say that the control
changed the verdict, and the control stays out of the senses' pools and of the grounding's left-out list."""

from __future__ import annotations

import numpy as np
import pytest
from universality_study import pair_tables

from reprsim.stages.universality.statement import statement
from reprsim.stages.universality.study import Study
from reprsim.stages.universality.tables import universality_tables

N, D, LAYERS, RESAMPLES, NOISE, ROGUE = 400, 8, 2, 20, 0.5, 12.0
MEASURES = {"linear_cka": ("cka", {"kernel": "linear", "estimator": "biased"}),
            "linear_cka_pcs": ("cka", {"kernel": "linear", "estimator": "biased"}, "remove_top_pcs"),
            "procrustes": ("procrustes", {})}


def _model(signal: np.ndarray, rogue: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """(LAYERS + 1, N, D): each layer `signal` plus this model's own noise; the rogue unit (unit 0) added when given."""
    out = []
    for layer in range(LAYERS + 1):
        x = signal[layer] + NOISE * rng.normal(size=(N, D))
        if rogue is not None:
            x[:, 0] += ROGUE * rogue
        out.append(x)
    return np.stack(out).astype(np.float32)


@pytest.fixture(scope="module")
def tables():
    rng = np.random.default_rng(3)
    shared = rng.normal(size=(LAYERS + 1, N, D))
    rogue = rng.normal(size=N)  # one input-driven direction every trained model shares
    models = {f"ref-s{s}": _model(shared, rogue, rng) for s in range(3)}
    models |= {f"rogue-s{s}": _model(rng.normal(size=(LAYERS + 1, N, D)), rogue, rng) for s in (3, 4, 5)}
    models |= {f"floor-s{s}": _model(rng.normal(size=(LAYERS + 1, N, D)), None, rng) for s in (9, 10)}
    names = sorted(models)
    pairs, replicates = pair_tables(models, [(a, b) for i, a in enumerate(names) for b in names[i + 1:]], MEASURES,
                                    resamples=RESAMPLES)
    specs = {name: {"source": "init", "seed": int(name.rsplit("s", 1)[1])} for name in models}
    study = Study(reference=["ref-s0", "ref-s1", "ref-s2"], floor=["floor-s9", "floor-s10"],
                  factors={"data": {"rogue only": ["rogue-s3", "rogue-s4", "rogue-s5"]}}, margin=0.1,
                  confidence=0.95, specs=specs, measures={label: name for label, (name, *_) in MEASURES.items()},
                  params={label: params for label, (_, params, *_) in MEASURES.items()},
                  conditionings={"linear_cka_pcs": "remove_top_pcs"})
    return study, universality_tables(pairs, replicates, study, metas={})


def test_the_control_is_read_against_its_twin_in_every_level_and_third(tables):
    study, result = tables
    assert study.twin("linear_cka_pcs") == "linear_cka" and study.twin("linear_cka") is None
    controls = result.controls
    assert set(controls["control"]) == {"linear_cka_pcs"} and set(controls["measure"]) == {"linear_cka"}
    assert set(controls["conditioning"]) == {"remove_top_pcs k=1"}
    assert len(controls) == 2 * 3  # the placebo and the level, three thirds each
    table = result.universality.set_index(["measure", "factor", "level", "depth"])
    for row in controls.itertuples():  # each side is the universality table's own cell
        assert row.u == table.loc[("linear_cka", row.factor, row.level, row.depth), "u"]
        assert row.control_u == table.loc[("linear_cka_pcs", row.factor, row.level, row.depth), "u"]
        assert row.changed == (row.verdict != row.control_verdict)


def test_removing_the_rogue_direction_changes_the_verdict_it_carried(tables):
    _, result = tables
    level = result.controls[result.controls["level"] == "rogue only"]
    assert (level["verdict"] == "as similar as seeds").all(), level[["depth", "u", "ci_low", "ci_high"]]
    assert (level["control_verdict"] == "no more similar than the floor").all(), level[["depth", "control_u", "control_ci_low",
                                                                       "control_ci_high"]]
    assert level["changed"].all()
    placebo = result.controls[result.controls["factor"] == "placebo"]
    assert not placebo["changed"].any()


def test_the_statement_names_the_changed_verdicts_and_the_control_stays_out_of_pools_and_failures(tables):
    study, result = tables
    sentences = statement(result.universality, result.claims, study, result.senses, result.controls)
    said = dict(zip(sentences["topic"], sentences["text"]))
    assert "3 of 6 verdicts differ" in said["controls"]
    assert "linear_cka_pcs on training data rogue only in the middle third: as similar as seeds → no more similar " \
        "than the floor" in said["controls"]
    assert "grounding" not in said  # no measure failed a grounding test: the control is not named there
    assert not any("linear_cka_pcs" in value for value in result.senses["measures"])
    rows = result.universality[result.universality["measure"] == "linear_cka_pcs"]
    assert not rows["headline"].any() and (rows["grounding_failed"] == "").all()
    assert (rows["conditioning"] == "remove_top_pcs k=1").all()
    # the lead measure and the verdict counts read the measures on the stored features only
    level = said["data"]
    assert "(linear_cka;" in level and "2 grounded measures" in level


def test_a_second_configuration_that_changes_only_a_swept_parameter_is_a_control_of_the_first():
    """A k sweep (and a pca_dims or threshold one) by configuration: the measure again with one of those changed is
    read against the first configuration; a change of any other parameter, or of two, makes a measure of its own."""
    study = Study(reference=["a"], floor=["b"], factors={}, margin=0.1, confidence=0.95, specs={},
                  measures={"knn": "mutual_knn", "knn_k40": "mutual_knn", "knn_k80": "mutual_knn",
                            "svcca": "svcca", "svcca_16": "svcca", "svcca_both": "svcca", "cka": "cka",
                            "cka_unbiased": "cka", "knn_clip": "mutual_knn"},
                  params={"knn": {"k": 10}, "knn_k40": {"k": 40}, "knn_k80": {"k": 80}, "svcca": {"pca_dims": 32},
                          "svcca_16": {"pca_dims": 16}, "svcca_both": {"pca_dims": 16, "threshold": 0.9},
                          "cka": {"estimator": "biased"}, "cka_unbiased": {"estimator": "unbiased"},
                          "knn_clip": {"k": 10}},
                  conditionings={"knn_clip": "clip"})
    assert {label: study.twin(label) for label in study.measures} == {
        "knn": None, "knn_k40": "knn", "knn_k80": "knn", "svcca": None, "svcca_16": "svcca", "svcca_both": None,
        "cka": None, "cka_unbiased": None, "knn_clip": "knn"}
    assert study.control("knn_k40") == "k 10 → 40" and study.control("svcca_16") == "pca_dims 32 → 16"
    assert study.control("knn_clip") == "features conditioned by clip q=0.95" and study.control("knn") == ""
    assert study.sense("knn_k80") is None and study.sense("svcca_both") is not None  # a control is in no pool


@pytest.fixture(scope="module")
def swept_tables():
    rng = np.random.default_rng(5)
    shared = rng.normal(size=(LAYERS + 1, N, D))
    models = {f"ref-s{s}": _model(shared, None, rng) for s in range(3)}
    models |= {f"half-s{s}": _model(0.5 * shared + 0.9 * rng.normal(size=shared.shape), None, rng) for s in (3, 4)}
    models |= {f"floor-s{s}": _model(rng.normal(size=(LAYERS + 1, N, D)), None, rng) for s in (9, 10)}
    measures = {"knn": ("mutual_knn", {"k": 10}), "knn_k40": ("mutual_knn", {"k": 40})}
    names = sorted(models)
    pairs, replicates = pair_tables(models, [(a, b) for i, a in enumerate(names) for b in names[i + 1:]], measures,
                                    resamples=RESAMPLES)
    specs = {name: {"source": "init", "seed": int(name.rsplit("s", 1)[1])} for name in models}
    study = Study(reference=["ref-s0", "ref-s1", "ref-s2"], floor=["floor-s9", "floor-s10"],
                  factors={"data": {"half": ["half-s3", "half-s4"]}}, margin=0.1, confidence=0.95, specs=specs,
                  measures={label: name for label, (name, _) in measures.items()},
                  params={label: params for label, (_, params) in measures.items()})
    return study, universality_tables(pairs, replicates, study, metas={})


def test_a_k_sweep_is_read_against_its_first_k_in_every_level_and_third(swept_tables):
    study, result = swept_tables
    controls = result.controls
    assert set(zip(controls["control"], controls["measure"], controls["change"])) == {("knn_k40", "knn", "k 10 → 40")}
    assert len(controls) == 2 * 3 and (controls["changed"] == (controls["verdict"] != controls["control_verdict"])).all()
    rows = result.universality[result.universality["measure"] == "knn_k40"]
    assert not rows["headline"].any() and (rows["control"] == "k 10 → 40").all()
    assert not any("knn_k40" in value for value in result.senses["measures"])
    sentences = statement(result.universality, result.claims, study, result.senses, controls)
    said = dict(zip(sentences["topic"], sentences["text"]))
    assert said["controls"].startswith("Artefact controls (knn_k40 (knn, k 10 → 40)): ")
