"""Mutual k-nearest-neighbour alignment (Huh et al. 2024)."""

from __future__ import annotations

import torch

from reprsim.metrics._inputs import layers


def neighbours(Zs: torch.Tensor, k: int) -> torch.Tensor:
    """(L, n, n) 0/1 matrices: row i marks the k nearest rows of i by cosine, self excluded."""
    n = Zs.shape[1]
    if not 1 <= k < n:
        raise ValueError(f"mutual_knn needs 1 ≤ k < n; got k={k}, n={n}")
    return neighbours_from_similarity(cosine_similarity(Zs), k)


def cosine_similarity(Zs: torch.Tensor) -> torch.Tensor:
    """(L, n, n) cosine similarity between the rows of each layer."""
    norms = torch.linalg.vector_norm(Zs, dim=-1, keepdim=True)
    if (norms == 0).any():
        raise ValueError("a row is all zeros; its cosine neighbours are undefined")
    unit = Zs / norms
    return unit @ unit.transpose(-1, -2)


def neighbours_from_similarity(similarity: torch.Tensor, k: int) -> torch.Tensor:
    """(L, n, n) 0/1 matrices marking each row's k most similar other rows (consumes `similarity`)."""
    similarity.diagonal(dim1=-2, dim2=-1).fill_(float("-inf"))
    marks = torch.zeros_like(similarity)
    return marks.scatter_(-1, similarity.topk(k, dim=-1).indices, 1.0)


def mutual_knn_layers(Xs, Ys, k: int = 10) -> tuple[torch.Tensor, dict]:
    """Mean over rows of |N_k^X(i) ∩ N_k^Y(i)| / k for every layer pair; neighbours found once per layer."""
    Xs = layers(Xs, name="Xs")
    Ys = layers(Ys, Xs.device, name="Ys")
    if Xs.shape[1] != Ys.shape[1]:
        raise ValueError(f"X and Y must have the same rows (inputs); got n={Xs.shape[1]} and n={Ys.shape[1]}")
    nx, ny = neighbours(Xs, k).flatten(1), neighbours(Ys, k).flatten(1)
    return nx @ ny.T / (k * Xs.shape[1]), {"k": k}
