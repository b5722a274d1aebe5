"""How long Snakemake takes to plan the workflow as the number of models grows.

For N = 8, 16, 32, 64 hub models (the MultiBERTs' ids; nothing is downloaded) on one dataset, with the
schema's default measures and aligners on every pair, it times a dry run (`snakemake -n`, a fresh
process, as a user runs it) and counts the jobs; then `reprsim plan` on config/examples/multiberts.yaml.

    .venv/bin/python benchmarks/dag_scale.py [--models 8 16 32 64] [--out dag_scale.json]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def config_with(n_models: int) -> dict:
    return {
        "datasets": {"sst2": {"source": "hf", "id": "nyu-mll/glue", "config": "sst2",
                              "columns": {"text": "sentence", "label": "label"}}},
        "models": {f"bert-{i:02d}": {"source": "hf", "id": f"google/multiberts-seed_{i}"} for i in range(n_models)},
    }


def dry_run(config: Path, workdir: Path) -> tuple[float, dict[str, int]]:
    started = time.perf_counter()
    result = subprocess.run([str(BIN / "snakemake"), "-n", "--quiet", "rules", "--configfile", str(config),
                             "--directory", str(workdir), "--snakefile", str(REPO / "Snakefile")],
                            capture_output=True, text=True, check=True, cwd=REPO)
    seconds = time.perf_counter() - started
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", result.stdout, re.M)}
    return seconds, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        print(f"{'models':>7}{'pair jobs':>11}{'all jobs':>10}{'dry run (s)':>13}")
        for n in args.models:
            config = scratch / f"models{n}.yaml"
            config.write_text(yaml.safe_dump(config_with(n)))
            seconds, counts = dry_run(config, scratch / f"run{n}")
            rows.append({"models": n, "pair_jobs": counts.get("compare_pair", 0), "jobs": counts.get("total", 0),
                         "dry_run_s": round(seconds, 2)})
            print(f"{n:>7}{rows[-1]['pair_jobs']:>11,}{rows[-1]['jobs']:>10,}{seconds:>13.1f}", flush=True)
        example = REPO / "config" / "examples" / "multiberts.yaml"
        plan = None
        if example.exists():
            seconds, counts = dry_run(example, scratch / "multiberts-dry")
            started = time.perf_counter()
            subprocess.run([str(BIN / "reprsim"), "plan", str(example), "--directory", str(scratch / "multiberts")],
                           capture_output=True, text=True, check=True, cwd=REPO)
            plan = {"pair_jobs": counts.get("compare_pair", 0), "jobs": counts.get("total", 0),
                    "dry_run_s": round(seconds, 2), "plan_s": round(time.perf_counter() - started, 2)}
            print(f"\nconfig/examples/multiberts.yaml: {plan['pair_jobs']} pair jobs, {plan['jobs']:,} jobs; "
                  f"dry run {plan['dry_run_s']:.1f} s, reprsim plan {plan['plan_s']:.1f} s")
    if args.out:
        args.out.write_text(json.dumps({"scaling": rows, "multiberts": plan}, indent=2))


if __name__ == "__main__":
    main()
