"""A measure's values between two models' layers as the pair jobs wrote them (rule compare_pair,
reprsim.stages.compare.pairs: the table of the pair job computing a and b, results/pairs/<representation>/<dataset>/
<block_a>__<block_b>.parquet, and its .resamples; reprsim.workflow.pair_blocks): the
grounding tests read them instead of computing them again where a pair job compared the same rows with the same
measure (rule measure_tests names those tables; docs/numerics.md §13a).

The replicates are the same: a pair job draws `half_samples(n, R_pair, similarity.intervals.seed)` and the grounding
tests `half_samples(n, grounding.resamples, same seed)`, whose draws are the pair job's first ones. A layer whose rows
are all one vector is NaN in the table, as the grounding tests' own computation leaves it."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

# sorted model pair -> (the table and replicates of the pair job that computed it: its block pair's)
Tables = Mapping[tuple[str, str], tuple[str | Path, str | Path]]


def layer_values(tables: Tables, label: str, params: Mapping, n: int, resamples: int, x: str, y: str):
    """(values (Lx, Ly), replicates (resamples, Lx, Ly)) of the measure `label` with x's layers as X and y's as Y
    (an asymmetric measure in direction x→y) from the pair table of {x, y}; None where `tables` has none."""
    pair = tuple(sorted((x, y)))
    if pair not in tables:
        return None
    table, replicates = tables[pair]
    values, draws, directions = _read(str(table), str(replicates), pair, label, _canonical(params), n, resamples)
    forward = x == pair[0]  # the table's model_a is X
    d = directions.index("symmetric" if "symmetric" in directions else "a->b" if forward else "b->a")
    # direction b->a holds measure(X = b's layer_b, Y = a's layer_a) at [layer_a, layer_b]
    return (values[d], draws[:, d]) if forward else (values[d].T, draws[:, d].transpose(0, 2, 1))


def _canonical(params: Mapping | None) -> str:
    return json.dumps(dict(params or {}), sort_keys=True)


@functools.lru_cache(maxsize=None)
def _read(table_path: str, replicates_path: str, pair: tuple[str, str], label: str, params: str, n: int,
          resamples: int):
    """(values (D, La, Lb), replicates (resamples, D, La, Lb), directions) of one measure for one model pair in its
    pair job's table; read once per process (the tests read a pair more than once); the arrays are read-only."""
    of_pair = [("model_a", "==", pair[0]), ("model_b", "==", pair[1])]
    table = pd.read_parquet(table_path, columns=["layer_a", "layer_b", "measure", "direction", "params", "value",
                                                 "n_resamples", "n"], filters=[("measure", "==", label), *of_pair])
    computed = {_canonical(json.loads(p)) for p in table["params"]}
    if table.empty or computed != {params} or (table["n"] != n).any() or (table["n_resamples"] < resamples).any():
        raise ValueError(f"{table_path}: {label!r} of {pair[0]} and {pair[1]} is not there as this job computes it ({params} on {n} rows, "
                         f"{resamples} half-samples); rule measure_tests names only pair tables that hold it")
    directions = sorted(set(table["direction"]))  # ["symmetric"] or ["a->b", "b->a"]
    shape = (len(directions), int(table["layer_a"].max()) + 1, int(table["layer_b"].max()) + 1)
    values = np.full(shape, np.nan)
    values[_index(table, directions)] = table["value"].to_numpy()
    long = pd.read_parquet(replicates_path, columns=["layer_a", "layer_b", "direction", "replicate", "value"],
                           filters=[("measure", "==", label), ("replicate", "<", resamples), *of_pair])
    draws = np.full((resamples, *shape), np.nan)
    draws[(long["replicate"].to_numpy(), *_index(long, directions))] = long["value"].to_numpy()
    values.flags.writeable = draws.flags.writeable = False
    return values, draws, directions


def _index(rows: pd.DataFrame, directions: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (rows["direction"].map(directions.index).to_numpy(), rows["layer_a"].to_numpy(), rows["layer_b"].to_numpy())
