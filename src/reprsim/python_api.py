"""reprsim from Python, on arrays a user holds: :func:`compare` (every measure between two layer stacks, with its
chance level, p, interval and n, as the pair tables give them) and :func:`measures` (the registry as a table).

Both are reached as ``reprsim.compare`` and ``reprsim.measures`` (``reprsim/__init__.py`` loads this module on
first use, so ``import reprsim`` stays light). :func:`compare` computes through the workflow's own pair engine
(reprsim.pair_engine.compare_stacks), so on the same rows and settings its table equals a pair job's row for row.
"""

from __future__ import annotations

import contextlib
import difflib
import io
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

# the workflow's pair-table columns that arrays carry no value for: None in compare's table
NO_DATASET = ("dataset", "representation", "split")


class InputError(ValueError):
    """Arrays or settings reprsim.compare cannot use; the message names the argument and what was expected."""


def measures() -> pd.DataFrame:
    """Every measure reprsim computes, one row each: family, kind (similarity or distance), range, the value on
    identical inputs, symmetry, each invariance it declares (and tests: tests/unit/test_measure_registry.py), whether
    it uses the row correspondence, the rows it needs, its parameters with their defaults, cost and reference."""
    from reprsim.measure_registry import INVARIANCES
    from reprsim.metrics.catalogue import ordered

    rows = []
    for spec in ordered():
        declared = spec.declared()
        rows.append({
            "measure": spec.name, "label": spec.label, "family": spec.family, "kind": spec.kind,
            "range_low": float(spec.range[0]), "range_high": float(spec.range[1]), "identical": float(spec.identical),
            "symmetric": spec.symmetric, **{f"invariant_{key}": key in declared for key in INVARIANCES},
            "uses_rows": spec.correspondence, "needs": spec.rows, "rows_per_dimension": spec.rows_per_dimension,
            "params": dict(spec.params), "cost": spec.cost, "reference": spec.reference,
        })
    return pd.DataFrame(rows)


def _measure_specs(chosen) -> dict[str, dict]:
    """`measures` as the configuration's section: label -> {measure, params, null_permutations, resamples}."""
    from reprsim.config import measures_errors
    from reprsim.measure_registry import MEASURES

    if chosen is None:
        chosen = ["cka"]
    if isinstance(chosen, str):
        chosen = [chosen]
    if isinstance(chosen, Mapping):
        specs = {str(label): ({"measure": spec} if isinstance(spec, str) else dict(spec))
                 for label, spec in chosen.items()}
    elif isinstance(chosen, Sequence):
        specs = {str(name): {"measure": name} for name in chosen}
    else:
        raise InputError(f"measures must be a measure name, a list of names or a mapping label -> spec; "
                         f"got {type(chosen).__name__}")
    if not specs:
        raise InputError("measures is empty; reprsim.measures() lists the measures")
    for label, spec in specs.items():
        name = spec.get("measure")
        if name not in MEASURES:
            close = difflib.get_close_matches(str(name), sorted(MEASURES), n=3)
            hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
            raise InputError(f"measures[{label!r}]: unknown measure {name!r}{hint}; reprsim.measures() lists them")
    problems = measures_errors(specs)
    if problems:
        raise InputError("invalid measures:\n" + "\n".join(f"  - {p}" for p in problems))
    return specs


def _stack(Z, argument: str) -> np.ndarray:
    """One argument as a layer stack (layers, n, d): a matrix (n, d) is one layer; numpy or torch; a list of
    matrices is a stack. Integer and boolean values are read as float64; NaN and Inf are refused."""
    if hasattr(Z, "detach") and hasattr(Z, "cpu"):  # a torch tensor, without importing torch for numpy inputs
        Z = Z.detach().cpu().numpy()
    if isinstance(Z, (list, tuple)):
        layers = [np.asarray(layer.detach().cpu().numpy() if hasattr(layer, "detach") else layer) for layer in Z]
        shapes = {layer.shape for layer in layers}
        if len(shapes) > 1:
            listed = ", ".join(f"layer {i}: {layer.shape}" for i, layer in enumerate(layers))
            raise InputError(f"{argument}'s layers differ in shape ({listed}); every layer needs the same rows "
                             "(and, within a stack, the same width)")
        Z = np.stack(layers) if layers else np.empty((0, 0, 0))
    Z = np.asarray(Z)
    if Z.ndim == 2:
        Z = Z[None]
    if Z.ndim != 3:
        raise InputError(f"{argument} must be a matrix (rows, dims) or a layer stack (layers, rows, dims); "
                         f"got shape {Z.shape}")
    if Z.dtype.kind in "biu":
        Z = Z.astype(np.float64)
    if Z.dtype.kind != "f":
        raise InputError(f"{argument} must hold real numbers; got dtype {Z.dtype}")
    if min(Z.shape) == 0:
        raise InputError(f"{argument} is empty: shape (layers, rows, dims) = {Z.shape}")
    if Z.shape[1] < 2:
        raise InputError(f"{argument} has {Z.shape[1]} row; a similarity needs at least 2 rows (inputs)")
    bad = ~np.isfinite(Z)
    if bad.any():
        layers = np.flatnonzero(bad.any(axis=(1, 2)))
        listed = ", ".join(f"layer {i}: {int(bad[i].sum())}" for i in layers[:5])
        raise InputError(f"{argument} holds NaN or Inf ({listed}{', ...' if len(layers) > 5 else ''}); "
                         "similarity is undefined on them: drop or fix those rows first")
    return Z


