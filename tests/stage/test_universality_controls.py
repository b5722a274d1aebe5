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

from reprsim.stages.universality.study import Study, statement, universality_tables

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
