"""The invertible aligner (RealNVP couplings) and its non-bijective MLP bound."""

import numpy as np
import pytest
import torch

import rounding
from reprsim.aligners import make, random_coupling_map
from reprsim.aligners.inn import CouplingArchitecture, InvertibleLinear, RealNVP
from reprsim.aligners.linear import LinearAligner

QUICK = {"epochs": 5, "progress": False}


def _perturbed_flow(dim: int, seed: int) -> RealNVP:
    """A flow whose couplings and linear map are far from the identity, as after training: a random
    rotation and couplings with random weights in their last layers."""
    torch.manual_seed(seed)
    rotation = np.linalg.qr(np.random.default_rng(seed).normal(size=(dim, dim)))[0]
    flow = RealNVP(dim, layers=6, hidden=32, depth=2, scale_bound=2.0, linear=rotation)
    with torch.no_grad():
        for coupling in flow.couplings:
            coupling.conditioner[-1].weight.normal_(std=0.1)
    return flow


def _float32_rounding(flow: RealNVP, rows: torch.Tensor, scale: float) -> float:
    """tests/rounding.py's bound on float32 rounding in results of magnitude `scale` computed through `flow` (or back):
    on its way a value passes through sums of dim products (the linear map, its triangular solves) and of every
    conditioner layer's inputs, and the errors add; the flow's Jacobian at `rows` may amplify them by its condition."""
    products = rows.shape[1] + sum(layer.in_features for coupling in flow.couplings for layer in coupling.conditioner
                                   if isinstance(layer, torch.nn.Linear))
    # rows are mapped one by one, so the Jacobian of the column sums holds each row's own Jacobian
    jacobians = torch.autograd.functional.jacobian(lambda batch: flow(batch).sum(dim=0), rows, vectorize=True)
    singular = torch.linalg.svdvals(jacobians.transpose(0, 1).double())
    condition = (singular[:, 0] / singular[:, -1]).max().item()
    return rounding.products(products, scale=scale, condition=condition, dtype=np.float32)


@pytest.mark.parametrize("dim", [2, 7, 64])
def test_inverse_undoes_forward_in_float32(dim):
    flow = _perturbed_flow(dim, seed=dim)
    x = torch.randn(500, dim)
    with torch.no_grad():
        y, back = flow(x), flow.inverse(x)
    tolerance = _float32_rounding(flow, torch.cat([x, back]), scale=max(y.abs().max().item(), back.abs().max().item()))
    with torch.no_grad():
        assert (y - x).abs().max() > 0.5  # not the identity
        assert (flow.inverse(y) - x).abs().max() < tolerance
        assert (flow(back) - x).abs().max() < tolerance


def test_the_permutation_gather_gives_the_dense_products_numbers():
    """W = P·L·U with P applied as a gather of rows: forward, inverse and every gradient equal the dense
    product's bit for bit (a permutation matrix only moves entries)."""
    import scipy.linalg

    weight = np.random.default_rng(5).normal(size=(48, 48))
    layer = InvertibleLinear(weight)
    P = torch.as_tensor(scipy.linalg.lu(weight)[0], dtype=torch.float32)
    assert not torch.equal(P, torch.eye(48))  # the LU pivoted
    x = torch.randn(100, 48)

    def dense(x):
        lower, upper = layer.factors()
        return x @ (P @ lower @ upper)

    gradients = []
    for forward in (lambda x: layer(x)[0], dense):
        layer.zero_grad()
        y = forward(x)
        (y.square() * torch.linspace(0.5, 2.0, 48)).sum().backward()
        gradients.append((y.detach(), [p.grad.clone() for p in (layer.lower, layer.upper, layer.log_scale)]))
    (gathered, gathered_grads), (reference, reference_grads) = gradients
    assert torch.equal(gathered, reference)
    assert all(torch.equal(g, r) for g, r in zip(gathered_grads, reference_grads))
    with torch.no_grad():
        lower, upper = layer.factors()
        z = torch.linalg.solve_triangular(upper.T, reference.T, upper=False)
        z = torch.linalg.solve_triangular(lower.T, z, upper=True, unitriangular=True)
        assert torch.equal(layer.inverse(reference), (P @ z).T)


def test_log_det_jacobian_is_finite_and_matches_autograd():
    flow = _perturbed_flow(5, seed=1)
    x = torch.randn(4, 5)
    with torch.no_grad():
        _, log_det = flow.forward_with_log_det(x)
    assert torch.isfinite(log_det).all()
    for row, value in zip(x, log_det):
        jacobian = torch.autograd.functional.jacobian(lambda z: flow(z[None])[0], row)
        # a relative error ε in J's entries moves log |det J| by up to n·κ(J)·ε
        tolerance = _float32_rounding(flow, row[None], scale=len(row))
        assert float(value) == pytest.approx(float(torch.linalg.slogdet(jacobian)[1]), abs=tolerance)


