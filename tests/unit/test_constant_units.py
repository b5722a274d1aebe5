"""Constant units degrade one measure at a time (issue 41): a unit whose spread over the rows is rounding
(reprsim.metrics._inputs.constant_units) is left out by the measures that divide by it, counted in their meta and
named in the pair's warning; the observed value, the null and the half-sample replicates leave out the same units;
where no unit is constant every number is the one the code gave before."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import rounding
from reprsim.measure_registry import MEASURES as REGISTRY
from reprsim.metrics import MEASURES, compute_layers
from reprsim.metrics._inputs import CONSTANT_UNIT, UNIT_VARIANCE, constant_units
from reprsim.metrics.api import directed_layers, directed_null, directed_replicates
from reprsim.metrics.permutation import permutations

REFERENCE = Path(__file__).parent / "data" / "constant_units_reference.json"
PARAMS = {"cka_minibatch": [{"batch_size": 20}], "mutual_knn": [{"k": 5}],
          "cka": [{"kernel": "linear", "estimator": "biased"}, {"kernel": "linear", "estimator": "unbiased"}],
          "svcca": [{"threshold": 0.99, "pca_dims": 3}], "pwcca": [{"direction": "min", "pca_dims": 3}],
          "soft_matching": [{"normalize": False}, {"normalize": True}],
          "jaccard_knn": [{"k": 5}], "second_order_cosine": [{"k": 5}], "rank_similarity": [{"k": 5}],
          "cknna": [{"k": 5}]}
CASES = [(name, params) for name in sorted(MEASURES) for params in PARAMS.get(name, [{}])]
ADDED_SINCE_REFERENCE = {"cknna"}  # registered after commit 06df58b: no previous code to compare with
UNIT_CASES = [("neuronsim", {}), ("mixedsim", {}), ("hard_correlation_match", {}), ("soft_matching", {"normalize": True})]
N = 40
INDICES = np.random.default_rng(3).permuted(np.tile(np.arange(N), (3, 1)), axis=1)[:, :N // 2]


def stacks():
    """X (2, 40, 5), Y (3, 40, 6) without constant units (as the reference was computed)."""
    rng = np.random.default_rng(41)
    Xs = rng.standard_normal((2, N, 5)) * np.array([1.0, 2.0, 0.5, 3.0, 1.5]) + 0.3
    Ys = np.stack([Xs[0] @ rng.standard_normal((5, 6)) + 0.5 * rng.standard_normal((N, 6)),
                   rng.standard_normal((N, 6)), rng.standard_normal((N, 6)) * 2 - 1])
    return Xs, Ys


def with_constant_units():
    """The stacks with X's layer 1 unit 2 exactly constant (a LayerNorm gain rounded to 0: the bias) and Y's layer 0
    unit 4 numerically constant (std 1e-30 of the layer's RMS); the units kept per layer."""
    Xs, Ys = stacks()
    Xs[1, :, 2] = 0.7
    Ys[0, :, 4] = 1e-30 * np.random.default_rng(5).standard_normal(N)
    keep_x = [np.arange(5), np.array([0, 1, 3, 4])]
    keep_y = [np.array([0, 1, 2, 3, 5]), np.arange(6), np.arange(6)]
    return Xs, Ys, keep_x, keep_y


def record(name, params, Xs, Ys):
    out = {"values": compute_layers(name, Xs, Ys, **params).values}
    null = directed_null(name, Xs, Ys, n_permutations=3, seed=1, **params)
    out["directed"] = null.values
    out.update(null.statistics)
    out["replicates"] = directed_replicates(name, Xs, Ys, INDICES, **params)[0]
    return out, null.metas


# ------------------------------------------------------------------------------------ the mask itself
def test_the_mask_catches_exact_and_numerical_constants_relative_to_the_layer():
    rng = np.random.default_rng(0)
    Z = torch.as_tensor(rng.normal(size=(1, 50, 6)) * 10)
    Z[0, :, 0] = 3.0  # exactly constant
    Z[0, :, 1] = 1e-33 * torch.as_tensor(rng.normal(size=50))  # float32 MiniLM's LayerNorm gains of ~1e-33
    Z[0, :, 2] = 5.0 + 1e-6 * torch.as_tensor(rng.normal(size=50))  # std 1e-6: below 1e-5 of the layer's RMS (~10)
    Z[0, :, 3] = 1e-3 * torch.as_tensor(rng.normal(size=50))  # small, but 1e-4 of the RMS: data
    assert constant_units(Z).tolist() == [[True, True, True, False, False, False]]
    assert constant_units(Z[:, torch.randperm(50)]).equal(constant_units(Z))  # rows permuted: the same units
    assert constant_units(torch.zeros(2, 10, 3, dtype=torch.float64)).all()
    assert CONSTANT_UNIT == 1e-5


def test_one_floor_for_units_and_layers():
    """The rule lives once, beside constant_units: constant_layers reads the same CONSTANT_UNIT, FLOOR is how the
    notes write it, and the store module keeps no copy of either."""
    import reprsim.io.store as store
    from reprsim.metrics import _inputs

    assert _inputs.FLOOR == "1e-5" and float(_inputs.FLOOR) == CONSTANT_UNIT
    assert not hasattr(store, "constant_layers") and not hasattr(store, "CONSTANT")
    rng = np.random.default_rng(0)
    rep = rng.normal(size=(4, 30, 5))
    rep[1] = rep[1, 0]  # every row one vector
    rep[2] = 3.0 + 1e-7 * rep[2]  # spread 1e-7 of a size ~3: under the floor
    rep[3] = 3.0 + 1e-4 * rep[3]  # 1e-4: data
    assert _inputs.constant_layers(rep).tolist() == [False, True, True, False]
    # the expression the store used, ||X − mean||_F ≤ 1e-5 · ||X||_F per float64 layer, bit for bit
    before = [bool(np.linalg.norm(x - x.mean(axis=0)) <= 1e-5 * np.linalg.norm(x)) for x in rep.astype(np.float64)]
    assert _inputs.constant_layers(rep.astype(np.float32)).tolist() == \
        [bool(np.linalg.norm(x - x.mean(axis=0)) <= 1e-5 * np.linalg.norm(x))
         for x in rep.astype(np.float32).astype(np.float64)]
    assert _inputs.constant_layers(rep).tolist() == before
    # a layer whose every unit is constant (constant_units) is a constant layer
    units = constant_units(torch.as_tensor(rep))
    assert [bool(row.all()) for row in units] == _inputs.constant_layers(rep).tolist()


def reference_tolerance(name: str) -> float:
    """How far a number may be from the reference's on other BLAS kernels, both being rounded (tests/rounding.py):
    the longest sums run over the n² pairs of rows (Grams, pairwise distances), and no measure here amplifies their
    rounding by more than the layers' largest condition number, on all rows or a half-sample (37; the unbiased CKA's
    cancelling terms: ≤ 7, concentricity's small means: ≤ 5). PWCCA's weights come from canonical directions, which
    rounding turns by that over the gap between canonical correlations; an unbounded distance is in the layers'
    units."""
    Xs, Ys = stacks()
    layers = [Z[rows] - Z[rows].mean(axis=0) for Z in (*Xs, *Ys) for rows in (slice(None), *INDICES)]
    condition = max(np.linalg.cond(Z) for Z in layers)
    if name == "pwcca":  # its bases: 3 principal directions; the draws of record()
        top = [np.linalg.svd(Z - Z.mean(axis=0), full_matrices=False)[0][:, :3] for Z in (*Xs, *Ys)]
        orders = [np.arange(N)] + [p.numpy() for p in permutations(N, 3, seed=1, device="cpu")]
        pairs = [(a, b[p]) for a in top[:2] for b in top[2:] for p in orders]
        pairs += [(a[rows] - a[rows].mean(axis=0), b[rows] - b[rows].mean(axis=0))
                  for a in top[:2] for b in top[2:] for rows in INDICES]
        condition /= min(np.diff(-np.linalg.svd(np.linalg.qr(a)[0].T @ np.linalg.qr(b)[0], compute_uv=False)).min()
                         for a, b in pairs)
    scale = max(np.linalg.norm(Z) for Z in layers) if math.isinf(REGISTRY[name].range[1]) else 1.0
    return 2 * rounding.products(N * N, scale=scale, condition=condition)


# -------------------------------------------------------------- values without constant units: unchanged
@pytest.mark.parametrize("name, params", [case for case in CASES if REGISTRY[case[0]].family != "RSM"
                                          and case[0] not in ADDED_SINCE_REFERENCE],
                         ids=lambda value: value if isinstance(value, str) else json.dumps(value, sort_keys=True))
def test_values_without_constant_units_are_the_previous_code_s(name, params):
    """Reference: every value, null statistic and replicate at commit 06df58b (before units were left out). The RSM
    family is left out of it: its values change with its own ties handling."""
    expected = json.loads(REFERENCE.read_text())[f"{name} {json.dumps(params, sort_keys=True)}"]
    got, metas = record(name, params, *stacks())
    tolerance = reference_tolerance(name)  # to the bit here; every null draw lies ≥ 7e-5 from its value: p is exact
    for key, values in expected.items():
        np.testing.assert_allclose(np.asarray(got[key], dtype=np.float64).ravel(),
                                   [float.fromhex(x) for x in values], rtol=0, atol=tolerance, err_msg=key)
    assert all("excluded_units" not in meta for meta in metas)


# ------------------------------------------------------------------- every measure computes through them
@pytest.mark.parametrize("name, params", CASES,
                         ids=lambda value: value if isinstance(value, str) else json.dumps(value, sort_keys=True))
def test_every_measure_computes_values_null_and_replicates_with_constant_units(name, params):
    Xs, Ys, _, _ = with_constant_units()
    got, metas = record(name, params, Xs, Ys)
    for key, values in got.items():
        assert np.isfinite(values).all(), key
    leaves_out = name in UNIT_VARIANCE and (name != "soft_matching" or params.get("normalize"))
    assert ("excluded_units" in metas[0]) == leaves_out


@pytest.mark.parametrize("name, params", UNIT_CASES)
def test_the_value_is_the_value_without_those_units(name, params):
    """Every layer pair and direction, value, null statistics and replicates: as if the constant units were not
    there (the same permutations, the same half-samples). mixedsim leaves out its X's units only: Y enters through
    its basis, as in CCA."""
    Xs, Ys, keep_x, keep_y = with_constant_units()
    full = directed_null(name, Xs, Ys, n_permutations=4, seed=2, **params)
    replicates = directed_replicates(name, Xs, Ys, INDICES, **params)[0]
    for i, kx in enumerate(keep_x):
        for j, ky in enumerate(keep_y):
            for d in range(len(full.values)):
                X = Xs[i][:, kx] if name != "mixedsim" or d == 0 else Xs[i]
                Y = Ys[j][:, ky] if name != "mixedsim" or d == 1 else Ys[j]
                alone = directed_null(name, X[None], Y[None], n_permutations=4, seed=2, **params)
                np.testing.assert_allclose(full.values[d, i, j], alone.values[d, 0, 0], atol=1e-12)
                for key, values in full.statistics.items():
                    np.testing.assert_allclose(values[d, i, j], alone.statistics[key][d, 0, 0], atol=1e-12,
                                               err_msg=key)
                np.testing.assert_allclose(replicates[:, d, i, j], directed_replicates(
                    name, X[None], Y[None], INDICES, **params)[0][:, d, 0, 0], atol=1e-12)


@pytest.mark.parametrize("name, params", UNIT_CASES)
def test_the_meta_counts_the_units_left_out_per_layer_and_per_pair(name, params):
    Xs, Ys, _, _ = with_constant_units()
    meta = compute_layers(name, Xs, Ys, **params).meta
    y_counted = [1, 0, 0] if name != "mixedsim" else [0, 0, 0]
    assert meta["excluded_units"] == {"x": [0, 1], "y": y_counted}
    assert meta["per_pair"][(1, 1)]["excluded_units"] == {"x": 1, "y": 0}
    assert meta["per_pair"][(1, 1)]["warning"] == ("1 of 5 units of X's layer are constant (std ≤ 1e-5 × the "
                                                   "layer's RMS) and left out")
    assert "warning" not in meta["per_pair"][(0, 1)]
    if name != "mixedsim":
        assert meta["per_pair"][(1, 0)]["warning"] == ("1 of 5 units of X's layer and 1 of 6 units of Y's layer are "
                                                       "constant (std ≤ 1e-5 × the layer's RMS) and left out")


def test_the_y_to_x_direction_counts_as_it_sees_them():
    """b→a rows name b's side X (docs/numerics.md §8); per_pair stays keyed (X's layer, Y's layer) of the call."""
    Xs, Ys, _, _ = with_constant_units()
    for name in ("neuronsim", "mixedsim"):
        backward = directed_layers(name, Xs, Ys).metas[1]
        if name == "neuronsim":
            assert backward["excluded_units"] == {"x": [1, 0, 0], "y": [0, 1]}
            assert backward["per_pair"][(1, 0)]["warning"].startswith("1 of 6 units of X's layer and 1 of 5 units "
                                                                       "of Y's layer")
        else:  # Y→X divides by Y's units only
            assert backward["excluded_units"] == {"x": [1, 0, 0], "y": [0, 0]}
            assert backward["per_pair"][(0, 0)]["warning"].startswith("1 of 6 units of X's layer")
            assert "warning" not in backward["per_pair"][(1, 1)]


def test_the_note_follows_a_sample_size_warning():
    Xs, Ys, _, _ = with_constant_units()
    meta = compute_layers("mixedsim", Xs[:, :20], Ys[:, :20]).meta  # n/k = 20/6 < 5
    assert meta["warning"].startswith("n/k = 20/6")
    assert meta["per_pair"][(1, 0)]["warning"] == meta["warning"] + "; " + meta["per_pair"][(1, 0)]["units_note"]


def test_float32_layer_norm_gains_rounded_to_zero_or_tiny():
    """The MiniLM case: float16-rounded gains (0: the bias) and float32's ~1e-33 gains, stored as float32."""
    rng = np.random.default_rng(7)
    normalised = rng.normal(size=(2, 60, 8))
    gains = np.ones(8)
    gains[[5, 6, 7]] = [0.0, 1e-33, 0.0]
    Xs = (normalised * gains + 0.1).astype(np.float32)
    Ys = rng.normal(size=(2, 60, 8)).astype(np.float32)
    result = directed_null("neuronsim", Xs, Ys, n_permutations=3)
    assert np.isfinite(result.values).all()
    assert result.metas[0]["excluded_units"] == {"x": [3, 3], "y": [0, 0]}
    np.testing.assert_allclose(result.values, directed_layers("neuronsim", Xs[:, :, :5], Ys).values, atol=1e-12)


# ------------------------------------------------------------------- half-samples, and nothing left
def test_a_unit_constant_on_a_half_sample_alone_makes_that_draw_nan():
    """The units left out are decided on all rows; a unit constant on a half-sample's rows alone leaves that draw
    undefined (NaN, left out of the interval), not a draw over other units."""
    Xs, Ys = stacks()
    outside = np.setdiff1d(np.setdiff1d(np.arange(N), INDICES[0]), np.setdiff1d(np.arange(N), INDICES[1]))[0]
    Xs[0, :, 1] = 0.0
    Xs[0, outside, 1] = 1.0  # one row, outside the first half-sample and inside the second
    draws = directed_replicates("neuronsim", Xs, Ys, INDICES)[0]
    for draw, rows in zip(draws, INDICES):
        assert np.isnan(draw).all() if outside not in rows else np.isfinite(draw).all()
    assert np.isnan(draws[0]).all() and np.isfinite(draws[1]).all()


def test_a_layer_with_every_unit_constant_is_an_error_naming_it():
    Xs, Ys = stacks()
    Ys[2] = 0.25
    for name, params in UNIT_CASES:
        with pytest.raises(ValueError, match="every unit of (X|Y)'s layer 2 is constant"):
            compute_layers(name, *((Ys, Xs) if name == "mixedsim" else (Xs, Ys)), **params)
