"""The stable entry points: compute, compute_layers and null, over every measure by name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from reprsim.metrics import cca as cca_family
from reprsim.metrics._inputs import device_of, dtype_name, layers, pair
from reprsim.metrics.cka import (
    GRAM_BYTES_LIMIT,
    cka_layers,
    gram_null_draws,
    minibatch_cka_layers,
)
from reprsim.metrics.knn import mutual_knn_layers
from reprsim.metrics.neuron import mixedsim_layers, neuronsim_layers
from reprsim.metrics.procrustes import procrustes_layers


@dataclass
class Result:
    value: float
    meta: dict = field(default_factory=dict)


@dataclass
class LayerResult:
    values: np.ndarray
    meta: dict = field(default_factory=dict)


def _cca_layers(kind: str) -> Callable:
    """CCA-family over all layer pairs: each layer's basis computed once, then one SVD per pair."""

    def run(Xs, Ys, **params):
        cca_family.check_params(kind, params)
        variance = params.get("threshold", 0.99) if kind == "svcca" else None
        pca_dims = params.get("pca_dims")
        px = [cca_family.prepare(X, pca_dims, variance) for X in Xs]
        py = [cca_family.prepare(Y, pca_dims, variance) for Y in Ys]
        values = torch.empty(len(px), len(py), dtype=torch.float64)
        metas = {}
        for i, a in enumerate(px):
            for j, b in enumerate(py):
                if kind == "pwcca":
                    value, meta = cca_family.pwcca_from(a, b, params.get("direction", "min"))
                else:
                    value, meta = cca_family.cca_from(a, b)
                values[i, j] = value
                metas[(i, j)] = {**{k: v for k, v in meta.items() if k != "rho"},
                                 "k_x": a["dims"], "k_y": b["dims"], "pca_x": a["pca"], "pca_y": b["pca"]}
        return values, {"per_pair": metas}

    return run


# name -> (layers function, similarity or distance, symmetric?)
MEASURES: dict[str, tuple[Callable, str, bool]] = {
    "cka": (cka_layers, "similarity", True),
    "cka_minibatch": (lambda Xs, Ys, batch_size=1024, **p: minibatch_cka_layers(Xs, Ys, batch_size, **p),
                      "similarity", True),
    "cca": (_cca_layers("cca"), "similarity", True),
    "svcca": (_cca_layers("svcca"), "similarity", True),
    "pwcca": (_cca_layers("pwcca"), "similarity", False),
    "procrustes": (procrustes_layers, "distance", True),
    "neuronsim": (neuronsim_layers, "similarity", False),
    "mixedsim": (mixedsim_layers, "similarity", False),
    "mutual_knn": (mutual_knn_layers, "similarity", True),
}


# parameters each measure accepts (checked before any computation, so a typo is named)
PARAMETERS: dict[str, tuple[str, ...]] = {
    "cka": ("kernel", "estimator", "threshold"),
    "cka_minibatch": ("batch_size", "kernel", "threshold"),
    "cca": ("pca_dims",),
    "svcca": ("threshold", "pca_dims"),
    "pwcca": ("direction", "pca_dims"),
    "procrustes": (),
    "neuronsim": (),
    "mixedsim": ("pca_dims",),
    "mutual_knn": ("k",),
}


def check_params(name: str, params: dict) -> None:
    _measure(name)
    unknown = sorted(set(params) - set(PARAMETERS[name]))
    if unknown:
        allowed = ", ".join(PARAMETERS[name]) or "none"
        raise ValueError(f"measure {name!r} has no parameter(s) {unknown}; allowed: {allowed}")


def _measure(name: str):
    if name not in MEASURES:
        raise ValueError(f"unknown measure {name!r}; available: {', '.join(sorted(MEASURES))}")
    return MEASURES[name]


