"""Does reprsim.compare give the workflow's numbers? One pair job's table against the Python API on the same rows.

    python benchmarks/api_equals_workflow.py RUN [--config config/config.yaml] [--dataset sst2]
        [--models minilm minilm-ft-s1] [--representation mean]

Reads the two models' activation stores of a finished run (RUN: the folder holding its results/), takes the rows of
similarity.split, calls reprsim.compare with the run's measures, permutations, resamples, confidence and seed,
and compares every column of the result with the pair job's table (results/pairs/...), numbers within 1e-9
relative (benchmarks/same_results.py's rule; meta key by key). Prints each column's largest difference and exits
1 when anything differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from same_results import compare_column  # noqa: E402

ARRAYS_CARRY_NONE = ("dataset", "representation", "split")
KEY = ["measure", "direction", "layer_a", "layer_b"]


def api_and_workflow(run: Path, config: dict, dataset: str, models: tuple[str, str],
                     representation: str = "mean") -> tuple[pd.DataFrame, pd.DataFrame, float]:
    """(reprsim.compare's table, the pair job's table, the API's seconds), rows in the pair table's order."""
    import reprsim
    from reprsim.io.store import open_store, pooled_rows
    from reprsim.workflow.measures import pair_measures
    from reprsim.stages.report.on_demand import pair_rows
    from reprsim.workflow.paths import PAIR_TABLE, STORE

    similarity = config["similarity"]
    if similarity["chance"]["seed"] != similarity["intervals"]["seed"]:
        raise SystemExit("reprsim.compare's seed seeds both the null and the intervals; this run's differ")
    a, b = sorted(models)
    rows = [pooled_rows(open_store(run / STORE.format(dataset=dataset, model=name)), representation,
                        similarity["split"]) for name in (a, b)]
    started = time.perf_counter()
    ours = reprsim.compare(*rows, pair_measures(config, representation),
                           permutations=similarity["chance"]["permutations"],
                           resamples=similarity["intervals"]["resamples"],
                           confidence=similarity["intervals"]["confidence"], seed=similarity["chance"]["seed"],
                           names=(a, b))
    seconds = time.perf_counter() - started
    # the pair's rows in whichever pair job's table holds them (a pair of blocks: reprsim.workflow.pair_blocks)
    directory = Path(PAIR_TABLE.format(representation=representation, dataset=dataset, block_a="x", block_b="y")).parent
    theirs = pair_rows(run / directory, a, b)
    # in the pair table's row order, the API's column order
    ours = theirs[KEY].merge(ours, on=KEY, how="left", validate="one_to_one")[list(ours.columns)]
    return ours, theirs, seconds


def differences(ours: pd.DataFrame, theirs: pd.DataFrame, rtol: float = 1e-9, atol: float = 1e-12) -> dict:
    """Per compared column: (rows that differ, worst relative difference or an example); and the largest absolute
    difference of each interval and null column."""
    columns = [c for c in theirs.columns if c not in ARRAYS_CARRY_NONE]
    out = {column: compare_column(ours[column], theirs[column], rtol, atol) for column in columns}
    largest = {column: float(np.nanmax(np.abs(ours[column].to_numpy(float) - theirs[column].to_numpy(float))))
               for column in ("value", "null_mean", "null_std", "null_p", "ci_low", "ci_high")}
    return {"columns": out, "largest_absolute": largest, "rows": len(theirs),
            "same_columns": list(ours.columns) == list(theirs.columns)}


def main(argv: list[str] | None = None) -> int:
    import yaml

    from reprsim.config import validate_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--dataset", default="sst2")
    parser.add_argument("--models", nargs=2, default=["minilm", "minilm-ft-s1"])
    parser.add_argument("--representation", default="mean")
    args = parser.parse_args(argv)
    config = validate_config(yaml.safe_load(args.config.read_text()), model_configs=False)
    ours, theirs, seconds = api_and_workflow(args.run, config, args.dataset, tuple(args.models),
                                             args.representation)
    found = differences(ours, theirs)
    print(f"{' vs '.join(sorted(args.models))} on {args.dataset} ({args.representation}, "
          f"{config['similarity']['split']}): {found['rows']} rows, {len(theirs.measure.unique())} measures; "
          f"reprsim.compare took {seconds:.1f} s")
    print("largest absolute differences: " + ", ".join(f"{k} {v:.1e}" for k, v in found["largest_absolute"].items()))
    differing = {column: result for column, result in found["columns"].items() if result[0]}
    for column, (count, worst) in differing.items():
        print(f"  {column}: {count} row(s) differ (worst: {worst})")
    print("every column equal (1e-9 relative)" if not differing and found["same_columns"] else "DIFFERENT")
    return 0 if not differing and found["same_columns"] else 1


if __name__ == "__main__":
    sys.exit(main())
