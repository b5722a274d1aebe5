"""One model's share of every pair it is in, prepared once (docs/numerics.md §9.4).

Most of what a measure's value, permutation null and half-sample interval cost depends on one model's rows
alone: its centred Gram matrices, their HSIC self terms and the half-samples' restricted terms (CKA), its
principal directions (the CCA family), its neighbour lists on all rows and within each half-sample (mutual
k-NN). A *side* holds that work for one model's layers (L, n, d), by *family*:

- ``gram-linear``, ``gram-rbf-<threshold>`` (cka, both estimators; :func:`reprsim.metrics.cka.gram_side`):
  kc (L, n, n) centred Grams, diag (L, n), sq (L,), rep_rows (R, L, m), rep_sq (R, L);
- ``basis-<variance cut>-<pca_dims>`` (cca, svcca, pwcca): per layer the orthonormal basis of its kept
  principal directions (n, k), k, the PCA flag and PWCCA's projection Qᵀ Zc (k, d);
- ``neighbours-<k>`` (mutual_knn): lists (L, n, k), rep_lists (R, L, m, k).

:func:`paired` then computes, from two sides, the measure's values for every layer pair, its null draws (Y's
rows permuted) and its replicates (each half-sample): the same numbers as recomputing the measure on permuted
rows or on the subsample (the routes of reprsim.metrics.permutation and reprsim.metrics.subsample, which build
their sides in memory), only the cross terms being left to the pair. The compare stage stores sides per model
and split (rule `model_terms`) so that every pair job of the model reads them.

Measures without a family here (procrustes, neuronsim, mixedsim, cka_minibatch) have nothing worth keeping
per model: their cost is in the pair's own products (neuronsim's z-scoring is 1/300 of one correlation
product), so their pair jobs recompute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from reprsim.metrics import cca as cca_family
from reprsim.metrics import cka as cka_module
from reprsim.metrics import knn as knn_module
from reprsim.metrics._inputs import centre
from reprsim.metrics.sample_size import CCA_FAMILY

NULL_ROUTES = {"gram": "gram-permutation", "basis": "permuted-bases", "neighbours": "permuted-neighbours"}
INTERVAL_ROUTES = {"gram": "gram-rows", "basis": "restricted-bases", "neighbours": "restricted-neighbours"}


def family(name: str, params: dict) -> str | None:
    """The side family of a measure with these params, or None (recomputed per pair)."""
    if name == "cka":
        kernel = params.get("kernel", "linear")
        if kernel not in cka_module.KERNELS:
            raise ValueError(f"kernel must be one of {cka_module.KERNELS}; got {kernel!r}")
        return "gram-linear" if kernel == "linear" else f"gram-{kernel}-{float(params.get('threshold', 1.0))!r}"
    if name in CCA_FAMILY:
        cca_family.check_params(name, params)
        variance = float(params.get("threshold", 0.99)) if name == "svcca" else None
        return f"basis-{variance!r}-{params.get('pca_dims')}"
    if name == "mutual_knn":
        return f"neighbours-{int(params.get('k', 10))}"
    return None


def kind_of(key: str) -> str:
    return key.split("-", 1)[0]


def _family_settings(key: str) -> tuple:
    kind, _, rest = key.partition("-")
    if kind == "gram":
        kernel, _, threshold = rest.partition("-")
        return kernel, float(threshold) if threshold else 1.0
    if kind == "basis":
        variance, pca_dims = rest.rsplit("-", 1)
        return (None if variance == "None" else float(variance)), (None if pca_dims == "None" else int(pca_dims))
    return (int(rest),)


def prepare(Zs: torch.Tensor, key: str, indices: torch.Tensor | None = None, cache: dict | None = None) -> dict:
    """One model's side of family `key` from its layers Zs (L, n, d, float64), for the half-samples `indices`
    (R, m) (None: no replicate terms). `cache` (one dict per stack) keeps what families share: each layer's SVD,
    which every CCA-family measure's basis is cut from."""
    kind, settings = kind_of(key), _family_settings(key)
    if kind == "gram":
        kc = cka_module.centred_grams(Zs, *settings)
        return {"kc": kc, **cka_module.gram_side(kc, indices)}
    if kind == "basis":
        variance, pca_dims = settings
        cache = {} if cache is None else cache
        if "decomposed" not in cache:
            cache["decomposed"] = [cca_family.decompose(Z) for Z in Zs]
        return {"layers": [cca_family.prepare(Z, pca_dims, variance, decomposed)
                           for Z, decomposed in zip(Zs, cache["decomposed"])]}
    k = settings[0]
    side = {"lists": knn_module.neighbour_lists(Zs, k)}
    if indices is not None:
        side["rep_lists"] = knn_module.neighbour_lists(Zs, k, list(indices))
    return side


