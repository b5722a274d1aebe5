"""reprsim from Python, on arrays a user holds: :func:`compare` (every measure between two layer stacks, with its
chance level, p, interval and n, as the pair tables give them), :func:`compare_many` (every pair of many models,
each model's terms prepared once), :func:`best_matches` (each layer's best match, corrected for the choice, from
such a table), :func:`measures` (the registry as a table) and :func:`aliases` (the names other libraries give them).

Reached as ``reprsim.compare`` etc. (``reprsim/__init__.py`` loads this module on first use, so ``import reprsim``
stays light). :func:`compare` computes through the workflow's own pair engine (reprsim.metrics.pair_engine.compare_stacks),
so on the same rows and settings its table equals a pair job's row for row.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import re
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


def aliases() -> pd.DataFrame:
    """The names reprsim accepts for its measures besides the registry's, one row each: the name as typed ("{k}"
    stands for a parameter given in the name), the registry measure and the parameters the name fixes, whose name it
    is (the shipped configurations, similarity-repository, platonic-rep, anatome, netrep, ReSi) and, in `note`,
    where that library's own code computes something else under it. Parameter names of the peers (topk for k, ...)
    are the rows marked "(parameter)"."""
    from reprsim.measure_aliases import table

    return pd.DataFrame(table())


def _measure_specs(chosen) -> dict[str, dict]:
    """`measures` as the configuration's section: label -> {measure, params, null_permutations, resamples}."""
    from reprsim.config import measures_errors

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
    # a name in a list is its own label, as typed; similarity-repository's IDs hold '=', which a configuration's
    # labels may not, so listed names are checked under stand-in labels and the problems name them as typed
    typed = not isinstance(chosen, Mapping)
    labels = {f"listed{i}" if typed else label: label for i, label in enumerate(specs)}
    problems = measures_errors({key: specs[label] for key, label in labels.items()})  # resolves the aliases in place
    if typed:
        problems = [re.sub(r"measures\.(listed\d+)(?![0-9])", lambda m: f"measures.{labels[m.group(1)]}", problem)
                    for problem in problems]
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
            names: tuple[str, str] = ("X", "Y"), row_ids=None, replicates: bool = False, progress: bool = False,
            best_matches: bool = True):
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

    Each row also says whether its layer_b is the best match of its layer_a (``is_best``; the largest similarity or
    smallest distance over Y's layers) and, on every row of a layer_a, ``selection_p``: that best match's p against
    the null of the best over Y's layers, which accounts for the choice (reprsim.inference.best_match). ``split_best`` marks
    the layer chosen on a seeded half of the rows, and ``split_value``, ``split_low``, ``split_high`` its value and
    interval on the other half. ``best_matches=False`` leaves them empty (and saves the split's computation);
    :func:`best_match` gives one row per layer.
    """
    specs = _measure_specs(measures)
    _check_draws(permutations, resamples, confidence)
    if len(names) != 2 or not all(isinstance(name, str) for name in names):
        raise InputError(f"names must be two strings (model_a, model_b); got {names!r}")
    Xs, Ys, moved = _matched_rows(_stack(X, "X"), _stack(Y, "Y"), row_ids)
    table, long = _compare_stacks(Xs, Ys, specs, names, permutations, resamples, confidence, seed, device,
                                  max_memory_gb, progress, best_matches, None)
    table.attrs["rows_reordered"] = moved
    return (table, long) if replicates else table


def _check_draws(permutations, resamples, confidence) -> None:
    for argument, value, least in (("permutations", permutations, 1), ("resamples", resamples, 2)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise InputError(f"{argument} must be an integer ≥ {least}; got {value!r}")
    if not 0 < confidence < 1:
        raise InputError(f"confidence must be in (0, 1); got {confidence!r}")


def _compare_stacks(Xs, Ys, specs, names, permutations, resamples, confidence, seed, device, max_memory_gb,
                    progress, best_matches, kept_sides):
    """The pair engine on two checked stacks: the pair table and the replicates' long table, with compare's
    columns."""
    from reprsim.io.device import resolve_device
    from reprsim.metrics.pair_engine import compare_stacks

    try:
        target = resolve_device(device) if isinstance(device, str) else device
    except ValueError as error:
        raise InputError(str(error)) from error
    output = contextlib.nullcontext() if progress else contextlib.redirect_stdout(io.StringIO())
    with output:
        table, long = compare_stacks(
            Xs, Ys, names=tuple(names), measures=specs, chance={"permutations": int(permutations), "seed": int(seed)},
            intervals={"resamples": int(resamples), "confidence": float(confidence), "seed": int(seed)},
            device=target, max_memory_gb=max_memory_gb, kept_sides=kept_sides, best_matches=best_matches)
    for position, column in ((0, "dataset"), (1, "representation")):
        table.insert(position, column, None)
        long.insert(position, column, None)
    table.insert(table.columns.get_loc("n"), "split", None)
    return table, long


def compare_many(models: Mapping, measures=None, *, pairs=None, permutations: int = 100, resamples: int = 100,
                 confidence: float = 0.95, seed: int = 0, device: str = "cpu", max_memory_gb: float | None = None,
                 terms_memory_gb: float = 4.0, best_matches: bool = True, replicates: bool = False,
                 progress: bool = False):
    """:func:`compare` for many models: one tidy pair table for every pair of `models` (a mapping name -> matrix
    or layer stack, as compare's X; every model on the same rows in the same order).

    ``pairs`` lists the (name, name) pairs to compare; None = every pair of distinct models once, in the mapping's
    order (model_a before model_b). Each model's terms (its Gram matrices, principal bases, neighbour lists:
    reprsim.metrics.prepared) are prepared once and kept for its other pairs while they fit in
    ``terms_memory_gb`` (the least recently used model's are dropped first, and prepared again if needed:
    the numbers do not change); ``max_memory_gb`` bounds one pair's n × n working memory as in compare. Every pair
    draws the same permutations and half-samples (same n, same seed), so replicate r of every pair rests on the
    same rows, as in the workflow. The other arguments are compare's (``replicates``: also the long table of every
    pair's half-sample replicates); ``progress`` prints each pair's time."""
    import time

    if not isinstance(models, Mapping) or len(models) < 2:
        raise InputError("models must be a mapping name -> matrix or layer stack with at least two models; got "
                         f"{type(models).__name__}" + (f" of {len(models)}" if isinstance(models, Mapping) else ""))
    specs = _measure_specs(measures)
    _check_draws(permutations, resamples, confidence)
    if not terms_memory_gb > 0:
        raise InputError(f"terms_memory_gb must be positive; got {terms_memory_gb!r}")
    stacks = {}
    for name, value in models.items():
        if not isinstance(name, str):
            raise InputError(f"model names must be strings; got {name!r}")
        stacks[name] = _stack(value, f"models[{name!r}]")
    rows = {name: stack.shape[1] for name, stack in stacks.items()}
    if len(set(rows.values())) > 1:
        listed = ", ".join(f"{name}: {n}" for name, n in rows.items())
        raise InputError(f"the models hold different numbers of rows ({listed}): every model must be run on the same "
                         "inputs in the same order")
    names = list(stacks)
    if pairs is None:
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    pairs = [tuple(pair) for pair in pairs]
    for pair in pairs:
        unknown = [name for name in pair if name not in stacks]
        if len(pair) != 2 or unknown:
            close = difflib.get_close_matches(str(unknown[0]), names, n=2) if unknown else []
            hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
            raise InputError(f"pairs: {pair!r} is not two of the models' names{hint}; models: {', '.join(names)}")
    kept: dict = {}
    tables, longs = [], []
    started = time.perf_counter()
    for count, (a, b) in enumerate(pairs, 1):
        table, long = _compare_stacks(stacks[a], stacks[b], specs, (a, b), permutations, resamples, confidence, seed,
                                      device, max_memory_gb, False, best_matches, kept)
        tables.append(table)
        longs.append(long)
        _bound(kept, {a, b}, terms_memory_gb * 1024**3)
        if progress:
            print(f"pair {count}/{len(pairs)}: {a} vs {b} done, {time.perf_counter() - started:.1f} s", flush=True)
    out = pd.concat(tables, ignore_index=True)
    out.attrs["pairs"] = pairs
    return (out, pd.concat(longs, ignore_index=True)) if replicates else out


def _nbytes(value, seen: set | None = None) -> int:
    """Bytes of the tensors and arrays in a prepared side (nested dicts and lists; each object counted once, so
    tensors shared between entries and containers that refer back are not counted twice)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if hasattr(value, "element_size") and hasattr(value, "nelement"):
        return int(value.element_size() * value.nelement())
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, dict):
        return sum(_nbytes(item, seen) for item in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(item, seen) for item in value)
    return 0


def _bound(kept: dict, current: set, limit: float) -> None:
    """Drop the least recently used models' sides (`kept`, insertion-ordered: re-inserted on use) until the rest
    fit in `limit` bytes; the current pair's are dropped last."""
    for key in [key for key in kept if key[0] in current]:
        kept[key] = kept.pop(key)  # most recently used: last
    sizes = {key: _nbytes([side.stack, side.prepared, side.cache]) for key, side in kept.items()}
    while kept and sum(sizes[key] for key in kept) > limit:
        sizes.pop(oldest := next(iter(kept)))
        kept.pop(oldest)


def best_matches(table: pd.DataFrame) -> pd.DataFrame:
    """For each layer of model_a, the layer of model_b that matches it best, from a pair table of :func:`compare`
    or :func:`compare_many` (one row per model pair, measure, direction and layer_a): ``best_b`` on all rows, its
    ``value`` and own ``null_p``, and ``selection_p``, its p against the null of the best over model_b's layers
    (the choice accounted for: read this one); ``split_b``, the layer chosen on a seeded half of the rows, with
    ``split_value`` and its interval [``split_low``, ``split_high``] on the other half (rows the choice did not
    see); ``agrees``: the two choices are the same layer; ``n_select``, ``n_estimate``: the halves' rows."""
    from reprsim.inference.best_match import table as best_table

    try:
        return best_table(table)
    except ValueError as error:
        raise InputError(str(error)) from error
