"""CKNNA, centered kernel nearest-neighbour alignment (Huh, Cheung, Wang & Isola 2024), batched over layers.

The measure of platonic-rep's `metrics.AlignmentMetrics.cknna(feats_A, feats_B, topk)` (github.com/minyoungg/
platonic-rep) at its defaults (unbiased=True, distance_agnostic=False), on rows scaled to unit norm as its
`measure_alignment.compute_score` calls it (normalize=True). For X's cosine kernel K = X̂X̂ᵀ (X̂: the rows of X
over their norms), Y's L = ŶŶᵀ, and N^X(i) the k rows most similar to row i by cosine, itself excluded (mutual
k-NN's neighbours):

    M^X_ij = [j ∈ N^X(i)],   M_ij = M^X_ij · M^Y_ij   (the neighbours both spaces give row i; not symmetric)
    CKNNA(X → Y) = HSIC₁(K∘M, L∘M) / sqrt(HSIC₁(K∘M^X, K∘M^X) · HSIC₁(L∘M^Y, L∘M^Y))

with Song et al.'s unbiased HSIC₁ as the reference evaluates it on any two n × n matrices A, B of zero diagonal
(masked, they are not symmetric):

    HSIC₁(A, B) = [Σ_ij A_ij B_ji + (1ᵀA1)(1ᵀB1)/((n−1)(n−2)) − 2·(Aᵀ1)·(B1)/(n−2)] / (n(n−3))

Nothing n × n is kept but the similarity rows the neighbour search goes through (a block of rows at a time within
the working-memory budget, reprsim.metrics.memory). Each side is its neighbour lists (n, k), the cosines on them,
whether each neighbour has the row among its own (only such pairs enter Σ_ij A_ij B_ji) and its self term; a layer
pair looks X's neighbours up among Y's (sorted keys i·n + j), so it costs O(nk log nk).

- Asymmetric: 1ᵀAB1 ≠ 1ᵀBA1 for non-symmetric A, B, so CKNNA(X → Y) and CKNNA(Y → X) (the reference with its
  arguments swapped) differ, by ~1e-3 on random data; both directions come from one computation
  (:func:`cknna_both_layers`), only that term differing.
- Not bounded by 1: the numerator keeps the pairs both spaces mark, each self term its own side's; where few
  neighbour pairs are mutual (hub rows) a self term's centring terms shrink it and the value can exceed 1.
  Identical inputs give 1.
- Departures from the reference: no 1e-6 in the denominator (it moves the value by ~1e-6 / HSIC₁, 3e-5 at n = 50,
  k = 5, and breaks CKNNA(X, X) = 1); a self term ≤ 0 makes the value NaN (the reference divides by the root of
  the product of two negative self terms); an all-zero row raises (its cosine neighbours are undefined); k ≥ 2 as
  the reference requires, k < n and n ≥ 4.
- k = n − 1 marks every other row: CKNNA is then the unbiased linear CKA of the row-normalised layers.
"""

from __future__ import annotations

import numpy as np
import torch

from reprsim.metrics._inputs import layer_pair
from reprsim.metrics.memory import rows_per_chunk


def _inputs(Xs, Ys, k) -> tuple[torch.Tensor, torch.Tensor]:
    """Xs, Ys as float64 layers with the same rows, no all-zero row, and a valid k."""
    Xs, Ys = layer_pair(Xs, Ys)
    check_k(k, Xs.shape[1])
    for side, Zs in (("X", Xs), ("Y", Ys)):
        zero = (Zs == 0).all(dim=-1).nonzero()
        if len(zero):
            layer, row = zero[0].tolist()
            raise ValueError(f"cknna: {side} layer {layer} row {row} is all zeros; its cosine neighbours are undefined")
    return Xs, Ys


