"""The DAG's scale as the guide quotes it (docs/planning.md, "Scale of the DAG itself"): written by
``benchmarks/dag_scale.py --write`` to docs/recorded-run/dag-scale.json, rendered here, and checked against the page
by tests/unit/test_planning_page.py."""

from __future__ import annotations

import json
from pathlib import Path

from reprsim.guide.recorded_run import ROOT

RECORD = ROOT / "docs" / "recorded-run" / "dag-scale.json"


def load(path: Path = RECORD) -> dict:
    return json.loads(Path(path).read_text())


def table(record: dict) -> str:
    """The markdown table of the benchmark's rows: models, block size, pair jobs, jobs, SLURM submissions, the DAG's
    build time (reprsim plan) and the dry run's wall time with the start-up it includes."""
    lines = ["| models | block size | pair jobs | jobs | SLURM submissions | DAG built | `snakemake -n` |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for row in [*record["scaling"], record["multiberts"]]:
        name = row.get("name") or f"{row['models']}"
        lines.append(f"| {name} | {row['block_size']} | {row['pair_jobs']:,} | {row['jobs']:,} | "
                     f"{row['submissions']:,} | {row['dag_s']:.1f} s | {row['dry_run_s']:.1f} s |")
    return "\n".join(lines)
