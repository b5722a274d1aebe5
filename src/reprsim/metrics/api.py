"""The stable entry points over every measure by name: compute, compute_layers, null, null_layers,
replicate_layers; and their directed forms (both directions of an asymmetric measure at once)
that the pairwise jobs use."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from reprsim import measure_registry as registry

# Every measure's module is imported here although the registry loads each by name: the rules declare the modules a
# pair job imports as its code inputs (reprsim.workflow.codedeps), so an edit to a measure reruns its pair jobs.
from reprsim.metrics import (  # noqa: F401
    alignment,
    cka,
    cknna,
    knn,
    neighbourhood,
    neuron,
    permutation,
    procrustes,
    rsm,
    sample_size,
    statistics,
    subsample,
)
from reprsim.metrics._inputs import (UNIT_VARIANCE, constant_units, counted_meta, device_of, dtype_name, layer_pair,
                                     pair)
from reprsim.metrics.cca import cca_layers_from, cca_prepared
from reprsim.metrics.cka import minibatch_cka_layers
from reprsim.metrics.neuron import neuronsim_both_layers


@dataclass
class Result:
    value: float
    meta: dict = field(default_factory=dict)


@dataclass
class LayerResult:
    values: np.ndarray
    meta: dict = field(default_factory=dict)


@dataclass
class DirectedResult:
    """values (D, L1, L2): D = 1 for a symmetric measure, else [X→Y, (Y→X)ᵀ] (both indexed by
    X's layer, then Y's); metas: one dict per direction; statistics: (D, L1, L2) arrays."""
    values: np.ndarray
    metas: list[dict]
    statistics: dict = field(default_factory=dict)
    draws: np.ndarray | None = None  # the null draws (P, D, L1, L2) where they were drawn (reprsim.inference.best_match)


def _cca_directed(kind: str) -> Callable:
    """CCA family over all layer pairs: each layer's basis computed once, then one batched decomposition
    per block shape; PWCCA's two directions come from the same decomposition."""

    def run(Xs, Ys, **params):
        px, py = cca_prepared(kind, Xs, Ys, params)
        return cca_layers_from(kind, px, py, params, Xs.shape[1], with_meta=True)

    return run


def _forward(directed: Callable) -> Callable:
    def run(Xs, Ys, **params):
        values, meta = directed(Xs, Ys, **params)
        return values[0], meta

    return run


def cka_minibatch_layers(Xs, Ys, batch_size=1024, **params):
    return minibatch_cka_layers(Xs, Ys, batch_size, **params)


cca_layers = _forward(_cca_directed("cca"))
svcca_layers = _forward(_cca_directed("svcca"))
pwcca_layers = _forward(_cca_directed("pwcca"))


# name -> (layers function X→Y, similarity or distance, symmetric?), from the registry (reprsim.measure_registry)
MEASURES: dict[str, tuple[Callable, str, bool]] = {
    name: (spec.load(), spec.kind, spec.symmetric) for name, spec in registry.MEASURES.items()}

# asymmetric measures whose two directions come from one computation: -> ((2, L1, L2), meta)
BOTH_DIRECTIONS: dict[str, Callable] = {"pwcca": _cca_directed("pwcca"), "neuronsim": neuronsim_both_layers,
                                        "cknna": cknna.cknna_both_layers}


# parameters each measure accepts (checked before any computation, so a typo is named); a config's
# are checked, with their types and ranges, by schema.yaml's $defs/measure_params (tests keep the names in step)
PARAMETERS: dict[str, tuple[str, ...]] = {name: tuple(spec.params) for name, spec in registry.MEASURES.items()}


def check_params(name: str, params: dict) -> None:
    _measure(name)
    unknown = sorted(set(params) - set(PARAMETERS[name]))
    if unknown:
        allowed = ", ".join(PARAMETERS[name]) or "none"
        raise ValueError(f"measure {name!r} has no parameter(s) {unknown}; allowed: {allowed}")


def _measure(name: str):
    if name not in MEASURES:
        raise ValueError(f"unknown measure {name!r}; available: {', '.join(sorted(MEASURES))}")
    return MEASURES[name]


_inputs = layer_pair


def _describe(name: str, params: dict, meta: dict, Xs: torch.Tensor, Ys: torch.Tensor, first) -> dict:
    """The measure's meta with what every row records: shapes, dtype, device, and the sample-size
    note for the measures biased at small n/k (reprsim.metrics.sample_size)."""
    return describe(name, params, meta, int(Xs.shape[1]), int(Xs.shape[2]), int(Ys.shape[2]), dtype_name(first),
                    str(device_of(first)))


