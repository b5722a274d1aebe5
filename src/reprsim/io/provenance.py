"""Provenance: content hashes of outputs and the versions of the libraries that made them."""

from __future__ import annotations

import hashlib
import platform
from importlib import metadata
from pathlib import Path


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
