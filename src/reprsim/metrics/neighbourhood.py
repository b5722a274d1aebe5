"""Neighbourhood similarities: Jaccard k-NN, second-order cosine (Hamilton et al. 2016), rank similarity
(Wang et al. 2020). Symmetric; a row's neighbours are its k nearest other rows by cosine, as in mutual k-NN.

Neighbour lists and cosine similarities come from reprsim.metrics.knn, once per layer; only the overlap work
is done per layer pair. Invariant to rotations, unit permutations and (per-row) positive scaling, not to
translation or general linear maps.

- ReSi fills the second-order vectors with cosine distances; reprsim uses cosine similarities, as Hamilton et
  al. define them (the cosine of two vectors changes under x ↦ 1 − x, so the two differ).
"""

from __future__ import annotations

import torch

from reprsim.metrics._inputs import layer_pair
from reprsim.metrics.knn import cosine_similarity, neighbour_lists


def _inputs(Xs, Ys, k, measure: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Xs, Ys as float64 layers with the same rows, no all-zero row, and a valid k."""
    Xs, Ys = layer_pair(Xs, Ys)
    n = Xs.shape[1]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k < n:
        raise ValueError(f"{measure}: k must be an integer with 1 ≤ k < n = {n}; got k={k!r}")
    for side, Zs in (("X", Xs), ("Y", Ys)):
        zero = (Zs == 0).all(dim=-1).nonzero()
        if len(zero):
            layer, row = zero[0].tolist()
            raise ValueError(
                f"{measure}: {side} layer {layer} row {row} is all zeros; its cosine neighbours are undefined"
            )
    return Xs, Ys


def _ranks_in_y(lists_x: torch.Tensor, lists_y: torch.Tensor) -> torch.Tensor:
    """(L1, L2, n, k): where X layer a's t-th neighbour of row i stands (1..k) in Y layer b's list of row i,
    0 where it is not there. One n×n rank table per Y layer, looked up at X's lists (top-k lists are sorted,
    so a list position is a rank)."""
    L1, n, k = lists_x.shape
    rows = torch.arange(n, device=lists_x.device)[:, None]
    ranks = torch.arange(1, k + 1, device=lists_x.device).expand(n, k)
    table = torch.zeros(n, n, dtype=torch.int64, device=lists_x.device)
    found = []
    for list_y in lists_y:
        table.zero_()
        table.scatter_(1, list_y, ranks)
        found.append(table[rows, lists_x])
    return torch.stack(found, dim=1)


def jaccard_knn_layers(Xs: torch.Tensor, Ys: torch.Tensor, k: int = 10) -> tuple[torch.Tensor, dict]:
    """Mean over rows of |N_k(i) ∩ N'_k(i)| / |N_k(i) ∪ N'_k(i)| = m_i / (2k − m_i), m_i the overlap that
    mutual k-NN averages as m_i / k (so Jaccard ≤ mutual k-NN, equal at k = 1)."""
    Xs, Ys = _inputs(Xs, Ys, k, "jaccard_knn")
    overlap = (_ranks_in_y(neighbour_lists(Xs, k), neighbour_lists(Ys, k)) > 0).sum(dim=-1).to(torch.float64)
    return (overlap / (2 * k - overlap)).mean(dim=-1), {"k": k, "neighbours": "cosine"}


def rank_similarity_layers(Xs: torch.Tensor, Ys: torch.Tensor, k: int = 10) -> tuple[torch.Tensor, dict]:
    """Wang et al. (2020): mean over rows of s_i = (1/H_|J_i|) Σ_{j∈J_i} 2 / ((1 + |ρ − ρ'|)(ρ + ρ')), J_i the
    shared neighbours, ρ, ρ' their ranks (1..k) in each list; s_i = 0 when J_i is empty. Normalised by |J_i|,
    not k: one shared neighbour at rank 1 in both scores 1 (small overlap is not penalised)."""
    Xs, Ys = _inputs(Xs, Ys, k, "rank_similarity")
    rho_y = _ranks_in_y(neighbour_lists(Xs, k), neighbour_lists(Ys, k)).to(torch.float64)
    rho_x = torch.arange(1, k + 1, dtype=torch.float64, device=Xs.device)
    shared = rho_y > 0
    terms = torch.where(shared, 2 / ((1 + (rho_x - rho_y).abs()) * (rho_x + rho_y)), 0.0)
    one = torch.ones(1, dtype=torch.float64, device=Xs.device)
    harmonic = torch.cat([one, torch.cumsum(1 / rho_x, 0)])  # H_0 := 1: the empty sum stays 0
    normaliser = harmonic[shared.sum(dim=-1)]
    return (terms.sum(dim=-1) / normaliser).mean(dim=-1), {"k": k, "neighbours": "cosine"}


def second_order_cosine_layers(Xs: torch.Tensor, Ys: torch.Tensor, k: int = 10) -> tuple[torch.Tensor, dict]:
    """Hamilton, Leskovec & Jurafsky (2016): mean over rows of cos(v_i, v'_i), v_i (v'_i) the cosine similarities
    in X (Y) of row i to the rows of U_i = N_k(i) ∪ N'_k(i). In [−1, 1]; 1 on identical inputs.

    ReSi fills v_i with cosine distances (values in [0, 1]); reprsim follows the paper. Each layer's n×n cosine
    similarity and neighbour list are built once (Y's all held, X's one at a time). U_i is taken as X's k
    neighbours and those of Y's not among them (2k entries, the repeats masked): the sums over U_i are gathers,
    O(nk) per layer pair where an n×n union mask would be O(n²). Raises ValueError where a row's similarities
    to all of U_i are 0 (v_i = 0)."""
    Xs, Ys = _inputs(Xs, Ys, k, "second_order_cosine")
    rows = torch.arange(Xs.shape[1], device=Xs.device)[:, None]
    similarity_y = cosine_similarity(Ys)
    lists_y = torch.stack([_nearest(similarity, k) for similarity in similarity_y])
    own_y = similarity_y.gather(2, lists_y)  # (L2, n, k)
    values = torch.empty(Xs.shape[0], Ys.shape[0], dtype=torch.float64, device=Xs.device)
    for a, X in enumerate(Xs):
        similarity_x = cosine_similarity(X[None])[0]
        list_x = _nearest(similarity_x, k)
        own_x = similarity_x.gather(1, list_x)  # (n, k)
        y_at_x = similarity_y[:, rows, list_x]  # (L2, n, k): in Y, row i to X's neighbours of i
        only_y = _ranks_in_y(lists_y, list_x[None])[:, 0] == 0  # Y's neighbours that are not X's
        x_at_y = torch.where(only_y, similarity_x[rows, lists_y], 0.0)  # in X, row i to those
        y_at_y = torch.where(only_y, own_y, 0.0)
        dot = (own_x * y_at_x).sum(dim=-1) + (x_at_y * y_at_y).sum(dim=-1)
        norm_x = (own_x**2).sum(dim=-1) + (x_at_y**2).sum(dim=-1)
        norms = norm_x * ((y_at_x**2).sum(dim=-1) + (y_at_y**2).sum(dim=-1))
        if (norms == 0).any():
            b, row = (norms == 0).nonzero()[0].tolist()
            raise ValueError(
                f"second_order_cosine: row {row} is orthogonal to all its neighbours in X layer {a} or "
                f"Y layer {b}; the cosine of its similarity vectors is undefined"
            )
        values[a] = (dot / norms.sqrt()).mean(dim=-1)
    return values, {"k": k, "neighbours": "cosine", "vectors": "cosine similarity"}


def _nearest(similarity: torch.Tensor, k: int) -> torch.Tensor:
    """(n, k) the k most similar other rows, most similar first, from an n×n similarity (topk, as knn)."""
    similarity = similarity.clone().fill_diagonal_(float("-inf"))
    return similarity.topk(k, dim=-1).indices
