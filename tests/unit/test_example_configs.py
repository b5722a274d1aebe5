"""The example configurations (config/examples/*.yaml, issue 17): each one is valid and its whole DAG builds
(snakemake -n), so an example that needs the hub or a GPU cannot rot unnoticed where neither is at hand. A new
example is covered by the glob. The paper studies get checks of their own: the 25 MultiBERTs and their 300+
pair jobs, the Pythia suite's ids and revisions, and the McCoy checkpoints' names and token pairs.

One dry run per example, two at a time, for the whole module (about 40 s of CPU in all)."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations, combinations_with_replacement
from pathlib import Path

import pytest
from conftest import REPO, example_data_root, planned_jobs

from reprsim.config import ConfigError, SampleSizeWarning, StudyDimensionWarning, load_yaml, validate_config
from reprsim.workflow import pair_blocks

EXAMPLES_DIR = REPO / "config" / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.yaml"))
def dag_cases():
    return [pytest.param(path, id=path.stem) for path in EXAMPLES]


def validated(path: Path) -> dict:
    """The example validated as `reprsim validate` does, with the sample-size and the study-dimension checks
    silent: an example's measures must suit its own rows, and treat its study's widths alike."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", SampleSizeWarning)
        warnings.simplefilter("error", StudyDimensionWarning)
        return validate_config(load_yaml(path))


def data_root_override(path: Path) -> list[str]:
    """An example's relative data_root is meant from the repository root (where the guide runs it); the dry
    run works in a temporary directory, so it gets the same directory as an absolute path."""
    root = load_yaml(path).get("data_root")
    if root is None or Path(root).is_absolute():
        return []
    return ["--config", f"data_root={example_data_root(root).resolve()}"]


