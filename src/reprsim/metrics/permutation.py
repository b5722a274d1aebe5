"""Permutation null draws for every measure: the measure with Y's rows shuffled (correspondence
broken), one permutation shared by every layer pair of a draw.

Each route gives the numbers that recomputing the measure on the permuted rows gives (a test
checks it) at a fraction of the cost:

- gram-permutation (cka): permuting rows permutes the Gram matrix (K -> K[p][:, p], the RBF
  median included), so each Gram is built once and a draw costs O(L n²).
- permuted-bases (cca, svcca, pwcca): centring, PCA and the orthonormal basis commute with a
  row permutation, so each side is prepared once and a draw is one small SVD per layer pair.
- permuted-neighbours (mutual_knn, cknna): Y's neighbour sets are permuted, not searched again. mutual_knn's
  null mean has an exact value, k / (n − 1) (a random k-subset of the n − 1 other rows).
  The neighbour sets are index lists (L, n, k), so a draw holds no n×n matrix. cknna's lists carry their
  cosines, mutual flags and self terms along (reprsim.metrics.cknna.null_draws): a draw relabels and sorts them.
- permuted-triangles (rsa): permuting rows permutes the RDM's entries, whose values (hence ranks) stay, so each
  layer's triangle is ranked once and a draw re-indexes Y's (reprsim.metrics.rsm.rsa_null_draws): no sort per draw.
- unchanged (the statistics measures: magnitude, concentricity, uniformity differences): they compare a summary of
  each point cloud and never use the row correspondence, so every draw is the value itself (the registry's
  `correspondence` flag; a test checks it), and none is computed.
- recompute (every other measure, and cka whose Grams do not fit in memory). A measure that leaves constant
  units out leaves out those of the unpermuted rows in every draw (reprsim.metrics.api.unit_masks).
"""

from __future__ import annotations

import numpy as np
import torch

from reprsim import measure_registry as registry
from reprsim.metrics import cknna, prepared, rsm
from reprsim.metrics.cka import grams_fit

ROUTES = {"cka": "gram-permutation", "cca": "permuted-bases", "svcca": "permuted-bases",
          "pwcca": "permuted-bases", "mutual_knn": "permuted-neighbours", "cknna": "permuted-neighbours",
          "rsa": "permuted-triangles"}


def route(name: str, Xs: torch.Tensor, Ys: torch.Tensor) -> str:
    if not registry.get(name).correspondence:
        return "unchanged"
    if name == "cka" and not grams_fit(Xs.shape, Ys.shape):
        return "recompute"
    return ROUTES.get(name, "recompute")


def permutations(n: int, count: int, seed: int, device) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randperm(n, generator=generator).to(device) for _ in range(count)]


def null_draws(name: str, Xs: torch.Tensor, Ys: torch.Tensor, perms: list[torch.Tensor], evaluate,
               **params) -> tuple[np.ndarray, str]:
    """(P, D, L1, L2) null values (D directions, see reprsim.metrics.api.DirectedResult), and the
    route that computed them. `evaluate(Xs, Ys)` -> ((D, L1, L2), metas) is the measure itself,
    for the measures without a shortcut; the shortcuts are those of two sides prepared in memory
    (reprsim.metrics.prepared)."""
    way = route(name, Xs, Ys)
    if way == "unchanged":
        values = evaluate(Xs, Ys)[0]
        return np.repeat(values[None], len(perms), axis=0), way
    if way == "recompute":
        return np.stack([evaluate(Xs, Ys[:, p])[0] for p in perms]), way
    if way == "permuted-triangles":
        return rsm.rsa_null_draws(Xs, Ys, perms, **params)[:, None].cpu().numpy(), way
    if name == "cknna":
        return cknna.null_draws(Xs, Ys, perms, **params), way
    key = prepared.family(name, params)
    sides = [prepared.prepare(Zs, key) for Zs in (Xs, Ys)]
    return prepared.paired(name, params, key, *sides, Xs.shape[1], permutations=perms).null, way


def exact_null_mean(name: str, n: int, params: dict) -> float | None:
    """The null mean where it is known in closed form (mutual k-NN: k / (n − 1)), else None."""
    if name == "mutual_knn":
        return params.get("k", 10) / (n - 1)
    return None

