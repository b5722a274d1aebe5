"""Least-squares linear aligner and the relative Frobenius error."""

import numpy as np
import pytest

from reprsim.aligners import LinearAligner, relative_error
from reprsim.tables.layers import matching_layer


def test_exact_on_a_noiseless_affine_map():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6))
    W, b = rng.normal(size=(6, 4)), rng.normal(size=4)
    aligner = LinearAligner().fit(X[:150], X[:150] @ W + b)
    assert aligner.score(X[150:], X[150:] @ W + b) < 1e-12


def test_relative_error_definition():
    Y = np.array([[3.0, 4.0], [0.0, 0.0]])
    assert relative_error(Y, np.zeros_like(Y)) == pytest.approx(1.0)
    assert relative_error(Y, Y * 0.5) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="zeros"):
        relative_error(np.zeros((2, 2)), np.ones((2, 2)))


def test_validation_picks_a_ridge_that_generalises():
    """Rank-deficient inputs stored in float32: plain least squares fits the noise, selection does not."""
    rng = np.random.default_rng(3)
    latent = rng.normal(size=(600, 20))
    X = (latent @ rng.normal(size=(20, 100))).astype(np.float32).astype(np.float64)  # rank 20 + rounding
    Y = latent @ rng.normal(size=(20, 30)) + 0.1 * rng.normal(size=(600, 30))
    train, val, test = slice(0, 300), slice(300, 450), slice(450, 600)
    plain = LinearAligner(ridge=0.0).fit(X[train], Y[train])
    chosen = LinearAligner(ridge=[0.0, 1e-6, 1e-4, 1e-2, 1.0]).fit(X[train], Y[train], X[val], Y[val])
    assert chosen.ridge_ in chosen.validation_errors_ and len(chosen.validation_errors_) == 5
    assert chosen.validation_errors_[chosen.ridge_] == min(chosen.validation_errors_.values())
    assert chosen.score(X[test], Y[test]) <= plain.score(X[test], Y[test]) + 1e-9
    assert chosen.score(X[test], Y[test]) < 0.2
    with pytest.raises(ValueError, match="validation"):
        LinearAligner(ridge=[0.0, 1.0]).fit(X[train], Y[train])


def test_float32_rounding_noise_is_not_fit():
    """Rank-deficient float32 activations (an embedding layer over a small vocabulary): the
    directions at rounding level are cut, so a held-out input with something new in it (a
    word train never had) is not multiplied by the inverse of rounding noise."""
    rng = np.random.default_rng(4)
    latent = rng.normal(size=(500, 15))
    X = latent @ rng.normal(size=(15, 60))
    X[300:] += 0.05 * rng.normal(size=(200, 1)) * rng.normal(size=(1, 60))  # novel direction, test only
    X32 = X.astype(np.float32)
    Y = latent @ rng.normal(size=(15, 10)) + 0.01 * rng.normal(size=(500, 10))
    aligner = LinearAligner(ridge=0.0).fit(X32[:300], Y[:300])
    assert aligner.rank_ == 15
    assert aligner.score(X32[300:], Y[300:]) < 0.05
    # the same rows announced as float64 keep the noise directions, and the map explodes
    naive = LinearAligner(ridge=0.0).fit(X32[:300].astype(np.float64), Y[:300])
    assert naive.rank_ > 15 and naive.score(X32[300:], Y[300:]) > 10 * aligner.score(X32[300:], Y[300:])


def test_ridge_shrinks_towards_the_mean():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 5))
    Y = X @ rng.normal(size=(5, 3))
    plain = LinearAligner().fit(X, Y)
    heavy = LinearAligner(ridge=1e6).fit(X, Y)
    assert np.linalg.norm(heavy.weight) < 1e-2 * np.linalg.norm(plain.weight)
    np.testing.assert_allclose(heavy.transform(X).mean(0), Y.mean(0), atol=1e-3)
    with pytest.raises(ValueError, match="ridge"):
        LinearAligner(ridge=-1)


def test_held_out_error_is_honest_when_n_below_d():
    """With fewer train rows than features the map interpolates train but not held-out rows."""
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(60, 40)), rng.normal(size=(60, 5))
    aligner = LinearAligner().fit(X[:30], Y[:30])
    assert aligner.score(X[:30], Y[:30]) < 1e-8
    assert aligner.score(X[30:], Y[30:]) > 0.9


@pytest.mark.parametrize("layer, frm, to, expected", [(0, 6, 4, 0), (6, 6, 4, 4), (3, 6, 4, 2), (2, 4, 12, 6)])
def test_matching_layer_by_relative_depth(layer, frm, to, expected):
    assert matching_layer(layer, frm, to) == expected