def with_centred(side: dict, key: str, Zs: torch.Tensor) -> dict:
    """A basis side read from storage, given back its centred layers (not stored: the stack, centred)."""
    if kind_of(key) != "basis":
        return side
    return {"layers": [{**layer, "centred": centre(Z)} for layer, Z in zip(side["layers"], Zs)]}


def select_layers(side: dict, key: str, kept: np.ndarray) -> dict:
    """The side's terms for layers `kept` only (the others are constant layers, left out of every pair)."""
    kept = np.asarray(kept)
    if kind_of(key) == "basis":
        return {"layers": [side["layers"][i] for i in kept]}
    index = torch.as_tensor(kept, device=next(iter(side.values())).device)
    out = {}
    for name, value in side.items():
        axis = 1 if name.startswith("rep_") else 0
        out[name] = value.index_select(axis, index)
    return out


@dataclass
class Paired:
    """A measure's statistics for every layer pair of two sides: values (D, L1, L2); metas, one per direction
    (shared entries and per_pair); null (P, D, L1, L2) and replicates (R, D, L1, L2) draws, None where not asked."""
    values: np.ndarray
    metas: list[dict]
    null: np.ndarray | None
    replicates: np.ndarray | None
    null_route: str
    interval_route: str


def paired(name: str, params: dict, key: str, side_x: dict, side_y: dict, n: int,
           permutations: list[torch.Tensor] | None = None, indices: torch.Tensor | None = None,
           cache: dict | None = None) -> Paired:
    """`name` with `params` for every layer pair of two sides of family `key`, with the null draws for
    `permutations` (of Y's rows) and the replicates on `indices` (R, m; the sides' replicate terms rest on the
    same half-samples). `cache` (one dict per pair of sides and family) lets a second measure of the same family
    reuse the cross terms: the two CKA estimators share theirs."""
    kind = kind_of(key)
    cache = {} if cache is None else cache
    for rows in (n, None if indices is None else indices.shape[1]):
        if rows is not None and kind == "gram":
            cka_module.check(params.get("kernel", "linear"), params.get("estimator", "biased"), rows)
        elif rows is not None and kind == "neighbours":
            knn_module.check_k(int(params.get("k", 10)), rows)
    if kind == "gram":
        estimator = params.get("estimator", "biased")
        out = cka_module.gram_statistics(side_x, side_y, [estimator], n, permutations, indices, cache)[estimator]
        metas = [{"per_pair": {}}]
        values, null, replicates = out["value"][None], out.get("null"), out.get("replicates")
        null = None if null is None else null[:, None]
        replicates = None if replicates is None else replicates[:, None]
    elif kind == "basis":
        values, metas, null, replicates = _basis_statistics(name, params, side_x, side_y, n, permutations, indices)
    else:
        values, metas, null, replicates = _neighbour_statistics(int(params.get("k", 10)), side_x, side_y, n,
                                                                permutations, indices)
    as_numpy = (lambda t: None if t is None else t.cpu().numpy())
    return Paired(as_numpy(values), metas, as_numpy(null), as_numpy(replicates), NULL_ROUTES[kind],
                  INTERVAL_ROUTES[kind])


def _restricted_layers(side: dict, indices: torch.Tensor, projection: bool) -> list[dict]:
    """Every layer of a basis side restricted to each half-sample (reprsim.metrics.cca.restrict_draws), kept in the
    side: they depend on that model's rows alone, so every measure and pair that reads the side in this process
    shares them."""
    tag = ("restricted", projection)
    stored = side.get(tag)
    if stored is None or len(stored[0]["basis"]) < len(indices):
        side[tag] = stored = [cca_family.restrict_draws(layer, indices, projection) for layer in side["layers"]]
    return stored


