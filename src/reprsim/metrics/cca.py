"""CCA, SVCCA (Raghu et al. 2017) and PWCCA (Morcos et al. 2018), following docs/numerics.md.

Inputs are centred. When n ≤ d on a side, CCA of the raw spaces is trivially 1, so
each side must be reduced by PCA to its top min(n − 1, d, pca_dims) components: with
n ≤ d the caller has to name `pca_dims` (below n − 1), otherwise it is an error. Any
reduction is recorded in the meta (pca_x, pca_y, k_x, k_y). Orthonormal bases come from an SVD with a rank cut at relative
singular value 1e-10; canonical correlations are the singular values of Qxᵀ Qy.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import accumulate

import torch

from reprsim.metrics import sample_size
from reprsim.metrics._inputs import centre
from reprsim.metrics.memory import working_bytes

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
    restricted = {**prepared, "basis": basis, "dims": int(basis.shape[1]), "centred": None}
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
    layers: every evaluation of that side reuses it)."""
    first = layers[0]
    stacked = first.get("side_by_side")
    if stacked is None or stacked[0] is not layers:
        first["side_by_side"] = stacked = (layers, torch.cat([layer["basis"] for layer in layers], dim=1))
    return stacked[1]


# Where the small decompositions run (each layer pair's k×k canonical block per draw, each half-sample's m×k
# coordinates): with SMALL_ON_HOST a batch on a GPU is moved to the host in one transfer and decomposed by LAPACK
# there, its results moved back for the products that follow. torch's CUDA SVD and symmetric eigensolver take a batch
# of float64 matrices larger than 32×32 one cuSOLVER call per matrix (gesvdj, syevd): on an H100 the 1,785 SVDs of a
# default pair job's PWCCA took 2.9 s (docs/benchmarks.md). On a CPU nothing moves. benchmarks/pair_devices.py times
# both placements on a GPU.
SMALL_ON_HOST = True