def compute_layers(name: str, Xs, Ys, **params) -> LayerResult:
    """`name` for every layer pair of Xs (L1, n, d1) and Ys (L2, n, d2): values (L1, L2) and meta."""
    function, kind, symmetric = _measure(name)
    check_params(name, params)
    first = Xs[0] if isinstance(Xs, (list, tuple)) else Xs
    dtype = dtype_name(first)
    Xs_t = layers(Xs, name="Xs")
    Ys_t = layers(Ys, Xs_t.device, name="Ys")
    if Xs_t.shape[1] != Ys_t.shape[1]:
        raise ValueError(f"X and Y must have the same rows (inputs); got n={Xs_t.shape[1]} and n={Ys_t.shape[1]}")
    values, meta = function(Xs_t, Ys_t, **params)
    meta = {"measure": name, "kind": kind, "symmetric": symmetric, "n": int(Xs_t.shape[1]),
            "d_x": int(Xs_t.shape[2]), "d_y": int(Ys_t.shape[2]), "dtype": dtype,
            "device": str(device_of(first)), **params, **meta}
    return LayerResult(values.cpu().numpy(), meta)


def compute(name: str, X, Y, **params) -> Result:
    """`name` for one pair X (n, d1), Y (n, d2): a float value and its meta."""
    X_t, Y_t = pair(X, Y)
    result = compute_layers(name, X_t[None], Y_t[None], **params)
    meta = {**result.meta, "dtype": dtype_name(X), "device": str(device_of(X))}
    per_pair = meta.pop("per_pair", None)
    if per_pair:
        meta.update(per_pair[(0, 0)])
    return Result(float(result.values[0, 0]), meta)


def null(name: str, X, Y, n_permutations: int = 200, seed: int = 0, **params) -> Result:
    """Permutation null: `name` with the rows of Y shuffled (correspondence broken).

    p-value = (1 + #{null at least as extreme}) / (1 + n_permutations), extreme meaning
    ≥ the observed value for a similarity and ≤ for a distance.
    """
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be ≥ 1; got {n_permutations}")
    observed = compute(name, X, Y, **params)
    X_t, Y_t = pair(X, Y)
    generator = torch.Generator().manual_seed(seed)
    draws = np.array([
        compute(name, X_t, Y_t[torch.randperm(Y_t.shape[0], generator=generator).to(Y_t.device)], **params).value
        for _ in range(n_permutations)
    ])
    extreme = draws >= observed.value if observed.meta["kind"] == "similarity" else draws <= observed.value
    return Result(observed.value, {**observed.meta, "null_mean": float(draws.mean()), "null_std": float(draws.std()),
                                   "p_value": float((1 + extreme.sum()) / (1 + n_permutations)),
                                   "n_permutations": n_permutations, "seed": seed})


def null_layers(name: str, Xs, Ys, n_permutations: int = 100, seed: int = 0, **params) -> LayerResult:
    """Permutation null for every layer pair: one row permutation of Y per draw, shared by all layers.

    meta gains null_mean, null_std and p_value arrays (L1, L2), with p-values as in `null`.
    """
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be ≥ 1; got {n_permutations}")
    observed = compute_layers(name, Xs, Ys, **params)
    Xs_t = layers(Xs, name="Xs")
    Ys_t = layers(Ys, Xs_t.device, name="Ys")
    generator = torch.Generator().manual_seed(seed)
    permutations = [torch.randperm(Ys_t.shape[1], generator=generator).to(Ys_t.device) for _ in range(n_permutations)]
    n = Xs_t.shape[1]
    if name == "cka" and max(Xs_t.shape[0], Ys_t.shape[0]) * n * n * 8 <= GRAM_BYTES_LIMIT:
        draws = gram_null_draws(Xs_t, Ys_t, permutations, **params).cpu().numpy()  # each Gram built once
    else:
        draws = np.stack([compute_layers(name, Xs_t, Ys_t[:, p], **params).values for p in permutations])
    if observed.meta["kind"] == "similarity":
        extreme = draws >= observed.values[None]
    else:
        extreme = draws <= observed.values[None]
    meta = {**observed.meta, "null_mean": draws.mean(axis=0), "null_std": draws.std(axis=0),
            "p_value": (1 + extreme.sum(axis=0)) / (1 + n_permutations), "n_permutations": n_permutations,
            "seed": seed}
    return LayerResult(observed.values, meta)
