"""A private copy of a reprsim checkout's workflow (the tests' runs, benchmarks/gpu_check.py's and
benchmarks/startup.py's): what Snakemake needs to run it from another directory, without results or caches."""

from __future__ import annotations

import shutil
from pathlib import Path

# the checkout's parts a run reads: the Snakefile and rules, the scripts and library they run, configs, conda
# environments and profiles
WORKFLOW_FILES = ("Snakefile", "rules", "scripts", "config", "envs", "src", "profiles")


def copy_workflow(checkout: Path, destination: Path) -> Path:
    """WORKFLOW_FILES of `checkout` copied into `destination` (made if missing), bytecode and build metadata left
    out; `destination`."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        source, target = checkout / name, destination / name
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, target)
    return destination