def _solver(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` where its decomposition runs (SMALL_ON_HOST): on the host, or where it is."""
    return tensor.cpu() if SMALL_ON_HOST else tensor


def _solver_device(device: torch.device) -> torch.device:
    """Where the decompositions of tensors on `device` run (SMALL_ON_HOST)."""
    return torch.device("cpu") if SMALL_ON_HOST else device


def _index_tensors(lists: list[list[int]], device) -> list[torch.Tensor]:
    """Index lists as int64 tensors on `device`, moved there in one transfer."""
    flat = torch.tensor([i for chosen in lists for i in chosen], dtype=torch.int64).to(device)
    return list(flat.split([len(chosen) for chosen in lists]))


def cca_layers_from(kind: str, px: list[dict], py: list[dict], params: dict, n: int,
                    permutation: torch.Tensor | None = None, with_meta: bool = False) -> tuple[torch.Tensor, dict]:
    """A CCA-family measure for every layer pair of two prepared sides: (D, L1, L2) values, D = 2 for PWCCA
    ([X→Y, Y→X], both indexed by X's layer, then Y's) and 1 otherwise; with `with_meta`, each pair's meta.

    Every pair's Qxᵀ Qy is a block of one product of the side-by-side bases (Y's rows permuted by `permutation`,
    for a null draw; PWCCA's projections are unchanged by it): :func:`canonical_draws`. NaN where
    k_x + k_y > n − 1 (:func:`pair_meta`)."""
    bases_y = side_by_side(py)
    if permutation is not None:
        bases_y = bases_y[permutation]
    products = (side_by_side(px).T @ bases_y)[None]
    projections = None
    if kind == "pwcca":
        projections = ([a["projection"][None] for a in px], [b["projection"][None] for b in py])
    values, details = canonical_draws(kind, params, n, [a["dims"] for a in px], [b["dims"] for b in py], products,
                                      projections, with_meta)
    metas = {}
    if with_meta:
        metas = {(i, j): pair_meta(a, b, n) for i, a in enumerate(px) for j, b in enumerate(py)}
        for pair, detail in details.items():
            metas[pair].update(detail)
    return values[0], {"per_pair": metas}


# On a CPU a chunk's temporaries stay below glibc's largest mmap threshold (32 MiB): a larger block is fresh pages
# each time it is allocated, and touching them costs more than the work done in them (a batch of 30 half-samples'
# neurons, 40 MB, took 6 times as long to gather as one half-sample at a time)
CPU_CHUNK_BYTES = 16 << 20


def _chunks(count: int, bytes_per_draw: float, device: torch.device) -> list[range]:
    """Draws evaluated at once: as many as fit a quarter of the working-memory budget (at least one), on a CPU at
    most CPU_CHUNK_BYTES."""
    limit = working_bytes() // 4 if device.type != "cpu" else min(working_bytes() // 4, CPU_CHUNK_BYTES)
    step = max(1, min(count, int(limit // max(bytes_per_draw, 1))))
    return [range(start, min(count, start + step)) for start in range(0, count, step)]


def null_draws(kind: str, px: list[dict], py: list[dict], params: dict, n: int,
               permutations: list[torch.Tensor]) -> torch.Tensor:
    """(P, D, L1, L2) null values, Y's rows permuted by each permutation: every draw's product of the side-by-side
    bases (:func:`cca_layers_from`), a chunk of draws decomposed at once (:func:`canonical_draws`)."""
    bases_x, bases_y = side_by_side(px), side_by_side(py)
    projections = None
    if kind == "pwcca":
        projections = ([a["projection"][None] for a in px], [b["projection"][None] for b in py])
    dims_x, dims_y = [a["dims"] for a in px], [b["dims"] for b in py]
    parts = []
    for chunk in _chunks(len(permutations), 3 * 8 * bases_x.shape[1] * bases_y.shape[1], bases_x.device):
        products = torch.empty(len(chunk), bases_x.shape[1], bases_y.shape[1], dtype=bases_x.dtype,
                               device=bases_x.device)
        for position, draw in enumerate(chunk):
            products[position] = bases_x.T @ bases_y[permutations[draw]]
        parts.append(canonical_draws(kind, params, n, dims_x, dims_y, products, projections)[0])
    return torch.cat(parts)


def restrict_draws(prepared: dict, indices: torch.Tensor, projection: bool = True) -> dict:
    """:func:`restrict` for every half-sample of `indices` (R, m) at once: "basis" (R, m, k), "projection"
    (R, k, d) with `projection`, "dims"; each QR on the half-sample's centred coordinates, the batch decomposed
    together (SMALL_ON_HOST). A half-sample whose QR finds the rank lost is restricted on its own (:func:`restrict`:
    the rank cut), kept in "lost" (its position -> its restricted side)."""
    R, m = indices.shape
    k, d = prepared["basis"].shape[1], prepared["centred"].shape[1]
    bases, projections, lost = [], [], {}
    for chunk in _chunks(R, 8 * m * (2 * k + (d if projection else 0)), indices.device):
        rows = indices[chunk.start:chunk.stop]
        coordinates = prepared["basis"][rows]
        coordinates = coordinates - coordinates.mean(dim=1, keepdim=True)
        basis, triangle = torch.linalg.qr(_solver(coordinates))
        diagonal = triangle.diagonal(dim1=-2, dim2=-1).abs()
        cut = diagonal.amin(dim=-1) <= RANK_CUTOFF * diagonal.amax(dim=-1)
        for position in torch.nonzero(cut).flatten().tolist():
            lost[chunk.start + position] = restrict(prepared, rows[position], projection)
        basis = basis.to(coordinates.device)
        bases.append(basis)
        if projection:  # as restrict: Qᵀ Z − (Qᵀ1) μᵀ of the half-sample's neurons, a product per half-sample
            neurons = prepared["centred"][rows]
            products = torch.empty(len(rows), basis.shape[-1], d, dtype=basis.dtype, device=basis.device)
            for position in range(len(rows)):
                products[position] = basis[position].T @ neurons[position]
            projections.append(products - basis.sum(dim=1)[:, :, None] * neurons.mean(dim=1)[:, None, :])
    return {"basis": torch.cat(bases), "projection": torch.cat(projections) if projection else None,
            "dims": int(bases[0].shape[-1]), "lost": lost}


def replicate_draws(kind: str, rx: list[dict], ry: list[dict], params: dict, m: int, count: int) -> torch.Tensor:
    """(R, D, L1, L2) values on the first `count` half-samples of two sides restricted by :func:`restrict_draws`
    (per layer): a chunk of half-samples decomposed at once; one whose rank a layer lost, on its own."""
    lost = sorted({r for layer in rx + ry for r in layer["lost"] if r < count})
    regular = sorted(set(range(count)) - set(lost))
    dims_x, dims_y = [a["dims"] for a in rx], [b["dims"] for b in ry]
    width_x, width_y = sum(dims_x), sum(dims_y)
    device = rx[0]["basis"].device
    parts, order = [], []
    for chunk in _chunks(len(regular), 8 * (m * (width_x + width_y) + 3 * width_x * width_y), device):
        draws = torch.as_tensor([regular[i] for i in chunk], device=device) if lost else None
        chosen = (lambda t: t[draws]) if lost else (lambda t: t[chunk.start:chunk.stop])
        bases_x = torch.cat([chosen(a["basis"]) for a in rx], dim=2)
        bases_y = torch.cat([chosen(b["basis"]) for b in ry], dim=2)
        products = torch.empty(len(chunk), width_x, width_y, dtype=bases_x.dtype, device=device)
        for position in range(len(chunk)):
            products[position] = bases_x[position].T @ bases_y[position]
        projections = None
        if kind == "pwcca":
            projections = ([chosen(a["projection"]) for a in rx], [chosen(b["projection"]) for b in ry])
        parts.append(canonical_draws(kind, params, m, dims_x, dims_y, products, projections)[0])
        order += [regular[i] for i in chunk]
    for r in lost:
        own = [[layer["lost"].get(r) or {"basis": layer["basis"][r], "dims": layer["dims"],
                                         "projection": None if layer["projection"] is None else layer["projection"][r]}
                for layer in side] for side in (rx, ry)]
        parts.append(cca_layers_from(kind, *own, params, m)[0][None])
        order.append(r)
    values = torch.cat(parts)
    return values if not lost else values[torch.as_tensor(order).argsort().to(values.device)]


def canonical_draws(kind: str, params: dict, n: int, dims_x: list[int], dims_y: list[int], products: torch.Tensor,
                    projections: tuple[list, list] | None = None, with_meta: bool = False
                    ) -> tuple[torch.Tensor, dict]:
    """A CCA-family measure for every layer pair of B draws: (B, D, L1, L2) values (D as :func:`cca_layers_from`)
    and, with `with_meta`, each pair's details of its first draw (mean ρ², PWCCA's weighted values).

    `products` (B, Σk_x, Σk_y) are each draw's Qxᵀ Qy of the side-by-side bases, layers of `dims_x` and `dims_y`
    principal directions; PWCCA's `projections` are each layer's Qᵀ Z, (B or 1, k, d) per layer and side. The pairs
    of one block shape, over every draw, are decomposed as one batch (where SMALL_ON_HOST puts them); the values
    are on that device. NaN where k_x + k_y > n − 1."""
    B, D = products.shape[0], 2 if kind == "pwcca" else 1
    device = products.device
    solver = _solver_device(device)
    values = torch.full((B, D, len(dims_x), len(dims_y)), float("nan"), dtype=torch.float64, device=solver)
    groups = defaultdict(list)
    for i, k_x in enumerate(dims_x):
        for j, k_y in enumerate(dims_y):
            if k_x + k_y <= n - 1:
                groups[(k_x, k_y)].append((i, j))
    details = {}
    if not groups:
        return values, details
    starts_x, starts_y = [0, *accumulate(dims_x)], [0, *accumulate(dims_y)]
    spans = []
    for (k_x, k_y), members in groups.items():
        spans += [[starts_x[i] + r for i, _ in members for r in range(k_x)],
                  [starts_y[j] + c for _, j in members for c in range(k_y)]]
    spans = iter(_index_tensors(spans, device))
    direction = params.get("direction", "min")
    for (k_x, k_y), members in groups.items():
        G = len(members)
        rows, columns = next(spans).view(G, k_x), next(spans).view(G, k_y)
        blocks = products[:, rows[:, :, None], columns[:, None, :]].reshape(B * G, k_x, k_y)
        at = (slice(None), 0, [i for i, _ in members], [j for _, j in members])
        if kind != "pwcca":
            M = blocks.mT if k_x > k_y else blocks  # the Gram below is c × c
            rho = canonical_from_gram(_solver(M @ M.mT))
            values[at] = rho.mean(dim=-1).view(B, G)
            if with_meta:
                for pair, squared in zip(members, (rho[:G] ** 2).mean(dim=-1).tolist()):
                    details[pair] = {"mean_rho_squared": squared}
            continue
        # the rotations from the SVD: an eigenvector route would halve its cost, but where correlations cluster it
        # picks other, equally valid rotations, and PWCCA's weights then move by up to 1e-7
        A, rho, Bt = torch.linalg.svd(_solver(blocks), full_matrices=False)
        rho = rho.clamp(0.0, 1.0).to(device).view(B, G, -1)
        A, Bt = A.to(device), Bt.to(device)
        c = rho.shape[-1]
        weighted = {side: _pwcca_weighted(rotations.reshape(B, G, c, -1), rho, layers,
                                          [pair[position] for pair in members])
                    for side, rotations, layers, position in (("x", A.mT, projections[0], 0),
                                                              ("y", Bt, projections[1], 1))}
        forward, backward = pwcca_sides(direction, projections[0][0].shape[-1], projections[1][0].shape[-1])
        values[(slice(None), slice(None), *at[2:])] = torch.stack([weighted[forward], weighted[backward]],
                                                                 dim=1).to(solver)
        if with_meta:
            for pair, x, y in zip(members, weighted["x"][0].tolist(), weighted["y"][0].tolist()):
                details[pair] = {"weights_from": forward, "pwcca_x": x, "pwcca_y": y}
    return values, details


def canonical_from_gram(gram: torch.Tensor) -> torch.Tensor:
    """Canonical correlations ρ (..., c), descending and clipped to [0, 1], from the c × c Grams M Mᵀ of Qxᵀ Qy
    blocks (c = min(k_x, k_y)): the square roots of their symmetric eigenvalues (about two thirds of an SVD's cost
    on these small matrices; they agree with the singular values to about 1e-13)."""
    return torch.linalg.eigvalsh(gram).flip(-1).clamp_min(0.0).sqrt().clamp(0.0, 1.0)


def _pwcca_weighted(rotations: torch.Tensor, rho: torch.Tensor, projections: list[torch.Tensor],
                    layers: list[int]) -> torch.Tensor:
    """Σ α_i ρ_i / Σ α_i for each draw and pair (B, G), with α_i = Σ_j |<h_i, z_j>| (pwcca_weights) from its
    side's projection: `rotations` (B, G, c, k) are the pairs' rotations' transposes, `projections` each layer's Qᵀ Z
    (B or 1, k, d), `layers` each pair's layer on this side. The rotations of one layer's pairs are multiplied with
    its projection at once, per draw (one product per layer and draw, no copy of the projections)."""
    B, G, c, k = rotations.shape
    alpha = torch.empty(rho.shape, dtype=rho.dtype, device=rho.device)
    chosen_layers = sorted(set(layers))
    positions = _index_tensors([[g for g, layer in enumerate(layers) if layer == chosen] for chosen in chosen_layers],
                               rho.device)
    for layer, chosen in zip(chosen_layers, positions):
        stacked = rotations[:, chosen].reshape(B, -1, k)
        projection = projections[layer]
        out = torch.empty(B, stacked.shape[1], projection.shape[-1], dtype=rho.dtype, device=rho.device)
        for draw in range(B):
            out[draw] = stacked[draw] @ projection[draw if len(projection) > 1 else 0]
        alpha[:, chosen] = torch.linalg.vector_norm(out, ord=1, dim=-1).reshape(B, len(chosen), -1)
    return (alpha * rho).sum(dim=-1) / alpha.sum(dim=-1)


def cca_pair(kind: str, a: dict, b: dict, params: dict, n: int) -> tuple[tuple[float, ...], dict]:
    """One CCA-family layer pair from two prepared sides: (value,) or, for PWCCA, (X→Y, Y→X) from
    one decomposition; NaN with the reason when k_x + k_y > n − 1."""
    values, meta = cca_layers_from(kind, [a], [b], params, n, with_meta=True)
    return tuple(float(v) for v in values[:, 0, 0]), meta["per_pair"][(0, 0)]
