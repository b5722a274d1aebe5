"""reprsim.compare and reprsim.measures, the package's public face: inputs in every accepted form give the same
table, wrong inputs are named, a measure that cannot be computed is NaN alone, and `import reprsim` stays light."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import reprsim
from reprsim.python_api import InputError

DRAWS = {"permutations": 19, "resamples": 20}
NUMBERS = ["value", "null_mean", "null_std", "null_p", "ci_low", "ci_high"]


@pytest.fixture(scope="module")
def stacks():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(2, 120, 12))
    Y = np.stack([X[0] @ rng.normal(size=(12, 9)), rng.normal(size=(120, 9))]) + 0.3 * rng.normal(size=(2, 120, 9))
    return X, Y


def test_import_reprsim_loads_neither_torch_nor_pandas():
    code = "import sys, reprsim; print('torch' in sys.modules, 'pandas' in sys.modules, reprsim.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == ["False", "False"]


def test_numpy_torch_and_lists_give_the_same_table(stacks):
    X, Y = stacks
    measures = ["cka", "neuronsim"]
    base = reprsim.compare(X, Y, measures, **DRAWS)
    for X_, Y_ in ((torch.from_numpy(X), torch.from_numpy(Y)), (list(X), list(Y))):
        other = reprsim.compare(X_, Y_, measures, **DRAWS)
        assert other[NUMBERS].equals(base[NUMBERS])
    # 2 x 2 layer pairs: CKA once, neuronsim in both directions
    assert len(base) == 4 + 8 and set(base.direction) == {"symmetric", "a->b", "b->a"}
    assert base.n.eq(120).all() and base.n_permutations.eq(19).all() and base.n_resamples.eq(20).all()
    # a matrix is one layer
    single = reprsim.compare(X[0], Y[0], "cka", **DRAWS)
    assert single.value.iloc[0] == pytest.approx(base.query("measure == 'cka' and layer_a == 0 and layer_b == 0")
                                                 .value.iloc[0], abs=1e-12)


def test_identical_inputs_and_chance(stacks):
    X, _ = stacks
    same = reprsim.compare(X[0], X[0], "cka", **DRAWS)
    assert same.value.iloc[0] == pytest.approx(1.0, abs=1e-12)
    assert same.beyond_chance.iloc[0] and same.null_mean.iloc[0] < 0.5 and same.null_p.iloc[0] == pytest.approx(1 / 20)
    rng = np.random.default_rng(0)
    unrelated = reprsim.compare(rng.normal(size=(200, 5)), rng.normal(size=(200, 5)), "cka", **DRAWS)
    assert not unrelated.beyond_chance.iloc[0]


def test_row_ids_match_rows_held_in_another_order(stacks):
    X, Y = stacks
    order = np.random.default_rng(1).permutation(120)
    ids = np.arange(1000, 1120)
    matched = reprsim.compare(X, Y[:, order], "cka", row_ids=(ids, ids[order]), **DRAWS)
    assert matched[NUMBERS].equals(reprsim.compare(X, Y, "cka", **DRAWS)[NUMBERS])
    assert matched.attrs["rows_reordered"] > 0


@pytest.mark.parametrize("call, message", [
    (lambda X, Y: reprsim.compare(X, Y[:, :100]), "X has 120 rows and Y 100"),
    (lambda X, Y: reprsim.compare(X[0, 0], Y), "must be a matrix"),
    (lambda X, Y: reprsim.compare([X[0], X[1][:50]], Y), "layers differ in shape"),
    (lambda X, Y: reprsim.compare(np.where(np.arange(12) == 3, np.nan, X), Y), "NaN or Inf (layer 0: 120, layer 1: 120)"),
    (lambda X, Y: reprsim.compare(X.astype(complex), Y), "real numbers"),
    (lambda X, Y: reprsim.compare(X, Y, "svcaa"), "did you mean 'svcca'"),
    (lambda X, Y: reprsim.compare(X, Y, {"k": {"measure": "mutual_knn", "params": {"kk": 3}}}), "did you mean 'k'"),
    (lambda X, Y: reprsim.compare(X, Y, {"c": {"measure": "cka", "params": {"kernel": "poly"}}}), "allowed values"),
    (lambda X, Y: reprsim.compare(X, Y, permutations=0), "permutations must be an integer"),
    (lambda X, Y: reprsim.compare(X, Y, row_ids=(np.arange(120), np.arange(1, 121))), "the rows differ"),
    (lambda X, Y: reprsim.compare(X, Y, row_ids=(np.zeros(120), np.arange(120))), "repeat"),
    (lambda X, Y: reprsim.compare(X, Y, device="tpu"), "device must be one of"),
])
def test_wrong_inputs_are_named(stacks, call, message):
    with pytest.raises(InputError, match=None) as error:
        call(*stacks)
    assert message in str(error.value)


def test_a_measure_that_cannot_be_computed_is_nan_alone(stacks):
    X, Y = stacks
    # 150 neighbours of 120 rows are undefined; CKA goes on
    table = reprsim.compare(X, Y, {"knn": {"measure": "mutual_knn", "params": {"k": 150}}, "cka": "cka"}, **DRAWS)
    knn, cka = table[table.measure == "knn"], table[table.measure == "cka"]
    assert cka.value.notna().all() and knn[NUMBERS].isna().all().all()
    assert all(json.loads(meta)["undefined"] == "mutual_knn: mutual_knn needs 1 ≤ k < n; got k=150, n=120"
               for meta in knn.meta)
    assert knn.warning.str.startswith("undefined: mutual_knn:").all()


def test_replicates_come_with_the_table(stacks):
    X, Y = stacks
    table, long = reprsim.compare(X, Y, "cka", replicates=True, **DRAWS)
    assert len(long) == len(table) * 20 and set(long.columns) >= {"layer_a", "layer_b", "replicate", "value", "m"}


def test_measures_is_the_registry():
    from reprsim.measure_registry import MEASURES

    table = reprsim.measures()
    assert set(table.measure) == set(MEASURES) and table.measure.is_unique
    cka = table.set_index("measure").loc["cka"]
    assert cka.kind == "similarity" and cka.identical == 1.0 and cka.invariant_OT and not cka.invariant_IL
    assert cka.params == dict(MEASURES["cka"].params)