# --- the aligner library: names, CCA-family maps, held-out scoring (reprsim.aligners) ---------------

import json

from reprsim.aligners import ALIGNERS, PARAMETERS, align_pair, make
from reprsim.aligners.cca import CanonicalMap
from reprsim.aligners.synthetic import random_coupling_map, synthetic_recovery

FAST = {"epochs": 3, "progress": False}  # the torch aligners, where only the plumbing is tested


def _orthogonal_columns(n: int, k: int, seed: int) -> np.ndarray:
    """k centred, mutually orthogonal columns of unit norm."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, k))
    Q, _ = np.linalg.qr(Z - Z.mean(0))
    return Q


def test_relative_error_is_the_relative_frobenius_error():
    Y = np.array([[3.0, 4.0], [0.0, 0.0]])
    assert relative_error(Y, Y * 0.5) == pytest.approx(0.5)
    assert make("linear").fit(Y, Y).score(Y, Y * 0.5) == pytest.approx(relative_error(Y * 0.5, Y))


def test_every_aligner_has_parameters_and_defaults_that_build():
    assert set(ALIGNERS) == set(PARAMETERS) == {"linear", "cca", "svcca", "pwcca", "inn", "mlp"}
    for name in ALIGNERS:
        aligner = make(name)
        assert all(hasattr(aligner, method) for method in ("fit", "transform", "score"))
    assert all(hasattr(make(name), "inverse") for name in ("linear", "cca", "svcca", "pwcca", "inn"))


@pytest.mark.parametrize("name, params, message", [
    ("procrustes", {}, "unknown aligner 'procrustes'; known: linear, cca, svcca, pwcca, inn, mlp"),
    ("inn", {"width": 3}, "no parameter.*width.*allowed: hidden"),
    ("cca", {"ridge": 1.0}, "allowed: components, pca_dims"),
    ("linear", {"ridge": -1.0}, "ridge"),
    ("svcca", {"threshold": 1.5}, "threshold"),
    ("inn", {"epochs": 0}, "epochs"),
    ("inn", {"device": "tpu"}, "device"),
    ("mlp", {"depth": 0}, "depth"),
])
def test_bad_names_and_parameters_are_clear_errors(name, params, message):
    with pytest.raises(ValueError, match=message):
        make(name, **params)


def test_linear_map_inverse_undoes_it():
    rng = np.random.default_rng(5)
    X, W = rng.normal(size=(100, 4)), rng.normal(size=(4, 4))
    aligner = make("linear").fit(X, X @ W + 1.0)
    np.testing.assert_allclose(aligner.inverse(aligner.transform(X)), X, atol=1e-10)
    assert aligner.meta["rank"] == 4 and aligner.meta["ridge"] == 0.0
    with pytest.raises(ValueError, match="not invertible"):
        make("linear").fit(X, X[:, :2]).inverse(X[:, :2])


def test_cca_map_on_a_worked_example():
    """X = [a, b], Y = [a, c] with a, b, c orthonormal: ρ = (1, 0). One canonical pair maps a onto a
    and nothing else, so g(X) = [a, 0] and g⁻¹(Y) = [a, 0]."""
    a, b, c = _orthogonal_columns(50, 3, 0).T
    X, Y = np.c_[a, b], np.c_[a, c]
    aligner = CanonicalMap("cca", components=1).fit(X, Y)
    np.testing.assert_allclose(aligner.rho_, [1.0], atol=1e-12)
    np.testing.assert_allclose(aligner.transform(X), np.c_[a, np.zeros(50)], atol=1e-12)
    np.testing.assert_allclose(aligner.inverse(Y), np.c_[a, np.zeros(50)], atol=1e-12)


def test_pwcca_coefficient_on_a_worked_example():
    """X = [2a, b], Y = [a, c]: ρ = (1, 0), projection weights α = (|2a|, |b|) = (2, 1) (Ren Eq. 8),
    so ρ̄ = (2·1 + 1·0) / 3 and the map is the CCA map scaled by 2/3."""
    a, b, c = _orthogonal_columns(50, 3, 1).T
    X, Y = np.c_[2 * a, b], np.c_[a, c]
    pwcca = CanonicalMap("pwcca").fit(X, Y)
    assert pwcca.coefficient == pytest.approx(2 / 3, abs=1e-12)
    cca = CanonicalMap("cca").fit(X, Y)
    np.testing.assert_allclose(pwcca.transform(X), 2 / 3 * cca.transform(X), atol=1e-12)


def test_svcca_keeps_the_directions_holding_99_percent_of_the_variance():
    """X = [a, 0.05·b]: a holds 1/1.0025 > 99% of X's variance, so SVCCA keeps only a on X's side;
    Y = [a, c] keeps both; the one canonical pair maps a onto a: g(X) = [a, 0]."""
    a, b, c = _orthogonal_columns(50, 3, 2).T
    X, Y = np.c_[a, 0.05 * b], np.c_[a, c]
    aligner = CanonicalMap("svcca").fit(X, Y)
    assert (aligner.meta["dims_x"], aligner.meta["dims_y"], aligner.meta["components"]) == (1, 2, 1)
    np.testing.assert_allclose(aligner.transform(X), np.c_[a, np.zeros(50)], atol=1e-12)


def test_cca_map_is_wx_times_wy_inverse():
    """Direct transcription of Ren et al. Eq. 6 with textbook CCA weights Σxx^{-1/2}·U, Σyy^{-1/2}·V."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4)) @ rng.normal(size=(4, 4))
    Y = np.tanh(X @ rng.normal(size=(4, 4))) + 0.3 * rng.normal(size=(300, 4))
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)

    def inverse_sqrt(S):
        values, vectors = np.linalg.eigh(S)
        return vectors @ np.diag(values**-0.5) @ vectors.T

    Sxx_h, Syy_h = inverse_sqrt(Xc.T @ Xc), inverse_sqrt(Yc.T @ Yc)
    U, rho, Vt = np.linalg.svd(Sxx_h @ Xc.T @ Yc @ Syy_h)
    Wx, Wy = Sxx_h @ U, Syy_h @ Vt.T
    expected = Xc @ Wx @ np.linalg.inv(Wy) + Y.mean(0)
    aligner = CanonicalMap("cca").fit(X, Y)
    np.testing.assert_allclose(aligner.rho_, rho, atol=1e-10)
    np.testing.assert_allclose(aligner.transform(X), expected, atol=1e-9)
    np.testing.assert_allclose(aligner.inverse(aligner.transform(X)), X, atol=1e-9)


