"""Subsample replicates of every measure for its confidence interval (reprsim.resampling).

Replicate r is the measure on rows `indices[r]` of both sides (half of the rows, without
replacement), for every layer pair. Routes, each equal to recomputing the measure on those rows
except where said:

- gram-rows (cka): each Gram is built once on all rows and restricted to the subsample's rows
  (then centred again); the RBF bandwidth σ stays the one set on all rows, part of the kernel.
- restricted-bases (cca, svcca, pwcca): the principal directions chosen on all rows (pca_dims,
  SVCCA's variance cut) are kept; the subsample's coordinates along them are centred and given
  a new orthonormal basis, so only the CCA itself is redone. PWCCA weighs by the subsample's
  own centred neurons.
- restricted-neighbours (mutual_knn): cosine similarities are row-wise, so the full matrix is
  restricted and the k nearest are searched among the subsample's rows (one layer's matrix at a
  time; beyond the memory budget, computed on the subsample's rows a block at a time).
- recompute (procrustes, neuronsim, mixedsim, and cka whose Grams do not fit in memory).

A replicate where the measure is undefined (a neuron constant on the subsample, CCA with
k_x + k_y above m − 1) is NaN and left out of the interval.
"""

from __future__ import annotations

import numpy as np
import torch

from reprsim.metrics import cca as cca_family
from reprsim.metrics.cca import cca_pair, cca_prepared
from reprsim.metrics.cka import gram_subsample_draws, grams_fit
from reprsim.metrics.knn import neighbour_lists, overlaps

ROUTES = {"cka": "gram-rows", "cca": "restricted-bases", "svcca": "restricted-bases",
          "pwcca": "restricted-bases", "mutual_knn": "restricted-neighbours"}


def route(name: str, Xs: torch.Tensor, Ys: torch.Tensor) -> str:
    if name == "cka" and not grams_fit(Xs.shape, Ys.shape):
        return "recompute"
    return ROUTES.get(name, "recompute")


def replicate_draws(name: str, Xs: torch.Tensor, Ys: torch.Tensor, indices: np.ndarray, evaluate,
                    **params) -> tuple[np.ndarray, str]:
    """(B, D, L1, L2) replicate values (D directions, see reprsim.metrics.api.DirectedResult) and
    the route; `evaluate(Xs, Ys)` -> ((D, L1, L2), metas) is the measure itself."""
    way = route(name, Xs, Ys)
    rows = [torch.as_tensor(idx, device=Xs.device) for idx in indices]
    if way == "gram-rows":
        return gram_subsample_draws(Xs, Ys, rows, **params).cpu().numpy()[:, None], way
    if way == "restricted-bases":
        return _cca_draws(name, Xs, Ys, rows, params), way
    if way == "restricted-neighbours":
        return _knn_draws(Xs, Ys, rows, params.get("k", 10))[:, None], way
    draws = None
    for r, idx in enumerate(rows):
        try:
            values = evaluate(Xs[:, idx], Ys[:, idx])[0]
        except ValueError:  # undefined on this subsample (a constant neuron): left out
            continue
        if draws is None:
            draws = np.full((len(rows), *values.shape), np.nan)
        draws[r] = values
    if draws is None:
        raise ValueError(f"{name} is undefined on every half-sample of the rows")
    return draws, way


def restrict(prepared: dict, idx: torch.Tensor) -> dict:
    """A prepared CCA side on a subset of its rows, along the principal directions chosen on all rows."""
    coordinates = prepared["basis"][idx]
    basis, triangle = torch.linalg.qr(coordinates - coordinates.mean(dim=0))
    diagonal = triangle.diagonal().abs()
    if diagonal.numel() and diagonal.min() <= cca_family.RANK_CUTOFF * diagonal.max():
        basis = cca_family.orthonormal_basis(coordinates - coordinates.mean(dim=0))[0]  # rank lost: cut it
    centred = prepared["centred"][idx]
    return cca_family.with_projection({**prepared, "centred": centred - centred.mean(dim=0), "basis": basis})


def _cca_draws(kind: str, Xs, Ys, rows, params: dict) -> np.ndarray:
    px, py = cca_prepared(kind, Xs, Ys, params)
    draws = np.full((len(rows), 2 if kind == "pwcca" else 1, len(px), len(py)), np.nan)
    for r, idx in enumerate(rows):
        sub_x, sub_y = [restrict(a, idx) for a in px], [restrict(b, idx) for b in py]
        for i, a in enumerate(sub_x):
            for j, b in enumerate(sub_y):
                draws[r, :, i, j] = cca_pair(kind, a, b, params, len(idx))[0]
    return draws


def _knn_draws(Xs, Ys, rows, k: int) -> np.ndarray:
    # every subset's neighbour lists, one layer's similarity matrix at a time (reprsim.metrics.knn)
    lists_x, lists_y = neighbour_lists(Xs, k, rows), neighbour_lists(Ys, k, rows)
    return np.stack([(overlaps(x, y) / (k * len(idx))).cpu().numpy() for x, y, idx in zip(lists_x, lists_y, rows)])
