"""A layer stack reduced to fewer dimensions: the dimension placebo (universality.dimension_placebo,
reprsim.design.dimension_placebo), a model's layers reduced to another model's width and scored as if they were that
model's, so that what dimension alone does to a measure is seen with nothing learned differently."""

from __future__ import annotations

import torch

REDUCTIONS = ("pca", "random")


def reduce_stack(stack: torch.Tensor, method: str, dims: int, seed: int = 0) -> torch.Tensor:
    """Every layer of a stack (layers, n, d) reduced to `dims` columns, a new (layers, n, dims) tensor.

    pca: each row's coordinates in the layer's top `dims` principal directions (of the centred rows); the rows are
    projected, not centred, so a measure that reads the mean (cosines of raw states) still sees its part in the
    subspace. random: the rows times a Gaussian d × dims matrix over sqrt(dims) (Johnson–Lindenstrauss: distances
    kept in expectation), one matrix per layer from a generator seeded with `seed`."""
    layers, n, width = stack.shape
    if not 0 < dims < width:
        raise ValueError(f"a reduction to {dims} dimensions of layers {width} wide: it must be to fewer, and at least 1")
    if method == "pca":
        if dims > n:
            raise ValueError(f"a reduction to {dims} principal directions of {n} rows: at most {n} exist")
        reduced = []
        for layer in stack:
            _, _, Vh = torch.linalg.svd(layer - layer.mean(dim=0), full_matrices=False)
            reduced.append(layer @ Vh[:dims].T)
        return torch.stack(reduced)
    if method == "random":
        generator = torch.Generator().manual_seed(int(seed))
        maps = torch.randn((layers, width, dims), generator=generator, dtype=torch.float64) / dims ** 0.5
        return torch.bmm(stack, maps.to(device=stack.device, dtype=stack.dtype))
    raise ValueError(f"unknown reduction {method!r}; one of {', '.join(REDUCTIONS)}")
