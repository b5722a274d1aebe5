"""Subsample replicates of every measure for its confidence interval (reprsim.inference.resampling).

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
- recompute (procrustes, neuronsim, mixedsim, and cka whose Grams do not fit in memory: RBF CKA then
  rebuilds each subsample's Grams with every layer's bandwidth set on all rows, as gram-rows keeps it, so the
  interval does not depend on the memory budget).

A replicate where the measure is undefined (CCA with k_x + k_y above m − 1; for a measure that
leaves constant units out, a unit constant on the subsample but not on all rows: every replicate
leaves out the units constant on all rows, reprsim.metrics._inputs.kept_units) is NaN and left out
of the interval.
"""

from __future__ import annotations

import numpy as np
import torch

from reprsim.metrics import prepared
from reprsim.metrics.cka import cka_layers, grams_fit, rbf_medians

ROUTES = {"cka": "gram-rows", "cca": "restricted-bases", "svcca": "restricted-bases",
          "pwcca": "restricted-bases", "mutual_knn": "restricted-neighbours"}


def route(name: str, Xs: torch.Tensor, Ys: torch.Tensor) -> str:
    if name == "cka" and not grams_fit(Xs.shape, Ys.shape):
        return "recompute"
    return ROUTES.get(name, "recompute")


def replicate_draws(name: str, Xs: torch.Tensor, Ys: torch.Tensor, indices: np.ndarray, evaluate,
                    **params) -> tuple[np.ndarray, str]:
    """(B, D, L1, L2) replicate values (D directions, see reprsim.metrics.api.DirectedResult) and
    the route; `evaluate(Xs, Ys)` -> ((D, L1, L2), metas) is the measure itself. The shortcuts are
    those of two sides prepared in memory (reprsim.metrics.prepared)."""
    way = route(name, Xs, Ys)
    rows = torch.as_tensor(np.asarray(indices), device=Xs.device)
    if way != "recompute":
        key = prepared.family(name, params)
        sides = [prepared.prepare(Zs, key, rows) for Zs in (Xs, Ys)]
        return prepared.paired(name, params, key, *sides, Xs.shape[1], indices=rows).replicates, way
    if name == "cka" and params.get("kernel") == "rbf":
        evaluate = _rbf_with_bandwidths_of(Xs, Ys, params)
    draws = None
    for r, idx in enumerate(rows):
        try:
            values = evaluate(Xs[:, idx], Ys[:, idx])[0]
        except ValueError:  # undefined on this subsample (a unit constant on it alone): left out
            continue
        if draws is None:
            draws = np.full((len(rows), *values.shape), np.nan)
        draws[r] = values
    if draws is None:
        raise ValueError(f"{name} is undefined on every half-sample of the rows")
    return draws, way


def _rbf_with_bandwidths_of(Xs: torch.Tensor, Ys: torch.Tensor, params: dict):
    """RBF CKA on a subsample's rows with each layer's bandwidth from all rows of Xs and Ys."""
    threshold = params.get("threshold", 1.0)
    medians = (rbf_medians(Xs, threshold), rbf_medians(Ys, threshold))

    def evaluate(Xsub, Ysub):
        values, meta = cka_layers(Xsub, Ysub, **params, medians=medians)
        return values.cpu().numpy()[None], [meta]

    return evaluate
