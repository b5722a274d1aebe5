"""The dimension placebo's reduction (reprsim.metrics.reduction.reduce_stack) and its plan
(reprsim.design.dimension_placebo): PCA keeps the rows' geometry whenever the centred rows fit in the kept directions and
is blind to a rotation of the units; a random projection keeps squared lengths in expectation and is fixed by its
seed; a reduction to as many dimensions as the layer has, or to more directions than rows, is refused by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from reprsim.design.dimension_placebo import dimension_placebos
from reprsim.metrics.reduction import reduce_stack


def _gram(Z: torch.Tensor) -> torch.Tensor:
    centred = Z - Z.mean(dim=0)
    return centred @ centred.T


def test_pca_keeps_the_centred_geometry_of_rows_of_lower_rank_and_ignores_rotations():
    rng = np.random.default_rng(0)
    low = rng.normal(size=(2, 60, 5)) @ rng.normal(size=(5, 40)) + rng.normal(size=(1, 1, 40))  # rank 5, a mean
    stack = torch.from_numpy(low)
    reduced = reduce_stack(stack, "pca", 8)
    assert reduced.shape == (2, 60, 8)
    for layer, full in zip(reduced, stack):
        # the centred rows lie in 5 directions: 8 keep every distance (float64 SVD: round-off of order 1e-12)
        torch.testing.assert_close(_gram(layer), _gram(full), rtol=1e-9, atol=1e-9 * float(_gram(full).abs().max()))
    rotation = torch.from_numpy(np.linalg.qr(rng.normal(size=(40, 40)))[0])
    rotated = reduce_stack(stack @ rotation, "pca", 3)
    for a, b in zip(rotated, reduce_stack(stack, "pca", 3)):
        torch.testing.assert_close(_gram(a), _gram(b), rtol=1e-9, atol=1e-9 * float(_gram(b).abs().max()))


def test_a_random_projection_keeps_squared_lengths_in_expectation_and_is_fixed_by_its_seed():
    rng = np.random.default_rng(1)
    stack = torch.from_numpy(rng.normal(size=(3, 500, 128)))
    reduced = reduce_stack(stack, "random", 64, seed=4)
    ratio = (reduced.pow(2).sum(-1) / stack.pow(2).sum(-1)).mean()
    # each row's ratio is chi-squared(64)/64-like (sd 0.18); 1,500 rows: the mean's sd is under 0.005
    assert abs(float(ratio) - 1) < 0.03
    assert torch.equal(reduced, reduce_stack(stack, "random", 64, seed=4))
    assert not torch.equal(reduced, reduce_stack(stack, "random", 64, seed=5))


@pytest.mark.parametrize("method, dims, message", [
    ("pca", 128, "a reduction to 128 dimensions of layers 128 wide: it must be to fewer"),
    ("pca", 40, "a reduction to 40 principal directions of 30 rows: at most 30 exist"),
    ("svd", 8, "unknown reduction 'svd'; one of pca, random"),
])
def test_an_impossible_reduction_is_refused_by_name(method, dims, message):
    with pytest.raises(ValueError, match=message):
        reduce_stack(torch.zeros(1, 30, 128, dtype=torch.float64), method, dims)


def test_the_placebos_are_one_per_method_and_narrower_width():
    specs = {name: {"config": {"n_embd": width}, "seed": seed} for name, width, seed in (
        ("ref-s0", 128, 0), ("ref-s1", 128, 1), ("w64-s3", 64, 3), ("w256-s3", 256, 3))}
    study = {"reference": ["ref-s0", "ref-s1"], "floor": [],
             "factors": {"width": {"n_embd 64": ["w64-s3"], "n_embd 256": ["w256-s3"]}},
             "dimension_placebo": {"methods": ["random", "pca"], "widths": None, "seed": 0}}
    placebos = dimension_placebos(specs, study)
    assert [(p.job, p.level, p.width_level) for p in placebos] == [
        ("random64", "a random projection to 64 dims (as n_embd 64)", "n_embd 64"),
        ("pca64", "PCA to 64 dims (as n_embd 64)", "n_embd 64")]
    assert placebos[0].names == {"ref-s0": "ref-s0~random64", "ref-s1": "ref-s1~random64"}
    assert dimension_placebos(specs, {**study, "dimension_placebo": None}) == []
