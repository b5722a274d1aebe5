"""How long Snakemake takes to plan the workflow as the number of models grows.

For N = 32, 64, 128, 256 models of the default configuration's shape (config/config.yaml with more random
4-layer BERT seeds, as its bert-small-s0 and -s1; every pair compared at mean and word level as configured), it
counts the jobs, times a dry run (`snakemake -n`, a fresh process, as a user runs it) and asks `reprsim plan` for
the DAG's build time and the SLURM submissions; then the same for config/examples/multiberts.yaml. Where a SLURM
client is installed, the seconds `scontrol show config` takes are printed too: the SLURM executor plugin calls it
whenever Snakemake starts, and where no controller answers it waits about 9 s (a login node answers at once).

    .venv/bin/python benchmarks/dag_scale.py [--models 32 64 128 256] [--write]

--write keeps the rows in docs/recorded-run/dag-scale.json, which docs/planning.md quotes
(reprsim.guide.recorded_scale).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "src"))
from reprsim.config import load_yaml, validate_config  # noqa: E402
from reprsim.guide import recorded_scale  # noqa: E402
from reprsim.workflow import pair_blocks  # noqa: E402

EXAMPLE = REPO / "config" / "examples" / "multiberts.yaml"


def config_with(n_models: int) -> dict:
    """The default configuration with random BERT seeds added until it has `n_models` models."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    template = config["models"]["bert-small-s0"]
    seed = 2
    while len(config["models"]) < n_models:
        config["models"][f"bert-small-s{seed}"] = {**template, "seed": seed}
        seed += 1
    return config


def dry_run(config: Path, workdir: Path) -> tuple[float, dict[str, int]]:
    started = time.perf_counter()
    result = subprocess.run([str(BIN / "snakemake"), "-n", "--quiet", "rules", "--configfile", str(config),
                             "--directory", str(workdir), "--snakefile", str(REPO / "Snakefile")],
                            capture_output=True, text=True, check=True, cwd=REPO)
    seconds = time.perf_counter() - started
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", result.stdout, re.M)}
    return seconds, counts


def plan(config: Path, workdir: Path) -> tuple[float, int]:
    """(the DAG's build time, the SLURM submissions) as `reprsim plan` prints them."""
    workdir.mkdir(parents=True, exist_ok=True)
    printed = subprocess.run([str(BIN / "reprsim"), "plan", str(config), "--directory", str(workdir)],
                             capture_output=True, text=True, check=True, cwd=REPO).stdout
    built = float(re.search(r"DAG built in ([0-9.]+) s", printed).group(1))
    submissions = int(re.search(r"cluster submissions with profiles/slurm: ([0-9,]+)", printed).group(1)
                      .replace(",", ""))
    return built, submissions


def scontrol_seconds() -> float | None:
    if shutil.which("scontrol") is None:
        return None
    started = time.perf_counter()
    subprocess.run(["scontrol", "show", "config"], capture_output=True, timeout=60)
    return round(time.perf_counter() - started, 2)


def measure(config_path: Path, scratch: Path, n_models: int, block_setting) -> dict:
    seconds, counts = dry_run(config_path, scratch / "dry")
    built, submissions = plan(config_path, scratch / "plan")
    return {"models": n_models, "block_size": pair_blocks.block_size(block_setting, n_models),
            "pair_jobs": counts.get("compare_pair", 0), "jobs": counts.get("total", 0),
            "dry_run_s": round(seconds, 2), "dag_s": built, "submissions": submissions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--write", action="store_true", help=f"keep the rows in {recorded_scale.RECORD}")
    args = parser.parse_args()
    record = {"scontrol_s": scontrol_seconds(), "scaling": [], "multiberts": None}
    print(f"scontrol show config: {record['scontrol_s']} s (in every Snakemake start-up below)", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        for n in args.models:
            config = config_with(n)
            path = scratch / f"models{n}.yaml"
            path.write_text(yaml.safe_dump(config, sort_keys=False))
            record["scaling"].append(measure(path, scratch / f"run{n}", n, config["similarity"].get("block_size")))
            print(record["scaling"][-1], flush=True)
        example = validate_config(load_yaml(EXAMPLE))  # the models as the workflow sees them (seeds expanded)
        row = measure(EXAMPLE, scratch / "multiberts", len(example["models"]), example["similarity"]["block_size"])
        record["multiberts"] = {**row, "name": "MultiBERTs example"}
        print(record["multiberts"], flush=True)
    print("\n" + recorded_scale.table(record))
    if args.write:
        recorded_scale.RECORD.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
