"""Provenance helpers: JSON metadata files, content hashes, library versions."""

from __future__ import annotations

import hashlib
import json
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any


def write_json(path: str | Path, payload: Any) -> None:
    """Write JSON atomically (temporary file + rename), keys sorted for stable diffs."""
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    with open(tmp, "w") as handle:
        json.dump(payload, handle, indent=2, sort_keys=True, default=str)
        handle.write("\n")
    os.replace(tmp, path)


def hash_directory(directory: str | Path, skip: tuple[str, ...] = ("meta.json",)) -> str:
    """sha256 over the names and bytes of every file under `directory` (sorted)."""
    directory = Path(directory)
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name not in skip):
        digest.update(str(path.relative_to(directory)).encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def versions() -> dict[str, str]:
    """Versions of the libraries whose behaviour shapes the numbers."""
    found = {"python": platform.python_version()}
    for package in ("reprsim", "torch", "transformers", "numpy", "zarr", "datasets"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found
