"""Similarity measures between representations (rows = the same inputs), per docs/numerics.md.

    compute(name, X, Y, **params)         -> Result(value, meta)
    compute_layers(name, Xs, Ys, **params) -> LayerResult(values (L1, L2), meta)
    null(name, X, Y, n_permutations, seed) -> Result with null_mean, null_std, p_value
    null_layers(name, Xs, Ys, ...)         -> LayerResult with (L1, L2) null arrays in meta
    replicate_layers(name, Xs, Ys, indices) -> (B, L1, L2) values on row subsets (for intervals)
    directed_layers / directed_null / directed_replicates: the same with both directions of an
        asymmetric measure at once (values (D, L1, L2)), as the pairwise jobs use them

The API loads on first use, so torch-free submodules (distance) import without torch. It loads through importlib,
so that reprsim.workflow.codedeps, which follows import statements, does not count the api as a code input of every
job that imports some module of this package; the workflow imports the api by its module (reprsim.metrics.api).
"""

import importlib

_API = ("MEASURES", "PARAMETERS", "LayerResult", "Result", "check_params", "compute", "compute_layers", "null",
        "null_layers", "replicate_layers", "DirectedResult", "directed_layers", "directed_null",
        "directed_replicates")
_CKA = ("linear_cka", "linear_cka_layers")

__all__ = [*_API, *_CKA]


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module("reprsim.metrics.api"), name)
    if name in _CKA:
        return getattr(importlib.import_module("reprsim.metrics.cka"), name)
    raise AttributeError(f"module 'reprsim.metrics' has no attribute {name!r}")
