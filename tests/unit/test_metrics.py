"""The measure library's API: every measure by name, its properties, batching, nulls, degenerate inputs."""

import numpy as np
import pytest
import torch

import rounding
from reprsim.metrics import MEASURES, compute, compute_layers, null

PARAMS = {"cka_minibatch": {"batch_size": 20}, "mutual_knn": {"k": 5}, "cknna": {"k": 5}}


@pytest.fixture()
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 8))
    Y = X @ rng.normal(size=(8, 5)) + 0.5 * rng.normal(size=(60, 5))
    return rng, X, Y


@pytest.mark.parametrize("name", sorted(MEASURES))
def test_identity(name, data):
    _, X, _ = data
    result = compute(name, X, X, **PARAMS.get(name, {}))
    tolerance = rounding.root_at_identity(name, *X.shape) or 1e-7  # a root of cancellation keeps √(rounding)
    assert result.value == pytest.approx(0.0 if result.meta["kind"] == "distance" else 1.0, abs=tolerance)
    assert result.meta["measure"] == name and result.meta["n"] == 60


@pytest.mark.parametrize("name", sorted(MEASURES))
def test_batched_layers_equal_compute(name, data):
    rng, X, Y = data
    Xs = np.stack([X, X + rng.normal(size=X.shape)])
    Ys = np.stack([Y, rng.normal(size=Y.shape), Y * 2])
    batched = compute_layers(name, Xs, Ys, **PARAMS.get(name, {})).values
    assert batched.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            tolerance = pwcca_tolerance(Xs[i], Ys[j]) if name == "pwcca" else 1e-10
            assert batched[i, j] == pytest.approx(compute(name, Xs[i], Ys[j], **PARAMS.get(name, {})).value,
                                                  abs=tolerance)


@pytest.mark.parametrize("name", ["cka", "cca", "svcca", "procrustes", "mutual_knn"])
def test_symmetric_measures(name, data):
    _, X, Y = data
    assert compute(name, X, Y).value == pytest.approx(compute(name, Y, X).value, abs=1e-10)


@pytest.mark.parametrize("name", ["cca", "svcca"])
def test_cca_invariant_to_invertible_linear_maps(name, data):
    rng, X, Y = data
    A = rng.normal(size=(8, 8)) + 3 * np.eye(8)
    kwargs = {"threshold": 1.0} if name == "svcca" else {}
    assert compute(name, X @ A + 2, Y, **kwargs).value == pytest.approx(compute(name, X, Y, **kwargs).value, abs=1e-10)


def test_procrustes_zero_under_rotation_and_bounded(data):
    rng, X, Y = data
    Q, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    assert compute("procrustes", X, 4 * X @ Q - 1).value == pytest.approx(0.0, abs=1e-6)
    assert 0 < compute("procrustes", X, Y).value <= np.pi / 2


def pwcca_tolerance(X, Y):
    """How far PWCCA may move with the summation order (tests/rounding.py): its weights come from the canonical
    directions, which the bases' rounding (their condition numbers times γ) turns by that over the gap between
    canonical correlations; the value moves by at most about that angle."""
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    rho = np.linalg.svd(np.linalg.qr(Xc)[0].T @ np.linalg.qr(Yc)[0], compute_uv=False)
    condition = (np.linalg.cond(Xc) + np.linalg.cond(Yc)) / np.diff(-rho).min()
    return rounding.products(len(X) * max(X.shape[1], Y.shape[1]), condition=condition)


def test_pwcca_directions_with_unequal_widths(data):
    _, X, Y = data
    for direction in ("x", "y", "min"):
        value = compute("pwcca", X, Y, direction=direction).value
        assert 0 < value <= 1
    meta = compute("pwcca", X, Y).meta
    assert meta["weights_from"] == "y"  # Y has fewer neurons
    # the swapped call decomposes Qyᵀ Qx, not Qxᵀ Qy; its correlations cluster (gap 0.003)
    assert compute("pwcca", Y, X, direction="x").value == pytest.approx(meta["pwcca_y"], abs=pwcca_tolerance(X, Y))


def test_cca_reduces_by_pca_when_n_not_above_d():
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(20, 50)), rng.normal(size=(20, 30))
    with pytest.raises(ValueError, match="trivially 1"):
        compute("cca", X, Y)
    meta = compute("cca", X, Y, pca_dims=10).meta
    assert meta["pca_x"] and meta["pca_y"] and meta["k_x"] == 10 and meta["k_y"] == 10


