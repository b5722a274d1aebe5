"""CCA, SVCCA (Raghu et al. 2017) and PWCCA (Morcos et al. 2018), following docs/numerics.md.

Inputs are centred. When n ≤ d on a side, CCA of the raw spaces is trivially 1, so
each side must be reduced by PCA to its top min(n − 1, d, pca_dims) components: with
n ≤ d the caller has to name `pca_dims` (below n − 1), otherwise it is an error. Any
reduction is recorded in the meta (pca_x, pca_y, k_x, k_y). Orthonormal bases come from an SVD with a rank cut at relative
singular value 1e-10; canonical correlations are the singular values of Qxᵀ Qy.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from reprsim.metrics import sample_size
from reprsim.metrics._inputs import centre

RANK_CUTOFF = 1e-10
DIRECTIONS = ("x", "y", "min")


def orthonormal_basis(Zc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """U, S, Vᵀ of centred Zc restricted to singular values above the relative cut-off."""
    U, S, Vt = torch.linalg.svd(Zc, full_matrices=False)
    keep = S > RANK_CUTOFF * S[0] if S.numel() and S[0] > 0 else torch.zeros_like(S, dtype=torch.bool)
    if not keep.any():
        raise ValueError("a representation is constant (rank 0); CCA is undefined")
    return U[:, keep], S[keep], Vt[keep]


def decompose(Z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Z centred, and its rank-cut thin SVD's U and S (:func:`orthonormal_basis`): what :func:`prepare` reduces."""
    Zc = centre(Z)
    U, S, _ = orthonormal_basis(Zc)
    return Zc, U, S


def prepare(Z: torch.Tensor, pca_dims: int | None = None, variance: float | None = None,
            decomposed: tuple | None = None) -> dict:
    """Centre Z, reduce it when needed (n ≤ d, SVCCA's variance threshold) and return its basis. `decomposed` is
    Z's :func:`decompose`, when it is at hand (the same layer prepared for another measure)."""
    n, d = Z.shape
    if n <= d and variance is None and not (pca_dims and pca_dims < n - 1):
        raise ValueError(
            f"n={n} ≤ d={d}: CCA of the raw spaces is trivially 1; pass pca_dims < n − 1 "
            "to compare the top principal directions instead"
        )
    Zc, U, S = decomposed if decomposed is not None else decompose(Z)
    reduced_to = None
    limit = min(n - 1, d, pca_dims) if pca_dims else min(n - 1, d)
    if n <= d or (pca_dims and pca_dims < U.shape[1]):
        reduced_to = min(limit, U.shape[1])  # top principal directions: U is sorted by singular value
    if variance is not None:
        energy = torch.cumsum(S**2, 0) / torch.sum(S**2)
        k = int(torch.searchsorted(energy, torch.tensor(variance, dtype=energy.dtype, device=energy.device)).item()) + 1
        reduced_to = min(k, reduced_to or k)
    rank = U.shape[1]
    if reduced_to is not None:
        U = U[:, :reduced_to]
    return with_projection({"centred": Zc, "basis": U, "dims": int(U.shape[1]), "pca": U.shape[1] < rank})


def with_projection(prepared: dict) -> dict:
    """Adds Qᵀ Z (k × d): the neurons in the basis, which PWCCA's weights need. A row
    permutation of the centred data and its basis leaves it unchanged, so nulls reuse it."""
    return {**prepared, "projection": prepared["basis"].T @ prepared["centred"]}


def restrict(prepared: dict, idx: torch.Tensor, projection: bool = True) -> dict:
    """A prepared side on a subset of its rows, along the principal directions chosen on all rows: the subset's
    coordinates along them, centred, given a new orthonormal basis (a QR; an SVD with the rank cut if the QR
    finds the rank lost); with `projection`, PWCCA's Qᵀ Z of the subset's own centred neurons."""
    coordinates = prepared["basis"][idx]
    coordinates = coordinates - coordinates.mean(dim=0)
    basis, triangle = torch.linalg.qr(coordinates)
    diagonal = triangle.diagonal().abs()
    if diagonal.numel() and diagonal.min() <= RANK_CUTOFF * diagonal.max():
        basis = orthonormal_basis(coordinates)[0]  # rank lost: cut it
    restricted = {**prepared, "basis": basis, "centred": None}
    restricted.pop("projection", None)
    if projection:
        # Qᵀ (Z − 1μᵀ) = Qᵀ Z − (Qᵀ1) μᵀ: the subset's neurons are not copied to be centred
        neurons = prepared["centred"][idx]
        restricted["projection"] = basis.T @ neurons - torch.outer(basis.sum(dim=0), neurons.mean(dim=0))
    return restricted


