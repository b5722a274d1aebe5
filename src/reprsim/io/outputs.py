"""Writing outputs atomically: a reader (or Snakemake) never sees a half-written file or directory."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def temporary_sibling(path: Path) -> Path:
    """Where `path` is written before it is renamed into place, after removing the temporaries a
    killed writer left (a job killed by SIGKILL cannot clean up; Snakemake runs one job per output,
    so no live writer owns them)."""
    for stale in path.parent.glob(glob.escape(path.name) + ".tmp-*"):
        shutil.rmtree(stale) if stale.is_dir() and not stale.is_symlink() else stale.unlink(missing_ok=True)
    return path.with_name(path.name + f".tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling of `path` to write; it replaces `path` when the block completes
    and is removed when it raises (or is interrupted), so `path` is either complete or absent."""
    path = Path(path)
    tmp = temporary_sibling(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> None:
    """Write a text file atomically: a temporary sibling, renamed into place when complete."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_parquet(path: str | Path, table) -> None:
    """Write a pandas table to Parquet atomically (temporary file + rename), with page checksums
    that reprsim.io.tables.read_table verifies: a flipped byte fails instead of reading wrong."""
    with atomic_file(path) as tmp:
        table.to_parquet(tmp, index=False, write_page_checksum=True)


def write_json(path: str | Path, payload: Any) -> None:
    """Write JSON atomically (temporary file + rename), keys sorted for stable diffs."""
    write_text(path, json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")


@contextlib.contextmanager
def atomic_directory(out_dir: str | Path) -> Iterator[Path]:
    """Yield an empty temporary sibling of `out_dir` to fill.

    When the block completes it replaces `out_dir`; when it raises (or is interrupted)
    the temporary is removed, so `out_dir` is either complete or absent.
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(out_dir)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp, out_dir)
