"""Writing outputs atomically: a reader (or Snakemake) never sees a half-written file or directory."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator


def write_text(path: str | Path, text: str) -> None:
    """Write a text file atomically: a temporary sibling, renamed into place when complete."""
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
    tmp = out_dir.with_name(out_dir.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp, out_dir)