def canonical(px: dict, py: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Canonical correlations ρ (descending) and the rotations A, B with Qxᵀ Qy = A diag(ρ) Bᵀ."""
    A, rho, Bt = torch.linalg.svd(px["basis"].T @ py["basis"], full_matrices=False)
    return rho.clamp(0.0, 1.0), A, Bt.T


def pwcca_weights(prepared: dict, rotation: torch.Tensor) -> torch.Tensor:
    """α_i = Σ_j |<h_i, z_j>| with h_i = Q a_i the orthonormal canonical variates and z_j the centred
    neurons: hᵢᵀ z_j = a_iᵀ (Qᵀ z_j), from the prepared projection."""
    return (rotation.T @ prepared["projection"]).abs().sum(dim=1)


def pwcca_sides(direction: str, d_x: int, d_y: int) -> tuple[str, str]:
    """Whose neurons weigh PWCCA(X→Y) and PWCCA(Y→X), as sides ("x", "y") of one X, Y computation.

    "min": the narrower side's in both directions; on a tie each direction weighs by its own X.
    """
    if direction == "x":
        return "x", "y"
    if direction == "y":
        return "y", "x"
    if d_x == d_y:
        return "x", "y"
    return ("x", "x") if d_x < d_y else ("y", "y")


def is_number(value) -> bool:
    """An int or float, not a bool (True is an int to Python, never a threshold to a user)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_pca_dims(pca_dims) -> None:
    if pca_dims is not None and (not isinstance(pca_dims, int) or isinstance(pca_dims, bool) or pca_dims < 1):
        raise ValueError(f"pca_dims must be a positive integer or None; got {pca_dims!r}")


def check_threshold(threshold) -> None:
    """SVCCA's variance threshold: a number in (0, 1]."""
    if not (is_number(threshold) and 0 < threshold <= 1):
        raise ValueError(f"svcca threshold must be a number in (0, 1]; got {threshold!r}")


def check_params(kind: str, params: dict) -> None:
    """Values the CCA family accepts, checked before any decomposition."""
    if kind == "svcca":
        check_threshold(params.get("threshold", 0.99))
    if kind == "pwcca" and params.get("direction", "min") not in DIRECTIONS:
        raise ValueError(f"pwcca direction must be one of {DIRECTIONS}; got {params.get('direction')!r}")
    check_pca_dims(params.get("pca_dims"))


def cca_prepared(kind: str, Xs: torch.Tensor, Ys: torch.Tensor, params: dict) -> tuple[list, list]:
    """Each layer of both sides centred, reduced (pca_dims, SVCCA's variance cut) and given a basis."""
    check_params(kind, params)
    variance = params.get("threshold", 0.99) if kind == "svcca" else None
    pca_dims = params.get("pca_dims")
    return ([prepare(X, pca_dims, variance) for X in Xs],
            [prepare(Y, pca_dims, variance) for Y in Ys])


def pair_meta(a: dict, b: dict, n: int) -> dict:
    """What a CCA-family row records of its two prepared sides: kept dimensions, PCA flags, and NaN's reason
    (k_x + k_y > n − 1: at least k_x + k_y − (n − 1) correlations are 1 whatever the data) or the small-n warning."""
    k = a["dims"] + b["dims"]
    meta = {"k_x": a["dims"], "k_y": b["dims"], "pca_x": a["pca"], "pca_y": b["pca"], "k": k}
    if k > n - 1:
        meta["undefined"] = (f"k_x + k_y = {a['dims']} + {b['dims']} = {k} > n − 1 = {n - 1}: at least "
                             f"{k - (n - 1)} canonical correlation(s) are 1 whatever the data; set pca_dims "
                             f"≤ {(n - 1) // 2} to compare the top principal directions")
    elif message := sample_size.warning(n, k, "canonical correlations are inflated by chance at this sample size"):
        meta["warning"] = message
    return meta


def side_by_side(layers: list[dict]) -> torch.Tensor:
    """Every layer's basis side by side (n, Σk), built once per list of prepared layers (a list is one side's
    layers, on all rows or on one half-sample: every evaluation of that side reuses it)."""
    first = layers[0]
    stacked = first.get("side_by_side")
    if stacked is None or stacked[0] is not layers:
        first["side_by_side"] = stacked = (layers, torch.cat([layer["basis"] for layer in layers], dim=1))
    return stacked[1]


def cca_layers_from(kind: str, px: list[dict], py: list[dict], params: dict, n: int,
                    permutation: torch.Tensor | None = None, with_meta: bool = False) -> tuple[torch.Tensor, dict]:
    """A CCA-family measure for every layer pair of two prepared sides: (D, L1, L2) values, D = 2 for PWCCA
    ([X→Y, Y→X], both indexed by X's layer, then Y's) and 1 otherwise; with `with_meta`, each pair's meta.

    Every pair's Qxᵀ Qy is a block of one product of the side-by-side bases (Y's rows permuted by `permutation`,
    for a null draw; PWCCA's projections are unchanged by it); pairs of equal block shape are decomposed as one
    batch. NaN where k_x + k_y > n − 1 (:func:`pair_meta`)."""
    D = 2 if kind == "pwcca" else 1
    values = torch.full((D, len(px), len(py)), float("nan"), dtype=torch.float64, device=px[0]["basis"].device)
    metas, groups = {}, defaultdict(list)
    for i, a in enumerate(px):
        for j, b in enumerate(py):
            if with_meta:
                metas[(i, j)] = pair_meta(a, b, n)
            if a["dims"] + b["dims"] <= n - 1:
                groups[(a["dims"], b["dims"])].append((i, j))
    if not groups:
        return values, {"per_pair": metas}
    starts_x = [0, *torch.tensor([a["dims"] for a in px]).cumsum(0).tolist()]
    starts_y = [0, *torch.tensor([b["dims"] for b in py]).cumsum(0).tolist()]
    bases_y = side_by_side(py)
    if permutation is not None:
        bases_y = bases_y[permutation]
    products = side_by_side(px).T @ bases_y
    direction = params.get("direction", "min")
    for (k_x, k_y), members in groups.items():
        rows, columns = (torch.tensor(side) for side in zip(*members))
        blocks = torch.stack([products[starts_x[i]:starts_x[i] + k_x, starts_y[j]:starts_y[j] + k_y]
                              for i, j in members])
        if kind != "pwcca":
            rho = canonical_batch(blocks)
            values[0, rows, columns] = rho.mean(dim=-1)
            if with_meta:
                for (i, j), squared in zip(members, (rho**2).mean(dim=-1).tolist()):
                    metas[(i, j)]["mean_rho_squared"] = squared
            continue
        rho, A, Bt = canonical_batch(blocks, rotations=True)
        weighted = {side: _pwcca_weighted(rotation, rho, sides, [pair[position] for pair in members])
                    for side, rotation, sides, position in (("x", A.mT, px, 0), ("y", Bt, py, 1))}
        forward, backward = pwcca_sides(direction, px[0]["projection"].shape[1], py[0]["projection"].shape[1])
        values[0, rows, columns], values[1, rows, columns] = weighted[forward], weighted[backward]
        if with_meta:
            for position, (i, j) in enumerate(members):
                metas[(i, j)].update(weights_from=forward, pwcca_x=float(weighted["x"][position]),
                                     pwcca_y=float(weighted["y"][position]))
    return values, {"per_pair": metas}


def canonical_batch(blocks: torch.Tensor, rotations: bool = False):
    """Canonical correlations ρ (G, c), descending and clipped to [0, 1], of a batch of Qxᵀ Qy blocks (G, k_x, k_y),
    c = min(k_x, k_y); with `rotations`, also A (G, k_x, c) and Bᵀ (G, c, k_y) with block = A diag(ρ) Bᵀ.

    The correlations alone come from the symmetric eigenvalues of each block's smaller Gram (ρ², about two thirds
    of an SVD's cost on these small matrices; they agree with the singular values to about 1e-13); the rotations
    from the SVD (an eigenvector route would halve its cost, but where correlations cluster it picks other,
    equally valid rotations, and PWCCA's weights then move by up to 1e-7)."""
    if rotations:
        A, rho, Bt = torch.linalg.svd(blocks, full_matrices=False)
        return rho.clamp(0.0, 1.0), A, Bt
    M = blocks.mT if blocks.shape[1] > blocks.shape[2] else blocks  # the Gram below is c × c
    return torch.linalg.eigvalsh(M @ M.mT).flip(-1).clamp_min(0.0).sqrt().clamp(0.0, 1.0)


def _pwcca_weighted(rotations: torch.Tensor, rho: torch.Tensor, sides: list[dict], layers: list[int]) -> torch.Tensor:
    """Σ α_i ρ_i / Σ α_i for each pair, with α_i = Σ_j |<h_i, z_j>| (pwcca_weights) from its side's projection:
    `rotations` (G, c, k) are the pairs' rotations' transposes, `layers` each pair's layer on this side. The
    rotations of one layer's pairs are multiplied with its projection at once (one product per layer, no copy of
    the projections)."""
    alpha = torch.empty(rho.shape, dtype=rho.dtype, device=rho.device)
    positions = torch.as_tensor(layers, device=rho.device)
    for layer in sorted(set(layers)):
        chosen = torch.nonzero(positions == layer).flatten()
        stacked = rotations[chosen].reshape(-1, rotations.shape[-1]) @ sides[layer]["projection"]
        alpha[chosen] = torch.linalg.vector_norm(stacked, ord=1, dim=-1).reshape(len(chosen), -1)
    return (alpha * rho).sum(dim=-1) / alpha.sum(dim=-1)


def cca_pair(kind: str, a: dict, b: dict, params: dict, n: int) -> tuple[tuple[float, ...], dict]:
    """One CCA-family layer pair from two prepared sides: (value,) or, for PWCCA, (X→Y, Y→X) from
    one decomposition; NaN with the reason when k_x + k_y > n − 1."""
    values, meta = cca_layers_from(kind, [a], [b], params, n, with_meta=True)
    return tuple(float(v) for v in values[:, 0, 0]), meta["per_pair"][(0, 0)]