def _matched_rows(X: np.ndarray, Y: np.ndarray, row_ids) -> tuple[np.ndarray, np.ndarray, int]:
    """X and Y on the same rows in the same order: Y reordered to X's `row_ids` when they are given."""
    if row_ids is None:
        if X.shape[1] != Y.shape[1]:
            raise InputError(f"X has {X.shape[1]} rows and Y {Y.shape[1]}: rows must be the same inputs, in the same "
                             "order (pass row_ids=(ids_of_X, ids_of_Y) to match them by id)")
        return X, Y, 0
    ids_x, ids_y = (np.asarray(ids).reshape(-1) for ids in row_ids)
    for ids, Z, name in ((ids_x, X, "X"), (ids_y, Y, "Y")):
        if len(ids) != Z.shape[1]:
            raise InputError(f"row_ids of {name} has {len(ids)} ids for {Z.shape[1]} rows")
        values, counts = np.unique(ids, return_counts=True)
        if (counts > 1).any():
            raise InputError(f"row_ids of {name} repeat {int((counts > 1).sum())} id(s), e.g. {values[counts > 1][0]!r}")
    only_x, only_y = np.setdiff1d(ids_x, ids_y), np.setdiff1d(ids_y, ids_x)
    if len(only_x) or len(only_y):
        raise InputError(f"the rows differ: {len(only_x)} id(s) only in X (e.g. {list(only_x[:3])}), "
                         f"{len(only_y)} only in Y (e.g. {list(only_y[:3])}); compare the rows both have")
    order = np.argsort(ids_y)[np.searchsorted(np.sort(ids_y), ids_x)]
    moved = int((order != np.arange(len(order))).sum())
    return X, Y[:, order], moved


def compare(X, Y, measures=None, *, permutations: int = 100, resamples: int = 100, confidence: float = 0.95,
            seed: int = 0, device: str = "cpu", max_memory_gb: float | None = None,
            names: tuple[str, str] = ("X", "Y"), row_ids=None, replicates: bool = False, progress: bool = False):
    """Every measure between X and Y for all their layer pairs, each value with its chance level, p, interval and n.

    X and Y are matrices (rows, dims) or layer stacks (layers, rows, dims; or a list of matrices), numpy or torch;
    rows are the same inputs in the same order (or give ``row_ids=(ids_of_X, ids_of_Y)``: Y's rows are matched to
    X's). ``measures`` is a measure name, a list of names, or a mapping label -> name or
    {measure, params, null_permutations, resamples}, as the configuration's ``measures:`` section;
    None = linear CKA. ``permutations`` draws the permutation null (its mean is the chance level; p counts draws at
    least as extreme), ``resamples`` the half-sample replicates of the ``confidence`` interval; ``seed`` seeds
    both. ``device`` is cpu, cuda or auto.

    Returns the pair table (pandas): model_a, model_b (``names``), layer_a, layer_b, measure (the label), kind,
    direction (symmetric; a->b and b->a for an asymmetric measure), params, value, n_permutations, null_mean,
    null_std, null_p, ci_low, ci_high, n_resamples, beyond_chance, warning, meta (JSON), n; and dataset,
    representation and split, which arrays leave None. With ``replicates`` also the long table of the
    half-sample replicates. ``progress`` prints each measure's time.
    """
    from reprsim.io.device import resolve_device
    from reprsim.pair_engine import compare_stacks

    specs = _measure_specs(measures)
    for argument, value, least in (("permutations", permutations, 1), ("resamples", resamples, 2)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise InputError(f"{argument} must be an integer ≥ {least}; got {value!r}")
    if not 0 < confidence < 1:
        raise InputError(f"confidence must be in (0, 1); got {confidence!r}")
    if len(names) != 2 or not all(isinstance(name, str) for name in names):
        raise InputError(f"names must be two strings (model_a, model_b); got {names!r}")
    Xs, Ys, moved = _matched_rows(_stack(X, "X"), _stack(Y, "Y"), row_ids)
    try:
        target = resolve_device(device) if isinstance(device, str) else device
    except ValueError as error:
        raise InputError(str(error)) from error
    output = contextlib.nullcontext() if progress else contextlib.redirect_stdout(io.StringIO())
    with output:
        table, long = compare_stacks(
            Xs, Ys, names=tuple(names), measures=specs, chance={"permutations": int(permutations), "seed": int(seed)},
            intervals={"resamples": int(resamples), "confidence": float(confidence), "seed": int(seed)},
            device=target, max_memory_gb=max_memory_gb)
    for position, column in ((0, "dataset"), (1, "representation")):
        table.insert(position, column, None)
        long.insert(position, column, None)
    table.insert(len(table.columns) - 1, "split", None)
    table.attrs["rows_reordered"] = moved
    return (table, long) if replicates else table