def test_svcca_keeps_99_percent_of_variance():
    rng = np.random.default_rng(2)
    scales = np.array([10.0, 5.0, 1.0, 0.01, 0.01])
    X = rng.normal(size=(500, 5)) * scales
    meta = compute("svcca", X, X[:, ::-1].copy()).meta
    assert meta["k_x"] == 2  # 100 + 25 of 126.0002 is 99.2%


def test_null_separates_related_from_unrelated(data):
    rng, X, Y = data
    related = null("cka", X, Y, n_permutations=40, seed=1)
    assert related.meta["p_value"] == pytest.approx(1 / 41)
    unrelated = null("cka", X, rng.normal(size=(60, 5)), n_permutations=40, seed=1)
    assert unrelated.meta["p_value"] > 0.05
    assert unrelated.meta["null_mean"] > 0  # biased CKA of independent data is far from 0


def test_degenerate_inputs_are_named(data):
    _, X, Y = data
    constant = np.ones_like(X)
    with pytest.raises(ValueError, match="every unit of X's layer 0 is constant"):
        compute("neuronsim", constant, Y)
    with pytest.raises(ValueError, match="same rows"):
        compute("cca", X, Y[:50])
    with pytest.raises(ValueError, match="NaN"):
        compute("cka", np.full_like(X, np.nan), Y)
    with pytest.raises(ValueError, match="unknown measure"):
        compute("cosine", X, Y)


def test_float32_torch_inputs_are_recorded_and_agree(data):
    _, X, Y = data
    result = compute("svcca", torch.tensor(X, dtype=torch.float32), torch.tensor(Y, dtype=torch.float32))
    assert result.meta["dtype"] == "float32"
    assert result.value == pytest.approx(compute("svcca", X, Y).value, abs=1e-5)


def test_cli_prints_value_and_meta(tmp_path, data, capsys):
    import json

    from reprsim.cli import main

    _, X, Y = data
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    assert main(["metric", "cka", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"),
                 "--param", "estimator=unbiased"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["value"] == pytest.approx(compute("cka", X, Y, estimator="unbiased").value)
    assert printed["meta"]["estimator"] == "unbiased"
    assert main(["metric", "cka", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--param", "kernel=poly"]) == 2


def test_null_layers_match_single_pair_nulls(data):
    from reprsim.metrics import null_layers

    rng, X, Y = data
    result = null_layers("cka", X[None], np.stack([Y, rng.normal(size=Y.shape)]), n_permutations=30, seed=4)
    single = null("cka", X, Y, n_permutations=30, seed=4)
    assert result.meta["null_mean"][0, 0] == pytest.approx(single.meta["null_mean"], abs=1e-12)
    assert result.meta["p_value"][0, 0] == pytest.approx(single.meta["p_value"])
    assert result.meta["p_value"][0, 1] > 0.05


def test_unknown_parameter_is_named(data):
    _, X, Y = data
    with pytest.raises(ValueError, match="estimatr"):
        compute("cka", X, Y, estimatr="unbiased")


@pytest.mark.parametrize("params", [{}, {"estimator": "unbiased"}, {"kernel": "rbf"}])
def test_gram_permutation_null_equals_recomputing(params, data):
    """The fast null (permuting Grams) gives the draws of recomputing CKA on permuted rows."""
    from reprsim.metrics.cka import gram_null_draws

    rng, X, Y = data
    Xs, Ys = np.stack([X, X ** 2]), np.stack([Y, Y + rng.normal(size=Y.shape), -Y])
    permutations = [torch.randperm(60, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    fast = gram_null_draws(torch.tensor(Xs), torch.tensor(Ys), permutations, **params)
    for draw, p in zip(fast, permutations):
        slow = compute_layers("cka", Xs, Ys[:, p.numpy()], **params).values
        np.testing.assert_allclose(draw.numpy(), slow, atol=1e-12)


@pytest.mark.parametrize("name, params, expected", [
    ("svcca", {"threshold": 1.5}, "threshold"), ("pwcca", {"direction": "z"}, "direction"),
    ("cca", {"pca_dims": 0}, "pca_dims"), ("cka", {"kernel": "poly"}, "kernel"), ("mutual_knn", {"k": 0}, "k"),
])
def test_bad_parameter_values_are_named(name, params, expected, data):
    _, X, Y = data
    with pytest.raises(ValueError, match=expected):
        compute(name, X, Y, **params)
