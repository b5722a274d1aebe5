"""One pairwise job's rows: layers whose rows are all one vector are NaN with a reason, not an error."""

import json

import numpy as np
import pytest

from reprsim.io.store import constant_layers
from reprsim.metrics import compute_layers
from reprsim.stages.compare.pairs import _measure_rows


@pytest.fixture
def stacks():
    rng = np.random.default_rng(0)
    Xs, Ys = rng.normal(size=(3, 40, 6)), rng.normal(size=(2, 40, 5))
    Xs[0] = rng.normal(size=6)  # every example the same vector, as BERT's CLS token at the embedding layer
    return Xs, Ys


@pytest.mark.parametrize("measure", ["neuronsim", "cka", "svcca"])
def test_a_constant_layer_is_nan_with_a_reason_and_the_rest_is_computed(stacks, measure):
    Xs, Ys = stacks
    spec = {"measure": measure, "params": {"pca_dims": 4} if measure == "svcca" else {}}
    for transpose, (first, second) in ((False, (Xs, Ys)), (True, (Ys, Xs))):
        rows = _measure_rows("m", spec, first, second, constant_layers(first), constant_layers(second),
                             transpose=transpose, direction="d")
        table = {(row["layer_a"], row["layer_b"]): row for row in rows}
        assert set(table) == {(i, j) for i in range(3) for j in range(2)}
        expected = compute_layers(measure, Ys, Xs[1:], **spec["params"]).values.T if transpose \
            else compute_layers(measure, Xs[1:], Ys, **spec["params"]).values
        for (i, j), row in table.items():
            if i == 0:
                assert np.isnan(row["value"]) and "same representation" in json.loads(row["meta"])["undefined"]
            else:
                assert row["value"] == pytest.approx(float(expected[i - 1, j]), abs=1e-9)
    nulls = _measure_rows("m", {**spec, "null_permutations": 5}, Xs, Ys, constant_layers(Xs), constant_layers(Ys),
                          transpose=False, direction="d")
    assert all(np.isnan(row["null_p"]) == (row["layer_a"] == 0) for row in nulls)
