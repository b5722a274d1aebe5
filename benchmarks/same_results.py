"""Are two runs' results the same? Every table of one results folder against the other's.

    python benchmarks/same_results.py BEFORE/results AFTER/results [--rtol 1e-9] [--atol 1e-12]

Each parquet table present in either folder is read from both: missing tables, changed columns and changed
row counts are reported; numeric columns compare within rtol (relative to the larger magnitude) or atol, and
NaN equals NaN; other columns compare exactly, JSON columns (meta, detail) key by key with the same numeric
tolerance. The default tolerances are for two runs on one machine and kernel path (the same code, or a change that
keeps the order of every sum): between CPUs or MKL kernel paths, or after a change that reorders a sum, values move
by rounding (bounded by about 1e-9 in a pair job's sums over 872 rows, and more where training is involved;
docs/findings.md, "The same numbers on another CPU"), so compare those with a looser --rtol. Columns and JSON keys
that record time or place (any name with 'seconds', device, …) are left out. Prints
one line per table that differs (the worst column and its largest difference) and a summary; exit status 1
when anything differs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

# what legitimately differs between two runs of the same computation: wall-clock times and where a job ran
TIMING = {"device", "elapsed", "started", "finished", "hostname"}


def timing(name: str) -> bool:
    """A column or JSON key that records time or place (seconds, fit_seconds, train_seconds, device, ...)."""
    return name in TIMING or "seconds" in name


def _close(a, b, rtol: float, atol: float) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = {k for k in set(a) | set(b) if not timing(k)}
        return all(_close(a.get(k), b.get(k), rtol, atol) for k in keys)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):  # array cells (a dataset's word spans)
        a, b = np.asarray(a).tolist(), np.asarray(b).tolist()
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if math.isnan(a) and math.isnan(b):
            return True
        return abs(a - b) <= max(atol, rtol * max(abs(a), abs(b)))
    return a == b


def _json(value):
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value


def _same_cell(x, y, rtol: float, atol: float) -> bool:
    if isinstance(x, (list, np.ndarray)) or isinstance(y, (list, np.ndarray)):
        return _close(x, y, rtol, atol)
    return x == y or (x != x and y != y) or _close(_json(x), _json(y), rtol, atol)


def compare_column(left: pd.Series, right: pd.Series, rtol: float, atol: float) -> tuple[int, float | str]:
    """(differing rows, largest relative difference or an example) of one column."""
    if pd.api.types.is_numeric_dtype(left) and pd.api.types.is_numeric_dtype(right) \
            and not pd.api.types.is_bool_dtype(left):
        a, b = left.to_numpy(np.float64), right.to_numpy(np.float64)
        both_nan = np.isnan(a) & np.isnan(b)
        scale = np.maximum(np.abs(a), np.abs(b))
        bad = ~both_nan & ~(np.abs(a - b) <= np.maximum(atol, rtol * scale))
        if not bad.any():
            return 0, 0.0
        relative = np.abs(a - b)[bad] / np.where(scale[bad] > 0, scale[bad], 1.0)
        return int(bad.sum()), float(np.nanmax(relative)) if np.isfinite(relative).any() else float("nan")
    bad = [i for i, (x, y) in enumerate(zip(left.tolist(), right.tolist())) if not _same_cell(x, y, rtol, atol)]
    return len(bad), (f"row {bad[0]}: {str(left.iloc[bad[0]])[:120]!r} != {str(right.iloc[bad[0]])[:120]!r}"
                      if bad else "")


def compare_tables(before: Path, after: Path, rtol: float, atol: float) -> list[str]:
    problems = []
    left, right = pd.read_parquet(before), pd.read_parquet(after)
    if set(left.columns) != set(right.columns):
        problems.append(f"columns differ: only before {sorted(set(left.columns) - set(right.columns))}, "
                        f"only after {sorted(set(right.columns) - set(left.columns))}")
    if len(left) != len(right):
        return problems + [f"{len(left)} rows before, {len(right)} after"]
    for column in [c for c in left.columns if c in right.columns and not timing(c)]:
        count, worst = compare_column(left[column].reset_index(drop=True), right[column].reset_index(drop=True),
                                      rtol, atol)
        if count:
            problems.append(f"{column}: {count} of {len(left)} rows differ (worst: {worst})")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rtol", type=float, default=1e-9)
    parser.add_argument("--atol", type=float, default=1e-12)
    args = parser.parse_args(argv)
    tables = sorted({p.relative_to(args.before) for p in args.before.rglob("*.parquet")}
                    | {p.relative_to(args.after) for p in args.after.rglob("*.parquet")})
    differing = 0
    for name in tables:
        a, b = args.before / name, args.after / name
        if not a.exists() or not b.exists():
            print(f"{name}: only {'after' if b.exists() else 'before'}")
            differing += 1
            continue
        problems = compare_tables(a, b, args.rtol, args.atol)
        if problems:
            differing += 1
            print(f"{name}: " + "; ".join(problems))
    print(f"{len(tables)} tables, {differing} differ (rtol {args.rtol:g}, atol {args.atol:g}; "
          f"left out: columns and JSON keys naming seconds, {', '.join(sorted(TIMING))})")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