def missing_local_files(path: Path) -> list[Path]:
    """Files of the example's local datasets that are not on this machine (a dry run needs them as inputs)."""
    config = validated(path)
    missing = []
    for spec in config["datasets"].values():
        if spec["source"] == "local":
            root = example_data_root(str(spec["data_root"]))
            missing += [root / name for name in spec["files"].values() if not (root / name).is_file()]
    return missing


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """example path -> (return code, output) of `snakemake -n --quiet rules` on it, from the repository root
    into a fresh working directory; all examples run once, up front, two at a time (a DAG build uses one
    core), and an example whose local data is not on this machine is skipped."""
    runs = {}
    for path in EXAMPLES:
        try:
            missing = missing_local_files(path)
        except ConfigError:  # test_the_example_is_valid says why; the dry run shows Snakemake's refusal
            missing = []
        if missing:
            runs[path] = f"{path.name}: local data not on this machine ({missing[0]})"
            continue
        runs[path] = [sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--configfile", str(path),
                      "--directory", str(tmp_path_factory.mktemp(path.stem)), "--cores", "2",
                      *data_root_override(path)]

    def run(command: list[str]) -> tuple[int, str]:
        result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=600)
        return result.returncode, result.stdout + result.stderr

    commands = {path: command for path, command in runs.items() if isinstance(command, list)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs.update(zip(commands, pool.map(run, commands.values())))

    def outcome(path: Path) -> tuple[int, str]:
        if isinstance(runs[path], str):
            pytest.skip(runs[path])
        return runs[path]

    return outcome


def test_the_examples_include_the_paper_studies():
    names = {path.stem for path in EXAMPLES}
    assert {"multiberts", "pythia", "mccoy-hans", "wu-glue", "phang-glue"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_the_example_is_valid(path):
    config = validated(path)
    assert config["models"] and config["datasets"]


@pytest.mark.parametrize("path", dag_cases())
def test_the_example_dag_builds(path, dry_run):
    code, output = dry_run(path)
    assert code == 0, f"snakemake -n failed on {path.name}:\n{output[-4000:]}"
    jobs = planned_jobs(output)
    assert jobs.get("report") == 1 and jobs.get("compare_pair", 0) >= 1, jobs


def hub_models(config: dict) -> dict[str, dict]:
    return {name: spec for name, spec in config["models"].items() if spec["source"] == "hf"}


def test_multiberts_compares_all_25_seeds(dry_run):
    path = EXAMPLES_DIR / "multiberts.yaml"
    config = validated(path)
    ids = {spec["id"] for spec in hub_models(config).values()}
    assert ids == {f"google/multiberts-seed_{seed}" for seed in range(25)}
    code, output = dry_run(path)
    assert code == 0, output[-4000:]
    jobs = planned_jobs(output)
    assert jobs["materialize_model"] == 25
    # every pair of models (the 300 distinct pairs of MultiBERTs among them, and each with itself) computed once, in
    # blocks of 8 models (similarity.block_size auto, over 16 models): a pair job per pair of blocks
    models = list(config["models"])
    size = pair_blocks.block_size(config["similarity"]["block_size"], len(models))
    blocked = pair_blocks.PairBlocks(pair_blocks.blocks(models, size), combinations_with_replacement(sorted(models), 2))
    assert size == 8 and sum(map(len, blocked.pairs.values())) == len(models) * (len(models) + 1) // 2 >= 325
    assert jobs["compare_pair"] >= len(blocked.pairs) * len(config["extraction"]["datasets"])
    assert "pair_heatmap" not in jobs  # drawn on demand (reprsim heatmap): figure jobs do not grow like the pairs
    aligned = len(config["align"]["pairs"]) * len(config["extraction"]["datasets"])
    assert 5 <= len(config["align"]["pairs"]) <= 10 and jobs["align_layers"] == aligned
    assert config["align"]["layers"] == "all" and "word" in config["similarity"]["representations"]


def test_pythia_names_the_deduped_suite_and_its_revisions():
    config = validated(EXAMPLES_DIR / "pythia.yaml")
    models = hub_models(config)
    sizes = ["70m", "160m", "410m", "1b", "1.4b", "2.8b"]
    assert {spec["id"] for spec in models.values()} == {f"EleutherAI/pythia-{size}-deduped" for size in sizes}
    assert all(spec["revision"] for spec in models.values())
    pairs = {tuple(sorted(pair)) for pair in config["similarity"]["tokens"]["pairs"]}
    assert pairs == set(combinations(sorted(models), 2)) | {(name, name) for name in models}


def test_mccoy_checkpoints_are_named_by_their_group_and_index(dry_run):
    """Each model is {gen|heur}-feather-N for connectivity/feather_berts_N (N in 0..99), ten of each group, and
    the token-level CKA covers every pair of them, on both datasets."""
    path = EXAMPLES_DIR / "mccoy-hans.yaml"
    config = validated(path)
    models = hub_models(config)
    assert len(models) == len(config["models"]) == 20
    groups = {"gen": set(), "heur": set()}
    for name, spec in models.items():
        match = re.fullmatch(r"(gen|heur)-feather-(\d+)", name)
        assert match, name
        index = int(match.group(2))
        assert 0 <= index <= 99 and spec["id"] == f"connectivity/feather_berts_{index}", (name, spec["id"])
        groups[match.group(1)].add(index)
    assert len(groups["gen"]) == len(groups["heur"]) == 10 and not groups["gen"] & groups["heur"]
    pairs = {tuple(sorted(pair)) for pair in config["similarity"]["tokens"]["pairs"]}
    assert pairs == set(combinations(sorted(models), 2))
    assert set(config["datasets"]) == {"mnli", "hans"}
    code, output = dry_run(path)
    assert code == 0, output[-4000:]
    assert planned_jobs(output)["token_cka"] == len(pairs) * len(config["extraction"]["datasets"])


def test_all_measures_example_runs_every_registered_measure():
    """config/examples/all-measures.yaml is the registry's end-to-end run: every measure in it, on five pairs."""
    from reprsim.measure_registry import MEASURES

    config = validated(EXAMPLES_DIR / "all-measures.yaml")
    assert {spec["measure"] for spec in config["measures"].values()} == set(MEASURES)
    assert len(config["similarity"]["pairs"]) == 5


def test_the_universality_hub_twin_plans_the_offline_studys_structure(dry_run):
    """The hub twin (MultiBERTs) is the offline study at scale: its measures and artefact controls, a dimension
    placebo, the shared probe's competence (its dataset is labelled), every factor but training data, which no public
    family varies alone (its header says so); the functional sense only offline, where the workflow pretrained the
    references (a hub MLM has no next-token loss to stitch under)."""
    offline, hub = (validated(EXAMPLES_DIR / name) for name in ("universality.yaml", "universality-hub.yaml"))
    # every offline measure and control, and Procrustes, which the offline example dropped to fit the hour
    assert hub["measures"] == {**offline["measures"], "procrustes": hub["measures"]["procrustes"]}
    assert offline["universality"]["dimension_placebo"] and hub["universality"]["dimension_placebo"]
    assert set(hub["universality"]["factors"]) == set(offline["universality"]["factors"]) - {"data"}
    assert "Data at scale: no public family" in (EXAMPLES_DIR / "universality-hub.yaml").read_text()
    assert offline["universality"]["function"] is not None and hub["universality"]["function"] is None
    code, output = dry_run(EXAMPLES_DIR / "universality-hub.yaml")
    assert code == 0, output[-4000:]
    jobs = planned_jobs(output)
    assert jobs["competence_probe"] == len({m for levels in hub["universality"]["factors"].values()
                                            for models in levels.values() for m in models}
                                           | set(hub["universality"]["reference"]) | set(hub["universality"]["floor"]))
    assert jobs["dimension_placebo"] == 2  # the miniatures' widths, 512 and 256
    assert "function_stitch" not in jobs