def describe(name: str, params: dict, meta: dict, n: int, d_x: int, d_y: int, dtype: str, device: str) -> dict:
    """:func:`_describe` from the shapes: what a row of `name` records beside the measure's own meta."""
    _, kind, symmetric = MEASURES[name]
    k = sample_size.compared_dimensions(name, params, d_x, d_y, meta)
    if k is not None:
        meta = {**meta, "k": k, **({"warning": w} if (w := sample_size.warning(n, k)) else {})}
    if "excluded_units" in meta:
        meta = _with_unit_warnings(meta)
    return {"measure": name, "kind": kind, "symmetric": symmetric, "n": n, "d_x": d_x, "d_y": d_y,
            "dtype": dtype, "device": device, **params, **meta}


def _with_unit_warnings(meta: dict) -> dict:
    """Each layer pair's note of the units its measure left out (reprsim.metrics._inputs.excluded_meta) added to
    that pair's warning, after the shared one, joined by "; "."""
    shared = meta.get("warning")
    per_pair = {}
    for pair_key, entry in meta.get("per_pair", {}).items():
        if entry.get("units_note"):
            warning = "; ".join(w for w in (entry.get("warning", shared), entry["units_note"]) if w)
            entry = {**entry, "warning": warning}
        per_pair[pair_key] = entry
    return {**meta, "per_pair": per_pair}


