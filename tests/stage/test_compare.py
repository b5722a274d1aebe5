"""One pairwise job's rows: every value with its chance level and interval; layers whose rows are
all one vector are NaN with a reason, not an error."""

import json

import numpy as np
import pandas as pd
import pytest

from reprsim.inference.resampling import half_samples
from reprsim.metrics import compute_layers
from reprsim.metrics._inputs import constant_layers
from reprsim.metrics.pair_engine import measure_rows


@pytest.fixture
def stacks():
    rng = np.random.default_rng(0)
    Xs, Ys = rng.normal(size=(3, 40, 6)), rng.normal(size=(2, 40, 5))
    Ys[1] += Xs[2, :, :5]  # one related layer pair, so something is beyond chance
    Xs[0] = rng.normal(size=6)  # every example the same vector, as BERT's CLS token at the embedding layer
    return Xs, Ys


def statistics(n, permutations=19, resamples=20):
    return {"chance": {"permutations": permutations, "seed": 0},
            "intervals": {"resamples": resamples, "confidence": 0.95, "seed": 0},
            "indices": half_samples(n, resamples, 0)}


@pytest.mark.parametrize("measure", ["neuronsim", "cka", "svcca", "pwcca", "mutual_knn", "procrustes"])
def test_every_row_has_a_chance_level_and_an_interval_and_constant_layers_are_nan(stacks, measure):
    Xs, Ys = stacks
    params = {"pca_dims": 4} if measure in ("svcca", "pwcca") else {"k": 5} if measure == "mutual_knn" else {}
    replicates = []
    rows = pd.DataFrame(measure_rows("m", {"measure": measure, "params": params}, Xs, Ys, constant_layers(Xs),
                                      constant_layers(Ys), statistics(40), replicates))
    directions = ["a->b", "b->a"] if measure in ("neuronsim", "pwcca") else ["symmetric"]
    assert sorted(rows["direction"].unique()) == sorted(directions) and len(rows) == 6 * len(directions)
    for direction in directions:
        forward = direction != "b->a"
        expected = (compute_layers(measure, Xs[1:], Ys, **params).values if forward
                    else compute_layers(measure, Ys, Xs[1:], **params).values.T)
        for row in rows[rows["direction"] == direction].itertuples():
            if row.layer_a == 0:
                assert np.isnan(row.value) and np.isnan(row.null_p) and np.isnan(row.ci_low)
                assert "same representation" in json.loads(row.meta)["undefined"]
                continue
            assert row.value == pytest.approx(float(expected[row.layer_a - 1, row.layer_b]), abs=1e-9)
            assert np.isfinite([row.null_mean, row.null_std, row.null_p]).all() and 0 < row.null_p <= 1
            assert row.ci_low <= row.value <= row.ci_high and row.n_resamples == 20
    related = rows[(rows["layer_a"] == 2) & (rows["layer_b"] == 1)]
    assert related["beyond_chance"].all() and (related["null_p"] == 1 / 20).all()
    long = pd.concat(replicates)
    assert len(long) == 20 * len(rows) and set(long["replicate"]) == set(range(20))
