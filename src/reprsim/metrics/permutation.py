"""Permutation null draws for every measure: the measure with Y's rows shuffled (correspondence
broken), one permutation shared by every layer pair of a draw.

Each route gives the numbers that recomputing the measure on the permuted rows gives (a test
checks it) at a fraction of the cost:

- gram-permutation (cka): permuting rows permutes the Gram matrix (K -> K[p][:, p], the RBF
  median included), so each Gram is built once and a draw costs O(L n²).
- permuted-bases (cca, svcca, pwcca): centring, PCA and the orthonormal basis commute with a
  row permutation, so each side is prepared once and a draw is one small SVD per layer pair.
- permuted-neighbours (mutual_knn): Y's neighbour sets are permuted, not searched again. Its
  null mean has an exact value, k / (n − 1) (a random k-subset of the n − 1 other rows).
  The neighbour sets are index lists (L, n, k), so a draw holds no n×n matrix.
- recompute (procrustes, neuronsim, mixedsim, and cka whose Grams do not fit in memory).
"""

from __future__ import annotations

import numpy as np
import torch

from reprsim.metrics.cca import cca_pair, cca_prepared
from reprsim.metrics.cka import gram_null_draws, grams_fit
from reprsim.metrics.knn import neighbour_lists, overlaps

ROUTES = {"cka": "gram-permutation", "cca": "permuted-bases", "svcca": "permuted-bases",
          "pwcca": "permuted-bases", "mutual_knn": "permuted-neighbours"}


def route(name: str, Xs: torch.Tensor, Ys: torch.Tensor) -> str:
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
    for the measures without a shortcut."""
    way = route(name, Xs, Ys)
    if way == "gram-permutation":
        draws = gram_null_draws(Xs, Ys, perms, **params).cpu().numpy()[:, None]
    elif way == "permuted-bases":
        draws = _cca_draws(name, Xs, Ys, perms, params)
    elif way == "permuted-neighbours":
        draws = _knn_draws(Xs, Ys, perms, params.get("k", 10))[:, None]
    else:
        draws = np.stack([evaluate(Xs, Ys[:, p])[0] for p in perms])
    return draws, way


def _cca_draws(kind: str, Xs, Ys, perms, params: dict) -> np.ndarray:
    px, py = cca_prepared(kind, Xs, Ys, params)
    n = Xs.shape[1]
    draws = np.full((len(perms), 2 if kind == "pwcca" else 1, len(px), len(py)), np.nan)
    for d, p in enumerate(perms):
        # the projection Qᵀ Z (PWCCA's weights) is unchanged by permuting both Q and Z
        permuted = [{**b, "centred": b["centred"][p], "basis": b["basis"][p]} for b in py]
        for i, a in enumerate(px):
            for j, b in enumerate(permuted):
                draws[d, :, i, j] = cca_pair(kind, a, b, params, n)[0]
    return draws


def _knn_draws(Xs, Ys, perms, k: int) -> np.ndarray:
    lists_x, lists_y = neighbour_lists(Xs, k), neighbour_lists(Ys, k)
    n = Xs.shape[1]
    draws = []
    for p in perms:
        # a row permutation p of Y maps its neighbour matrix N to N[p][:, p]: row i's neighbours become
        # p⁻¹ of the neighbours of row p[i]
        inverse = torch.empty_like(p)
        inverse[p] = torch.arange(n, device=p.device)
        draws.append((overlaps(lists_x, inverse[lists_y[:, p]]) / (k * n)).cpu().numpy())
    return np.stack(draws)


def exact_null_mean(name: str, n: int, params: dict) -> float | None:
    """The null mean where it is known in closed form (mutual k-NN: k / (n − 1)), else None."""
    if name == "mutual_knn":
        return params.get("k", 10) / (n - 1)
    return None