def _basis_statistics(kind: str, params: dict, side_x: dict, side_y: dict, n: int, permutations, indices):
    px, py = side_x["layers"], side_y["layers"]
    values, meta = cca_family.cca_layers_from(kind, px, py, params, n, with_meta=True)
    metas = [meta, meta] if kind == "pwcca" else [meta]
    null = replicates = None
    if permutations is not None:
        null = cca_family.null_draws(kind, px, py, params, n, permutations)
    if indices is not None:
        projection = kind == "pwcca"
        rx, ry = _restricted_layers(side_x, indices, projection), _restricted_layers(side_y, indices, projection)
        replicates = cca_family.replicate_draws(kind, rx, ry, params, indices.shape[1], len(indices))
    return values, metas, null, replicates


def _neighbour_statistics(k: int, side_x: dict, side_y: dict, n: int, permutations, indices):
    lists_x, lists_y = side_x["lists"], side_y["lists"]
    values = (knn_module.overlaps(lists_x, lists_y) / (k * n))[None]
    null = replicates = None
    if permutations is not None:
        null = torch.stack([knn_module.overlaps(lists_x, knn_module.permuted_lists(lists_y, p)) / (k * n)
                            for p in permutations])[:, None]
    if indices is not None:
        m = indices.shape[1]
        replicates = torch.stack([knn_module.overlaps(x, y) / (k * m) for x, y in
                                  zip(side_x["rep_lists"][:len(indices)], side_y["rep_lists"][:len(indices)])])[:, None]
    return values, [{"k": k, "per_pair": {}}], null, replicates


# ---------------------------------------------------------------- storing sides, and a job's sides
def to_arrays(side: dict, key: str) -> dict[str, np.ndarray]:
    """A side as named numpy arrays (a basis side per layer: "<layer>/basis", "<layer>/projection", and "dims",
    "pca"); the inverse of :func:`from_arrays`. Tensors the side only caches (restricted bases) are left out."""
    if kind_of(key) == "basis":
        arrays = {"dims": np.array([layer["dims"] for layer in side["layers"]], dtype=np.int64),
                  "pca": np.array([layer["pca"] for layer in side["layers"]], dtype=bool)}
        for position, layer in enumerate(side["layers"]):
            arrays[f"{position}/basis"] = layer["basis"].cpu().numpy()
            arrays[f"{position}/projection"] = layer["projection"].cpu().numpy()
        return arrays
    return {name: value.cpu().numpy() for name, value in side.items() if isinstance(name, str)}


def from_arrays(arrays: dict[str, np.ndarray], key: str, device) -> dict:
    """A side from :func:`to_arrays`' arrays, as tensors on `device` (a basis side still needs its centred
    layers: :func:`with_centred`)."""
    if kind_of(key) == "basis":
        return {"layers": [{"basis": torch.as_tensor(arrays[f"{i}/basis"], device=device),
                            "projection": torch.as_tensor(arrays[f"{i}/projection"], device=device),
                            "dims": int(dims), "pca": bool(pca)}
                           for i, (dims, pca) in enumerate(zip(arrays["dims"], arrays["pca"]))]}
    return {name: torch.as_tensor(value, device=device) for name, value in arrays.items()}


class Sides:
    """One model's sides in one job, by family: those given (read from its terms store) or else prepared from
    its layers on first use and kept, so the job's other measures of the same family share them."""

    def __init__(self, stack: torch.Tensor, indices: torch.Tensor | None, given: dict[str, dict] | None = None):
        self.stack, self.indices, self.cache = stack, indices, {}
        self.prepared = {key: with_centred(side, key, stack) for key, side in (given or {}).items()}
        for key, side in self.prepared.items():
            if kind_of(key) == "gram" and "kc" not in side:  # not stored (too large): rebuilt from the rows
                side["kc"] = cka_module.centred_grams(stack, *_family_settings(key))
        self.given = set(self.prepared)

    def __getitem__(self, key: str) -> dict:
        if key not in self.prepared:
            self.prepared[key] = prepare(self.stack, key, self.indices, self.cache)
        return self.prepared[key]