def check_k(k, n: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 2 <= k < n:
        raise ValueError(f"cknna: k must be an integer with 2 ≤ k < n = {n}; got k={k!r}")
    if n < 4:
        raise ValueError(f"cknna: the unbiased HSIC estimator needs n ≥ 4 rows; got n={n}")


def _neighbours(Z: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, k) cosines and indices of each row's k most similar other rows (torch.topk's order and ties), from a
    block of rows of the n × n cosine matrix at a time."""
    unit = Z / torch.linalg.vector_norm(Z, dim=-1, keepdim=True)
    n = unit.shape[0]
    step = rows_per_chunk(n, n, copies=3)
    values, indices = [], []
    for start in range(0, n, step):
        block = unit[start:start + step] @ unit.T
        rows = torch.arange(block.shape[0], device=block.device)
        block[rows, rows + start] = float("-inf")
        found = block.topk(k, dim=-1)
        values.append(found.values)
        indices.append(found.indices)
    return torch.cat(values), torch.cat(indices)


def _hsic(trace, total_a, total_b, cols_a, rows_b, n: int) -> torch.Tensor:
    """HSIC₁(A, B) from Σ_ij A_ij B_ji, 1ᵀA1, 1ᵀB1, Aᵀ1 and B1."""
    return (trace + total_a * total_b / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (cols_a @ rows_b)) / (n * (n - 3))


def side(Z: torch.Tensor, k: int) -> dict:
    """One layer's share of every pair: its neighbour lists, the cosines on them, whether row i is among the
    neighbours of its t-th neighbour (`mutual`), the lists' sorted keys i·n + j with their positions, and
    HSIC₁(K∘M, K∘M) (`self`)."""
    values, lists = _neighbours(Z, k)
    n = Z.shape[0]
    keys = _sorted(_keys(lists))
    mutual = _lookup(keys, _reversed_keys(lists))[0].view(n, k)
    rows = values.sum(dim=1)
    cols = torch.zeros(n, dtype=values.dtype, device=values.device)
    cols.index_add_(0, lists.reshape(-1), values.reshape(-1))
    trace = torch.where(mutual, values * values, 0.0).sum()
    total = values.sum()
    return {"lists": lists, "values": values, "mutual": mutual, **keys,
            "self": _hsic(trace, total, total, cols, rows, n)}


def _keys(lists: torch.Tensor) -> torch.Tensor:
    """i·n + j for each neighbour j of row i, flattened in row-major (i, t) order."""
    n = lists.shape[0]
    return (torch.arange(n, device=lists.device)[:, None] * n + lists).reshape(-1)


def _reversed_keys(lists: torch.Tensor) -> torch.Tensor:
    """j·n + i for each neighbour j of row i (the pair seen from j), in the order of :func:`_keys`."""
    n = lists.shape[0]
    return (lists * n + torch.arange(n, device=lists.device)[:, None]).reshape(-1)


def _sorted(keys: torch.Tensor) -> dict:
    ordered, order = torch.sort(keys)
    return {"sorted": ordered, "order": order}


def _lookup(found_in: dict, wanted: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Whether each of `wanted` is among the keys sorted in `found_in` (:func:`_sorted`), and its position in the
    unsorted keys (any valid position where it is not)."""
    ordered = found_in["sorted"]
    at = torch.searchsorted(ordered, wanted).clamp_(max=len(ordered) - 1)
    return ordered[at] == wanted, found_in["order"][at]