def test_canonical_maps_are_exact_on_a_noiseless_linear_bijection():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 5))
    Y = X @ rng.normal(size=(5, 5)) + 2.0
    for variant in ("cca", "pwcca"):
        aligner = make(variant).fit(X[:150], Y[:150])
        assert aligner.score(X[150:], Y[150:]) < 1e-10
        assert aligner.meta["mean_rho"] == pytest.approx(1.0)


def test_canonical_map_needs_pca_when_rows_are_few():
    rng = np.random.default_rng(6)
    X, Y = rng.normal(size=(20, 30)), rng.normal(size=(20, 30))
    with pytest.raises(ValueError, match="pca_dims"):
        make("cca").fit(X, Y)
    aligner = make("cca", pca_dims=10).fit(X, Y)
    assert aligner.meta["dims_x"] == aligner.meta["dims_y"] == 10 and aligner.meta["pca_x"]
    assert aligner.transform(X).shape == Y.shape


def test_shared_decompositions_give_the_maps_of_separate_fits(monkeypatch):
    """cca, svcca and pwcca (with and without pca_dims) fit in both directions on one side's decomposition each
    are the maps that separate fits give, bit for bit; each side is decomposed once."""
    import reprsim.aligners.cca as cca_module

    rng = np.random.default_rng(7)
    latent = rng.normal(size=(300, 10))
    X = latent @ rng.normal(size=(10, 20)) + 0.1 * rng.normal(size=(300, 20))
    Y = latent @ rng.normal(size=(10, 16)) + 0.1 * rng.normal(size=(300, 16))
    specs = [("cca", {}), ("svcca", {"threshold": 0.9}), ("pwcca", {}), ("cca", {"pca_dims": 5, "components": 3}),
             ("svcca", {"pca_dims": 5}), ("pwcca", {"pca_dims": 5})]
    separate = {(name, str(params), direction): make(name, **params).fit(*sides)
                for name, params in specs for direction, sides in (("x->y", (X, Y)), ("y->x", (Y, X)))}
    decompositions = []
    decompose = cca_module.decompose
    monkeypatch.setattr(cca_module, "decompose", lambda Z: decompositions.append(Z.shape) or decompose(Z))
    kept_x, kept_y = {}, {}
    for name, params in specs:
        for direction, sides, shared in (("x->y", (X, Y), (kept_x, kept_y)), ("y->x", (Y, X), (kept_y, kept_x))):
            together, alone = make(name, **params).fit(*sides, shared=shared), separate[(name, str(params), direction)]
            for attribute in ("weight_x", "weight_y", "reconstruct_x", "reconstruct_y", "x_mean", "y_mean", "rho_"):
                assert np.array_equal(getattr(together, attribute), getattr(alone, attribute)), attribute
            assert together.coefficient == alone.coefficient
            assert {**together.meta, "seconds": 0} == {**alone.meta, "seconds": 0}
    assert sorted(decompositions) == [(300, 16), (300, 20)]


