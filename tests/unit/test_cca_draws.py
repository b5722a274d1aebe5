"""The CCA family's null and interval draws in batches (reprsim.metrics.cca: null_draws, restrict_draws,
replicate_draws): the numbers of one draw at a time, bit for bit, however the draws are chunked and wherever the
small decompositions run; a half-sample whose rank a layer loses gets the rank cut, as recomputing on it does."""

import numpy as np
import pytest
import torch

from reprsim.inference.resampling import half_samples
from reprsim.metrics import cca, memory
from reprsim.metrics.api import _evaluator
from reprsim.metrics.permutation import permutations
from reprsim.metrics.subsample import replicate_draws

KINDS = [("cca", {}), ("svcca", {"threshold": 0.9}), ("pwcca", {"pca_dims": 3}), ("pwcca", {"direction": "x"})]


@pytest.fixture
def sides():
    rng = np.random.default_rng(4)
    Xs = torch.as_tensor(rng.normal(size=(3, 40, 5)))
    Ys = torch.as_tensor(rng.normal(size=(2, 40, 4)))
    Ys[1] += Xs[0, :, :4]
    return Xs, Ys


def prepared_layers(kind, params, Xs, Ys):
    return cca.cca_prepared(kind, Xs, Ys, params)


def one_at_a_time_null(kind, params, px, py, n, perms):
    return torch.stack([cca.cca_layers_from(kind, px, py, params, n, permutation=p)[0] for p in perms])


def one_at_a_time_replicates(kind, params, px, py, indices):
    projection = kind == "pwcca"
    return torch.stack([cca.cca_layers_from(kind, [cca.restrict(a, idx, projection) for a in px],
                                            [cca.restrict(b, idx, projection) for b in py], params,
                                            indices.shape[1])[0] for idx in indices])


@pytest.mark.parametrize("kind, params", KINDS)
@pytest.mark.parametrize("budget_gb", [None, 1e-6])  # one chunk, and a chunk per draw
def test_batched_draws_are_those_of_one_draw_at_a_time(sides, kind, params, budget_gb):
    Xs, Ys = sides
    px, py = prepared_layers(kind, params, Xs, Ys)
    perms = permutations(40, 5, seed=1, device="cpu")
    indices = torch.as_tensor(half_samples(40, 6, seed=2))
    projection = kind == "pwcca"
    with memory.budget(budget_gb):
        null = cca.null_draws(kind, px, py, params, 40, perms)
        rx = [cca.restrict_draws(a, indices, projection) for a in px]
        ry = [cca.restrict_draws(b, indices, projection) for b in py]
        replicates = cca.replicate_draws(kind, rx, ry, params, 20, 6)
    assert torch.equal(null, one_at_a_time_null(kind, params, px, py, 40, perms))
    assert torch.equal(replicates, one_at_a_time_replicates(kind, params, px, py, indices))


@pytest.mark.parametrize("kind, params", KINDS[:3])
def test_where_the_decompositions_run_changes_nothing_on_a_cpu(sides, kind, params, monkeypatch):
    Xs, Ys = sides
    px, py = prepared_layers(kind, params, Xs, Ys)
    perms = permutations(40, 4, seed=1, device="cpu")
    on_host = cca.null_draws(kind, px, py, params, 40, perms)
    monkeypatch.setattr(cca, "SMALL_ON_HOST", False)
    assert torch.equal(cca.null_draws(kind, px, py, params, 40, perms), on_host)


def test_a_half_sample_that_loses_a_layers_rank_gets_the_rank_cut():
    """Column 3 of X marks rows 0 and 1: a half-sample without either sees it constant, so its centred coordinates
    along X's principal directions have rank 3 of 4; the draw equals CCA recomputed on the half-sample's rows."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(30, 4))
    X[:, 3] = 0.0
    X[:2, 3] = 10.0
    Xs, Ys = torch.as_tensor(X[None]), torch.as_tensor(rng.normal(size=(1, 30, 3)))
    indices = half_samples(30, 12, seed=0)
    assert any(0 not in idx and 1 not in idx for idx in indices)
    draws, route = replicate_draws("cca", Xs, Ys, indices, _evaluator("cca", {}))
    assert route == "restricted-bases"
    recomputed = np.stack([_evaluator("cca", {})(Xs[:, idx], Ys[:, idx])[0] for idx in indices])
    np.testing.assert_allclose(draws, recomputed, atol=1e-10)
    px, _ = prepared_layers("cca", {}, Xs, Ys)
    restricted = cca.restrict_draws(px[0], torch.as_tensor(indices), projection=False)
    lost = sorted(restricted["lost"])
    assert lost == [r for r, idx in enumerate(indices) if 0 not in idx and 1 not in idx]
    assert all(restricted["lost"][r]["dims"] == 3 == restricted["lost"][r]["basis"].shape[1] for r in lost)
