"""Mutual k-nearest-neighbour alignment (Huh et al. 2024).

Neighbour sets are kept as lists of indices (L, n, k), found one layer at a time: from the layer's whole
n×n cosine similarity when it fits the working-memory budget (reprsim.metrics.memory), else a block of
rows at a time. Overlaps are counted from the lists: integers, so the values are those of the 0/1
neighbour matrices (`neighbours`) exactly.
"""

from __future__ import annotations

import torch

from reprsim.metrics._inputs import layers
from reprsim.metrics.memory import rows_per_chunk, working_bytes


def neighbours(Zs: torch.Tensor, k: int) -> torch.Tensor:
    """(L, n, n) 0/1 matrices: row i marks the k nearest rows of i by cosine, self excluded."""
    n = Zs.shape[1]
    check_k(k, n)
    return neighbours_from_similarity(cosine_similarity(Zs), k)


def check_k(k: int, n: int) -> None:
    if not 1 <= k < n:
        raise ValueError(f"mutual_knn needs 1 ≤ k < n; got k={k}, n={n}")


def cosine_similarity(Zs: torch.Tensor) -> torch.Tensor:
    """(L, n, n) cosine similarity between the rows of each layer."""
    unit = _unit_rows(Zs)
    return unit @ unit.transpose(-1, -2)


def _unit_rows(Zs: torch.Tensor) -> torch.Tensor:
    norms = torch.linalg.vector_norm(Zs, dim=-1, keepdim=True)
    if (norms == 0).any():
        raise ValueError("a row is all zeros; its cosine neighbours are undefined")
    return Zs / norms


def neighbours_from_similarity(similarity: torch.Tensor, k: int) -> torch.Tensor:
    """(L, n, n) 0/1 matrices marking each row's k most similar other rows (consumes `similarity`)."""
    similarity.diagonal(dim1=-2, dim2=-1).fill_(float("-inf"))
    marks = torch.zeros_like(similarity)
    return marks.scatter_(-1, similarity.topk(k, dim=-1).indices, 1.0)


def neighbour_lists(Zs: torch.Tensor, k: int, subsets: list[torch.Tensor] | None = None) -> torch.Tensor:
    """Each row's k nearest other rows by cosine, as indices: (L, n, k); or, given `subsets` (R index
    tensors of m rows each), each subset row's k nearest among the subset's rows, as positions in it:
    (R, L, m, k). The neighbours `neighbours` marks (on a subset: in its rows' similarity matrix)."""
    L, n, _ = Zs.shape
    groups = [None] if subsets is None else subsets
    check_k(k, n if subsets is None else min(len(s) for s in subsets))
    found = [[None] * L for _ in groups]
    for layer in range(L):
        unit = _unit_rows(Zs[layer])
        whole = unit @ unit.T if 2 * 8 * n * n <= working_bytes() else None  # restricted per subset below
        for g, rows in enumerate(groups):
            found[g][layer] = _nearest(unit, whole, rows, k)
        del whole
    lists = torch.stack([torch.stack(per_layer) for per_layer in found])
    return lists[0] if subsets is None else lists


def _nearest(unit: torch.Tensor, whole: torch.Tensor | None, rows: torch.Tensor | None, k: int) -> torch.Tensor:
    """(m, k) positions of the k most similar other rows among `rows` (all: None), from the layer's whole
    similarity matrix when given, else computed a block of rows at a time."""
    if whole is not None:
        similarity = whole if rows is None else whole[rows][:, rows]  # all rows: `whole` is used once, so in place
        similarity.fill_diagonal_(float("-inf"))
        return similarity.topk(k, dim=-1).indices
    members = unit if rows is None else unit[rows]
    m = members.shape[0]
    step = rows_per_chunk(m, m, copies=3)
    found = []
    for start in range(0, m, step):
        block = members[start:start + step] @ members.T
        own = torch.arange(start, start + block.shape[0], device=block.device)
        block[torch.arange(block.shape[0], device=block.device), own] = float("-inf")
        found.append(block.topk(k, dim=-1).indices)
    return torch.cat(found)


def overlaps(lists_x: torch.Tensor, lists_y: torch.Tensor) -> torch.Tensor:
    """(L1, L2) float64: for every layer pair, the summed size over rows of N_x(i) ∩ N_y(i), from the
    neighbour lists (L1, n, k) and (L2, n, k) (each row's neighbours distinct, as top-k gives them). Exact: an
    integer count. Y's lists are marked in a 0/1 table (rows × n) per layer, and each of X's neighbours looks its
    mark up: L1·L2·n·k lookups, where comparing every pair of neighbours would take k times as many. A block of
    rows at a time, the table within 256 MiB."""
    L1, n, k = lists_x.shape
    L2 = lists_y.shape[0]
    counts = torch.zeros(L1, L2, dtype=torch.int64, device=lists_x.device)
    step = max(1, min(n, int(min(working_bytes(), 2**28) // (L2 * n))))
    marks = torch.zeros(L2, min(step, n), n, dtype=torch.uint8, device=lists_x.device)
    for start in range(0, n, step):
        rows = min(step, n - start)
        table = marks[:, :rows]
        table.zero_()
        table.scatter_(2, lists_y[:, start:start + rows], 1)
        for i in range(L1):
            hits = table.gather(2, lists_x[i, start:start + rows].expand(L2, rows, k))
            counts[i] += hits.view(L2, -1).sum(dim=1)
    return counts.to(torch.float64)


def permuted_lists(lists: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Neighbour lists (L, n, k) of the rows permuted by p: the matrix N becomes N[p][:, p], so row i's neighbours
    are p⁻¹ of the neighbours of row p[i]."""
    inverse = torch.empty_like(p)
    inverse[p] = torch.arange(len(p), device=p.device)
    return inverse[lists[:, p]]


def mutual_knn_layers(Xs, Ys, k: int = 10) -> tuple[torch.Tensor, dict]:
    """Mean over rows of |N_k^X(i) ∩ N_k^Y(i)| / k for every layer pair; neighbours found once per layer."""
    Xs = layers(Xs, name="Xs")
    Ys = layers(Ys, Xs.device, name="Ys")
    if Xs.shape[1] != Ys.shape[1]:
        raise ValueError(f"X and Y must have the same rows (inputs); got n={Xs.shape[1]} and n={Ys.shape[1]}")
    lists_x, lists_y = neighbour_lists(Xs, k), neighbour_lists(Ys, k)
    return overlaps(lists_x, lists_y) / (k * Xs.shape[1]), {"k": k}
