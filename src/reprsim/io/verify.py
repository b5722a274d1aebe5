"""`reprsim verify`: every output of a results tree checked against its file contract and its recorded
checksums, and the temporaries interrupted writers left behind.

Datasets: meta.json, each split's table reads and has the recorded number of rows, and per-file
checksums when meta.json records them. Models: the model_files contract (config, safetensors weights
whose size matches their header, tokenizer), and the per-file checksums (or else the content_hash)
of meta.json. Stores (activations, and the per-model terms of rule model_terms): every array's sha256
(`reprsim.io.store.verify_store`). Tables: each reads.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from reprsim.io.datasets import read_meta
from reprsim.io.integrity import CorruptOutputError
from reprsim.io.model_files import model_problems
from reprsim.io.provenance import FINETUNE_UNHASHED, file_sha256, hash_directory
from reprsim.io.store import verify_store
from reprsim.io.tables import read_table
from reprsim.workflow import paths

# io.outputs writes `<name>.tmp-<pid>` and renames it into place when complete
TEMPORARY = re.compile(r"\.tmp-(\d+)$")


@dataclass
class Verification:
    problems: list[CorruptOutputError] = field(default_factory=list)
    temporaries: list[Path] = field(default_factory=list)
    checked: Counter = field(default_factory=Counter)


def _outputs(root: Path, template: str) -> list[Path]:
    """The outputs under `root` that `template` (a paths template) names."""
    pattern = re.sub(r"\{\w+\}", "*", template.removeprefix(paths.RESULTS + "/"))
    return sorted(p for p in root.glob(pattern) if not TEMPORARY.search(p.name))


def _checksum_problems(directory: Path, recorded: dict[str, str]) -> list[CorruptOutputError]:
    problems = []
    for name, digest in sorted(recorded.items()):
        path = directory / name
        if not path.is_file():
            problems.append(CorruptOutputError(path, "missing (meta.json records its checksum)", directory))
        elif file_sha256(path) != digest:
            problems.append(CorruptOutputError(path, "content differs from the sha256 meta.json records", directory))
    return problems


def _meta(directory: Path) -> tuple[dict | None, list[CorruptOutputError]]:
    if not (directory / "meta.json").is_file():
        return None, [CorruptOutputError(directory / "meta.json", "missing", directory)]
    try:
        return read_meta(directory), []
    except CorruptOutputError as error:
        return None, [error]


def check_dataset(directory: Path) -> list[CorruptOutputError]:
    meta, problems = _meta(directory)
    if meta is None:
        return problems
    for split, size in meta.get("sizes", {}).items():
        path = directory / f"{split}.parquet"
        try:
            rows = len(read_table(path, output=directory))
        except FileNotFoundError:
            problems.append(CorruptOutputError(path, "missing", directory))
            continue
        except CorruptOutputError as error:
            problems.append(error)
            continue
        if rows != size:
            problems.append(CorruptOutputError(path, f"{rows} rows where meta.json records {size}", directory))
    return problems + _checksum_problems(directory, meta.get("checksums", {}))


def check_model(directory: Path) -> list[CorruptOutputError]:
    problems = [CorruptOutputError(path, problem, directory) for path, problem in model_problems(directory)]
    meta, meta_problems = _meta(directory)
    if meta is None:
        return problems + meta_problems
    if "checksums" in meta:  # materialised models: the damaged file can be named (once)
        reported = {problem.path for problem in problems}
        return problems + [p for p in _checksum_problems(directory, meta["checksums"]) if p.path not in reported]
    if "content_hash" in meta and hash_directory(directory, skip=FINETUNE_UNHASHED) != meta["content_hash"]:
        problems.append(CorruptOutputError(directory, "content differs from meta.json content_hash (a file was "
                                           "damaged or changed since it was written)", directory))
    return problems


def check_table(path: Path) -> list[CorruptOutputError]:
    try:
        read_table(path)
    except CorruptOutputError as error:
        return [error]
    return []


def _temporaries(root: Path) -> list[Path]:
    found = []
    for directory, subdirectories, files in os.walk(root):
        for name in [*subdirectories, *files]:
            if TEMPORARY.search(name):
                found.append(Path(directory) / name)
        subdirectories[:] = [d for d in subdirectories if not TEMPORARY.search(d)]  # not inside a temporary
    return sorted(found)


def _for_the_workflow(error: CorruptOutputError, root: Path) -> CorruptOutputError:
    """The same problem, its remake command naming the output as the workflow does, and its rule."""
    relative = f"{paths.RESULTS}/{error.output.relative_to(root).as_posix()}"
    output, rule = paths.made_by(relative) or (relative, None)
    return CorruptOutputError(error.path, error.problem, output, rule)


def verify_results(root: str | Path = paths.RESULTS) -> Verification:
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"results directory {root} does not exist")
    found = Verification(temporaries=_temporaries(root))
    kinds = [("dataset", [paths.DATASET], check_dataset), ("model", [paths.MODEL], check_model),
             ("store", [paths.STORE, paths.MODEL_TERMS], verify_store),
             ("table", [t for t in paths.MADE_BY if t.endswith(".parquet")], check_table)]
    for kind, templates, check in kinds:
        for output in sorted({p for template in templates for p in _outputs(root, template)}):
            found.checked[kind] += 1
            found.problems += [_for_the_workflow(error, root) for error in check(output)]
    return found


def remove_temporaries(temporaries: list[Path]) -> tuple[list[Path], list[Path]]:
    """Delete leftover temporaries; one whose writer (the pid in its name) still runs here is kept.
    Returns (removed, kept). Run it when no workflow runs: a writer on another machine cannot be seen."""
    removed, kept = [], []
    for path in temporaries:
        if _running(int(TEMPORARY.search(path.name).group(1))):
            kept.append(path)
            continue
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
        removed.append(path)
    return removed, kept


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        pass
    return True
