"""Provenance: content hashes of outputs and the versions of the libraries that made them."""

from __future__ import annotations

import hashlib
import platform
from importlib import metadata
from pathlib import Path

# Snakemake drops this marker into every directory output after the job: not part of the content
SNAKEMAKE_MARKER = ".snakemake_timestamp"


def _update(digest, path: Path) -> None:
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)


def _content(directory: Path, skip: tuple[str, ...]) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name not in (*skip, SNAKEMAKE_MARKER))


# what a fine-tuned model's content_hash leaves out: its meta and its training log, which times things
FINETUNE_UNHASHED = ("meta.json", "training_log.csv")


def hash_directory(directory: str | Path, skip: tuple[str, ...] = ("meta.json",)) -> str:
    """sha256 over the names and bytes of every file under `directory` (sorted)."""
    directory = Path(directory)
    digest = hashlib.sha256()
    for path in _content(directory, skip):
        digest.update(str(path.relative_to(directory)).encode())
        _update(digest, path)
    return digest.hexdigest()


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    _update(digest, Path(path))
    return digest.hexdigest()


def file_checksums(directory: str | Path, skip: tuple[str, ...] = ("meta.json",)) -> dict[str, str]:
    """sha256 of every file under `directory` by relative name, so a verification can name the damaged file."""
    directory = Path(directory)
    return {str(p.relative_to(directory)): file_sha256(p) for p in _content(directory, skip)}


def versions() -> dict[str, str]:
    """Versions of the libraries whose behaviour shapes the numbers."""
    found = {"python": platform.python_version()}
    for package in ("reprsim", "torch", "transformers", "numpy", "zarr", "datasets"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found