ALL = {"linear": ("linear", {"ridge": [0.0, 1.0]}), "cca": ("cca", {}), "svcca": ("svcca", {}),
       "pwcca": ("pwcca", {}), "inn": ("inn", FAST), "mlp": ("mlp", FAST)}


def _splits(seed: int, d: int = 6) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(260, d))
    Y = np.tanh(X @ rng.normal(size=(d, d))) + X
    cut = {"train": slice(0, 160), "val": slice(160, 210), "test": slice(210, 260)}
    return {k: X[s] for k, s in cut.items()}, {k: Y[s] for k, s in cut.items()}


def test_align_pair_rows_in_both_directions():
    splits_x, splits_y = _splits(0)
    rows = align_pair(splits_x, splits_y, ALL, seed=1)
    assert len(rows) == len(ALL) * 2 * 2  # aligners × directions × (train, test)
    assert {(r["aligner"], r["direction"], r["split"]) for r in rows} == {
        (label, direction, split) for label in ALL for direction in ("x->y", "y->x") for split in ("train", "test")}
    for row in rows:
        assert 0 <= row["rel_error"] < 1.5 and row["mean_l2"] >= 0 and row["fit_seconds"] >= 0
        json.loads(row["meta"]), json.loads(row["params"])
    inn = next(r for r in rows if r["aligner"] == "inn")
    assert json.loads(inn["params"])["seed"] == 1


def test_test_rows_never_reach_fitting_or_selection():
    """Poison the test rows with NaN: every aligner still fits, and everything it learnt (train error,
    the choices in its meta) is identical to a run on clean test rows; only the test error is NaN."""
    splits_x, splits_y = _splits(2)
    poisoned_x = {**splits_x, "test": np.full_like(splits_x["test"], np.nan)}
    clean = align_pair(splits_x, splits_y, ALL, seed=0)
    poisoned = align_pair(poisoned_x, splits_y, ALL, seed=0)

    def learnt(row):
        meta = json.loads(row["meta"])
        return {k: v for k, v in meta.items() if "seconds" not in k}

    for before, after in zip(clean, poisoned):
        if after["split"] == "train":
            assert after["rel_error"] == before["rel_error"], after["aligner"]
            assert learnt(after) == learnt(before), after["aligner"]
        elif after["direction"] == "x->y":
            assert np.isnan(after["rel_error"]), after["aligner"]


def test_random_coupling_map_is_an_invertible_nonlinear_map():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 10))
    f = random_coupling_map(10, seed=3)
    Y = f(X)
    np.testing.assert_allclose(f.inverse(Y), X, atol=1e-10)
    linear = LinearAligner().fit(X[:1500], Y[:1500])
    assert 0.1 < linear.score(X[1500:], Y[1500:]) < 0.9  # neither near-affine nor hopeless
    assert np.abs(Y).max() < 50
    assert not np.allclose(random_coupling_map(10, seed=4)(X), Y)


def test_synthetic_recovery_rows():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 6)) * np.array([100.0, 1.0, 0.01, 1.0, 5.0, 1.0])  # scales of real activations
    rows = synthetic_recovery(X[:200], X[200:250], X[250:], {"linear": ("linear", {}), "inn": ("inn", FAST)},
                              seed=2)
    assert [(r["aligner"], r["split"], r["map_seed"]) for r in rows] == [("linear", "test", 2), ("inn", "test", 2)]
    assert all(0 < r["rel_error"] < 1 for r in rows)


def test_aligner_rows_record_fit_rows_per_dimension_and_warn_below_five():
    from reprsim.aligners.evaluate import fit_and_score

    rng = np.random.default_rng(0)
    few = {"train": rng.normal(size=(40, 10)), "test": rng.normal(size=(20, 10))}
    many = {"train": rng.normal(size=(60, 10)), "test": rng.normal(size=(20, 10))}
    loose = fit_and_score("lin", "linear", {}, few, few, ("test",))[0]
    assert "n/k = 40/10 = 4.00 < 5" in loose["warning"] and json.loads(loose["meta"])["k"] == 10
    assert fit_and_score("lin", "linear", {}, many, many, ("test",))[0]["warning"] == ""
    canonical = json.loads(fit_and_score("cca", "cca", {}, many, many, ("test",))[0]["meta"])
    assert canonical["k"] == 20 and "warning" in canonical  # k_x + k_y = 20: 60 < 100