def test_fitted_aligner_inverts_and_reports_its_log_det():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    Y = random_coupling_map(6, seed=0)(X)
    aligner = make("inn", **QUICK).fit(X[:300], Y[:300], X[300:350], Y[300:350])
    inputs = torch.as_tensor(aligner.x_scaler.forward(X[350:]), dtype=torch.float32)  # what the flow maps
    tolerance = aligner.x_scaler.std.max() * _float32_rounding(aligner.model, inputs, scale=inputs.abs().max().item())
    np.testing.assert_allclose(aligner.inverse(aligner.transform(X[350:])), X[350:], atol=tolerance)
    log_det = aligner.log_det_jacobian(X[350:])
    assert log_det.shape == (50,) and np.isfinite(log_det).all()


def test_recovers_a_noiseless_coupling_map_far_better_than_a_linear_map():
    """Ren et al. §4.3 in miniature: Y = f(X) for a random 4-d coupling network f."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1600, 4))
    Y = random_coupling_map(4, seed=1)(X)
    train, val, test = slice(0, 1200), slice(1200, 1400), slice(1400, 1600)
    linear = LinearAligner().fit(X[train], Y[train]).score(X[test], Y[test])
    inn = make("inn", hidden=32, layers=4, epochs=80, batch_size=64, progress=False).fit(
        X[train], Y[train], X[val], Y[val])
    assert inn.score(X[test], Y[test]) < 0.3 * linear
    assert inn.meta["best_epoch"] > 0 and inn.meta["val_error"] < 0.3 * linear


def test_same_seed_same_map_other_seed_other_map():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 6))
    Y = random_coupling_map(6, seed=2)(X)
    fits = [make("inn", seed=seed, **QUICK).fit(X[:250], Y[:250]) for seed in (3, 3, 4)]
    predictions = [fit.transform(X[250:]) for fit in fits]
    np.testing.assert_array_equal(predictions[0], predictions[1])
    assert not np.allclose(predictions[0], predictions[2])
    torch.manual_seed(0)
    expected = torch.rand(1)
    make("inn", **QUICK).fit(X[:200], Y[:200])
    torch.manual_seed(0)
    assert torch.rand(1) == expected  # fitting leaves the caller's random state alone


@pytest.mark.parametrize("d_x, d_y, side", [(10, 6, "x"), (6, 10, "y")])
def test_different_widths_work_in_a_pca_reduced_common_dimension(d_x, d_y, side):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, d_x))
    Y = np.tanh(X @ rng.normal(size=(d_x, d_y)))
    aligner = make("inn", **QUICK).fit(X[:200], Y[:200], X[200:250], Y[200:250])
    assert (aligner.reduced_dim, aligner.reduced_side) == (6, side)
    assert (aligner.meta["reduced_dim"], aligner.meta["reduced_side"]) == (6, side)
    assert aligner.transform(X[250:]).shape == (50, d_y)
    assert aligner.inverse(Y[250:]).shape == (50, d_x)


def test_progress_bar_goes_to_stderr_and_can_be_silenced(capsys):
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(100, 4)), rng.normal(size=(100, 4))
    make("inn", epochs=2).fit(X[:80], Y[:80], X[80:], Y[80:])
    captured = capsys.readouterr()
    assert "inn" in captured.err and "val_loss" in captured.err and captured.out == ""
    make("inn", epochs=2, progress=False).fit(X[:80], Y[:80], X[80:], Y[80:])
    assert capsys.readouterr().err == ""


def test_meta_is_json_and_says_what_training_did():
    import json

    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(100, 4)), rng.normal(size=(100, 4))
    aligner = make("inn", device="auto", **QUICK).fit(X[:80], Y[:80], X[80:], Y[80:])
    meta = json.loads(json.dumps(aligner.meta))
    assert {"epochs_run", "best_epoch", "val_error", "seconds", "device", "reduced_dim", "parameters"} <= set(meta)
    assert meta["parameters"] == CouplingArchitecture().parameter_count(4)


def test_mlp_matches_the_inn_parameter_count_and_has_no_inverse():
    rng = np.random.default_rng(6)
    X, Y = rng.normal(size=(200, 12)), rng.normal(size=(200, 8))
    mlp = make("mlp", **QUICK).fit(X[:150], Y[:150], X[150:], Y[150:])
    budget = CouplingArchitecture().parameter_count(8)
    assert abs(mlp.meta["parameters"] - budget) < 0.02 * budget
    assert not hasattr(mlp, "inverse")
