"""Competence on one yardstick (reprsim.stages.grounding.competence, rule competence_probe): a linear probe of the
labels, nested-cross-validated on the compared rows. A label carried by one unit is decoded; labels independent of
the rows are decoded at chance, within the interval; rows that only identify themselves (a probe that saw a row
could recall its label) score chance, because no row is scored by a probe that saw it. The study puts each level's
competence beside the seeds' range and the chance level, and its sentence says it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from universality_study import pair_tables

from reprsim.stages.grounding.competence import best_layers, held_out_correct
from reprsim.stages.universality.statement import statement
from reprsim.stages.universality.study import Study
from reprsim.stages.universality.tables import universality_tables


def _accuracy_interval(correct: np.ndarray) -> tuple[float, float]:
    half = 1.96 * correct.std(ddof=1) / np.sqrt(len(correct))
    return correct.mean() - half, correct.mean() + half


def test_a_label_carried_by_one_unit_is_decoded_and_independent_labels_are_at_chance():
    rng = np.random.default_rng(0)
    y = rng.integers(2, size=240)
    X = rng.normal(size=(240, 6))
    X[:, 2] += 3.0 * (2 * y - 1)
    correct, chosen = held_out_correct(X, y, 2, seed=0)
    assert correct.mean() > 0.95 and len(chosen) == 5
    noise = rng.normal(size=(240, 6))
    low, high = _accuracy_interval(held_out_correct(noise, y, 2, seed=0)[0])
    chance = np.bincount(y).max() / len(y)
    assert low <= chance <= high or low <= 0.5 <= high


def test_no_row_is_scored_by_a_probe_that_saw_it():
    """Each row's own indicator unit: a probe fitted on the row recalls its label perfectly, one that never saw it
    has nothing to go on (its unit is 0 on every row it was fitted on)."""
    rng = np.random.default_rng(1)
    y = rng.integers(2, size=120)
    correct, _ = held_out_correct(np.eye(120), y, 2, seed=0)
    low, high = _accuracy_interval(correct.astype(float))
    assert high < 0.75 and correct.mean() < 0.7


def test_best_layers_takes_each_models_best_decoding_layer():
    table = pd.DataFrame({"model": ["a", "a", "a", "b", "b"], "layer": [1, 2, 3, 1, 2],
                          "accuracy": [0.6, 0.8, 0.8, 0.7, 0.5], "chance": 0.5})
    best = best_layers(table)
    assert best.loc["a", "layer"] == 2 and best.loc["a", "accuracy"] == 0.8 and best.loc["b", "layer"] == 1


def test_the_study_puts_each_levels_competence_beside_the_seeds_and_says_it():
    rng = np.random.default_rng(2)
    shared = rng.normal(size=(3, 200, 6))
    models = {name: (shared + 0.5 * rng.normal(size=shared.shape)).astype(np.float32)
              for name in ("ref-s0", "ref-s1", "ref-s2", "level-s3", "level-s4")}
    models |= {name: rng.normal(size=shared.shape).astype(np.float32) for name in ("floor-s9", "floor-s10")}
    names = sorted(models)
    measures = {"linear_cka": ("cka", {"kernel": "linear", "estimator": "biased"})}
    pairs, replicates = pair_tables(models, [(a, b) for i, a in enumerate(names) for b in names[i + 1:]], measures,
                                    resamples=12)
    specs = {name: {"source": "init", "seed": int(name.rsplit("s", 1)[1])} for name in models}
    study = Study(reference=["ref-s0", "ref-s1", "ref-s2"], floor=["floor-s9", "floor-s10"],
                  factors={"data": {"other": ["level-s3", "level-s4"]}}, margin=0.1, confidence=0.95, specs=specs,
                  measures={"linear_cka": "cka"})
    accuracy = {"ref-s0": 0.80, "ref-s1": 0.82, "ref-s2": 0.84, "level-s3": 0.70, "level-s4": 0.72,
                "floor-s9": 0.55, "floor-s10": 0.56}
    competence = {model: {"accuracy": value, "chance": 0.51, "layer": 2} for model, value in accuracy.items()}
    tables = universality_tables(pairs, replicates, study, metas={}, competence=competence)
    level = tables.universality[tables.universality["level"] == "other"].iloc[0]
    assert level["probe_accuracy"] == pytest.approx(0.71) and level["probe_chance"] == 0.51
    assert (level["probe_reference_low"], level["probe_reference_high"]) == (0.80, 0.84)
    assert level["probe_note"] == "worse than every seed sibling"
    sentences = statement(tables.universality, tables.claims, study, tables.senses)
    said = sentences.set_index("topic").loc["data", "text"]
    assert ("On the shared probe its best layer decodes the labels at 0.71 (the seeds 0.80–0.84, chance 0.51): "
            "worse than every seed sibling.") in said
    # a level outside the seeds' range by less than the probe's own interval is within their spread
    close = {**competence, **{m: {**competence[m], "accuracy": 0.79, "ci_low": 0.75, "ci_high": 0.83}
                              for m in ("level-s3", "level-s4")}}
    level = universality_tables(pairs, replicates, study, metas={}, competence=close).universality
    assert level.loc[level["level"] == "other", "probe_note"].iloc[0] == (
        "within the seed siblings' spread (outside their range by less than the probe's ±0.040 over rows)")
    unprobed = universality_tables(pairs, replicates, study, metas={})
    assert unprobed.universality["probe_accuracy"].isna().all()
    assert (unprobed.universality["probe_note"] == "not probed").all()