def _pair(x: dict, y: dict, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """HSIC₁(K∘M, L∘M) and HSIC₁(L∘M, K∘M) of two sides, on X's neighbour positions (M marks some of them)."""
    both, at = _lookup(y, _keys(x["lists"]))
    a = torch.where(both, x["values"].reshape(-1), 0.0)
    b = torch.where(both, y["values"].reshape(-1)[at], 0.0)
    # A_ij B_ji ≠ 0 needs j ∈ N(i) and i ∈ N(j) in both spaces; L_ji = L_ij
    mutual = both & x["mutual"].reshape(-1) & y["mutual"].reshape(-1)[at]
    trace = torch.where(mutual, a * b, 0.0).sum()
    total_a, total_b = a.sum(), b.sum()
    columns = x["lists"].reshape(-1)
    cols_a = torch.zeros(n, dtype=a.dtype, device=a.device).index_add_(0, columns, a)
    cols_b = torch.zeros(n, dtype=b.dtype, device=b.device).index_add_(0, columns, b)
    rows_a, rows_b = a.view(n, -1).sum(dim=1), b.view(n, -1).sum(dim=1)
    return _hsic(trace, total_a, total_b, cols_a, rows_b, n), _hsic(trace, total_b, total_a, cols_b, rows_a, n)


def _values(sides_x: list[dict], sides_y: list[dict], n: int) -> torch.Tensor:
    """(2, L1, L2): CKNNA X → Y and (Y → X) for every layer pair, NaN where a self term is ≤ 0."""
    first = sides_x[0]["values"]
    out = torch.empty(2, len(sides_x), len(sides_y), dtype=first.dtype, device=first.device)
    for i, x in enumerate(sides_x):
        for j, y in enumerate(sides_y):
            forward, backward = _pair(x, y, n)
            out[0, i, j], out[1, i, j] = forward, backward
    self_x = torch.stack([x["self"] for x in sides_x])
    self_y = torch.stack([y["self"] for y in sides_y])
    positive = (self_x[:, None] > 0) & (self_y[None, :] > 0)
    denominator = torch.sqrt(torch.where(positive, self_x[:, None] * self_y[None, :], 1.0))
    return torch.where(positive, out / denominator, torch.full_like(out, float("nan")))


def _meta(k: int, values: torch.Tensor) -> dict:
    meta = {"k": k, "neighbours": "cosine", "kernel": "cosine", "estimator": "unbiased"}
    if torch.isnan(values).any():
        meta["nan_reason"] = ("a self term HSIC₁(K∘M, K∘M) ≤ 0 (few mutual neighbour pairs against its centring "
                              "terms)")
    return meta


def cknna_both_layers(Xs, Ys, k: int = 10) -> tuple[torch.Tensor, dict]:
    """((2, L1, L2), meta): CKNNA X → Y and (Y → X)ᵀ, both indexed by X's layer, then Y's
    (reprsim.metrics.api.BOTH_DIRECTIONS); each layer's neighbours found once."""
    Xs, Ys = _inputs(Xs, Ys, k)
    n = Xs.shape[1]
    values = _values([side(Z, k) for Z in Xs], [side(Z, k) for Z in Ys], n)
    return values, _meta(k, values)


def cknna_layers(Xs, Ys, k: int = 10) -> tuple[torch.Tensor, dict]:
    """CKNNA X → Y for every layer pair: Xs (L1, n, d1), Ys (L2, n, d2) -> ((L1, L2), meta)."""
    values, meta = cknna_both_layers(Xs, Ys, k)
    return values[0], meta


def permuted_side(y: dict, p: torch.Tensor) -> dict:
    """The side of the rows permuted by p (row i of the draw is row p[i]): lists relabelled (a neighbour j becomes
    p⁻¹(j)), cosines and mutual flags carried with their rows, keys sorted again; the self term is unchanged."""
    inverse = torch.empty_like(p)
    inverse[p] = torch.arange(len(p), device=p.device)
    lists = inverse[y["lists"][p]]
    return {"lists": lists, "values": y["values"][p], "mutual": y["mutual"][p], **_sorted(_keys(lists)),
            "self": y["self"]}


def null_draws(Xs, Ys, perms: list[torch.Tensor], k: int = 10) -> np.ndarray:
    """(P, 2, L1, L2) CKNNA (both directions) with Y's rows permuted by each of `perms`, from each layer's side
    prepared once: permuting the rows relabels Y's neighbour lists, so no neighbour search is done per draw."""
    Xs, Ys = _inputs(Xs, Ys, k)
    n = Xs.shape[1]
    sides_x, sides_y = [side(Z, k) for Z in Xs], [side(Z, k) for Z in Ys]
    return np.stack([_values(sides_x, [permuted_side(y, p) for y in sides_y], n).cpu().numpy() for p in perms])