def unit_masks(name: str, Xs: torch.Tensor, Ys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The constant units of both stacks on all rows, for a measure that leaves them out (UNIT_VARIANCE), else None:
    the null's and the interval's draws then leave out the same units as the value."""
    return (constant_units(Xs), constant_units(Ys)) if name in UNIT_VARIANCE else None


def _backward_units(meta: dict, d_y: int, d_x: int, swap: bool) -> dict:
    """The Y→X meta's unit counts (:func:`reprsim.metrics._inputs.counted_meta`) from an X→Y call's meta (`swap`)
    or from the call on (Y, X): Y's units counted as "x", per_pair keyed (X's layer, Y's layer)."""
    if "excluded_units" not in meta:
        return meta
    counts = meta["excluded_units"]
    first, second = (counts["y"], counts["x"]) if swap else (counts["x"], counts["y"])
    return {**meta, **counted_meta(first, second, d_y, d_x, transposed=True)}


def _evaluator(name: str, params: dict, forward_only: bool = False,
               constant: tuple[torch.Tensor, torch.Tensor] | None = None) -> Callable:
    """(Xs, Ys) tensors -> ((D, L1, L2) array, [meta per direction]) for `name`; with forward_only,
    X→Y alone (D = 1), without computing an asymmetric measure's other direction. `constant`: the masks of
    X's and Y's units to leave out (:func:`unit_masks`), given to the measures that take them. The Y→X meta
    counts the units left out as that direction sees them ("x": Y's), its per_pair keyed (X's layer, Y's) as
    every meta's."""
    function, _, symmetric = MEASURES[name]
    given = {} if constant is None else {"constant": constant}
    swapped = {} if constant is None else {"constant": constant[::-1]}

    def evaluate(Xs, Ys):
        if symmetric or (forward_only and name not in BOTH_DIRECTIONS):
            values, meta = function(Xs, Ys, **params, **given)
            return values.cpu().numpy()[None], [meta]
        if name in BOTH_DIRECTIONS:
            values, meta = BOTH_DIRECTIONS[name](Xs, Ys, **params, **given)
            return values.cpu().numpy(), [meta, _backward_units(meta, Ys.shape[-1], Xs.shape[-1], swap=True)]
        forward, meta_forward = function(Xs, Ys, **params, **given)
        backward, meta_backward = function(Ys, Xs, **params, **swapped)
        return (np.stack([forward.cpu().numpy(), backward.cpu().numpy().T]),
                [meta_forward, _backward_units(meta_backward, Ys.shape[-1], Xs.shape[-1], swap=False)])

    return evaluate


def directed_layers(name: str, Xs, Ys, **params) -> DirectedResult:
    """`name` for every layer pair, in both directions when it is asymmetric (see DirectedResult)."""
    check_params(name, params)
    first = Xs[0] if isinstance(Xs, (list, tuple)) else Xs
    Xs_t, Ys_t = _inputs(Xs, Ys)
    values, metas = _evaluator(name, params)(Xs_t, Ys_t)
    sides = [(Xs_t, Ys_t), (Ys_t, Xs_t)]
    return DirectedResult(values, [_describe(name, params, meta, *sides[d], first) for d, meta in enumerate(metas)])


def compute_layers(name: str, Xs, Ys, **params) -> LayerResult:
    """`name` for every layer pair of Xs (L1, n, d1) and Ys (L2, n, d2): values (L1, L2) and meta."""
    check_params(name, params)
    first = Xs[0] if isinstance(Xs, (list, tuple)) else Xs
    Xs_t, Ys_t = _inputs(Xs, Ys)
    values, meta = MEASURES[name][0](Xs_t, Ys_t, **params)
    return LayerResult(values.cpu().numpy(), _describe(name, params, meta, Xs_t, Ys_t, first))


def _single(result: LayerResult, X) -> Result:
    meta = {**result.meta, "dtype": dtype_name(X), "device": str(device_of(X))}
    per_pair = meta.pop("per_pair", None)
    if per_pair:
        meta.update(per_pair[(0, 0)])
    for key, value in list(meta.items()):
        if isinstance(value, np.ndarray):
            meta[key] = float(value[0, 0])
    return Result(float(result.values[0, 0]), meta)


def compute(name: str, X, Y, **params) -> Result:
    """`name` for one pair X (n, d1), Y (n, d2): a float value and its meta."""
    X_t, Y_t = pair(X, Y)
    return _single(compute_layers(name, X_t[None], Y_t[None], **params), X)


def directed_null(name: str, Xs, Ys, n_permutations: int = 100, seed: int = 0, **params) -> DirectedResult:
    """Permutation null for every layer pair (and direction): one row permutation of Y per draw,
    shared by all layer pairs and both directions (reprsim.metrics.permutation).

    statistics: null_mean, null_std and p_value (D, L1, L2); p = (1 + #{draws at least as
    extreme}) / (1 + n_permutations), extreme meaning ≥ the observed value for a similarity and
    ≤ for a distance. meta: the route, and where the null mean comes from.
    """
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be ≥ 1; got {n_permutations}")
    observed = directed_layers(name, Xs, Ys, **params)
    Xs_t, Ys_t = _inputs(Xs, Ys)
    perms = permutation.permutations(Ys_t.shape[1], n_permutations, seed, Ys_t.device)
    evaluate = _evaluator(name, params, constant=unit_masks(name, Xs_t, Ys_t))
    draws, route = permutation.null_draws(name, Xs_t, Ys_t, perms, evaluate, **params)
    statistics, source = null_statistics(name, params, observed.values, draws, Xs_t.shape[1])
    metas = [{**meta, "n_permutations": n_permutations, "seed": seed, "null_route": route, "null_mean_from": source}
             for meta in observed.metas]
    return DirectedResult(observed.values, metas, statistics, draws)


def null_statistics(name: str, params: dict, values: np.ndarray, draws: np.ndarray, n: int) -> tuple[dict, str]:
    """null_mean, null_std and p_value (the shape of `values`) from the null `draws` (P, *values.shape), and
    where the null mean comes from (see :func:`directed_null`)."""
    if MEASURES[name][1] == "similarity":
        extreme = draws >= values[None]
    else:
        extreme = draws <= values[None]
    exact = permutation.exact_null_mean(name, n, params)
    with warnings.catch_warnings():  # an undefined cell (NaN in every draw) stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        null_mean = np.nanmean(draws, axis=0) if exact is None else np.full(values.shape, exact)
        null_std = np.nanstd(draws, axis=0)
    source = "exact k / (n − 1)" if exact is not None else "mean of the permutation draws"
    return {"null_mean": null_mean, "null_std": null_std,
            "p_value": (1 + extreme.sum(axis=0)) / (1 + len(draws))}, source


def null_layers(name: str, Xs, Ys, n_permutations: int = 100, seed: int = 0, **params) -> LayerResult:
    """:func:`directed_null` for X→Y: meta gains null_mean, null_std and p_value arrays (L1, L2)."""
    result = directed_null(name, Xs, Ys, n_permutations, seed, **params)
    return LayerResult(result.values[0], {**result.metas[0], **{k: v[0] for k, v in result.statistics.items()}})


def null(name: str, X, Y, n_permutations: int = 200, seed: int = 0, **params) -> Result:
    """Permutation null of one pair X (n, d1), Y (n, d2): the value with null_mean, null_std, p_value."""
    X_t, Y_t = pair(X, Y)
    return _single(null_layers(name, X_t[None], Y_t[None], n_permutations, seed, **params), X)


def directed_replicates(name: str, Xs, Ys, indices: np.ndarray, **params) -> tuple[np.ndarray, str]:
    """(B, D, L1, L2) values of `name` on the row subsets `indices` (B, m), every layer pair and
    direction, and the route that computed them (reprsim.metrics.subsample). Intervals from them:
    reprsim.inference.resampling.interval."""
    check_params(name, params)
    Xs_t, Ys_t = _inputs(Xs, Ys)
    evaluate = _evaluator(name, params, constant=unit_masks(name, Xs_t, Ys_t))
    return subsample.replicate_draws(name, Xs_t, Ys_t, np.asarray(indices), evaluate, **params)


def replicate_layers(name: str, Xs, Ys, indices: np.ndarray, **params) -> tuple[np.ndarray, str]:
    """:func:`directed_replicates` for X→Y alone: (B, L1, L2); an asymmetric measure's other direction is
    not computed where it costs a second evaluation."""
    check_params(name, params)
    Xs_t, Ys_t = _inputs(Xs, Ys)
    draws, route = subsample.replicate_draws(name, Xs_t, Ys_t, np.asarray(indices), _evaluator(
        name, params, forward_only=True, constant=unit_masks(name, Xs_t, Ys_t)), **params)
    return draws[:, 0], route
