"""Similarity measures between representations (rows = the same inputs), per numerics.md.

    compute(name, X, Y, **params)         -> Result(value, meta)
    compute_layers(name, Xs, Ys, **params) -> LayerResult(values (L1, L2), meta)
    null(name, X, Y, n_permutations, seed) -> Result with null_mean, null_std, p_value
"""

from reprsim.metrics.api import MEASURES, LayerResult, Result, compute, compute_layers, null
from reprsim.metrics.cka import linear_cka, linear_cka_layers

__all__ = ["MEASURES", "LayerResult", "Result", "compute", "compute_layers", "linear_cka", "linear_cka_layers", "null"]
