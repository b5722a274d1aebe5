"""Reading the workflow's Parquet tables: a truncated or damaged file fails with CorruptOutputError."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa

from reprsim.io.integrity import CorruptOutputError


def read_table(path: str | Path, output: str | Path | None = None) -> pd.DataFrame:
    """The Parquet table at `path`.

    `output` is the workflow output that holds it when that is not the file itself (a dataset
    directory's split). A missing file stays a FileNotFoundError; one that does not read is corrupt.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"table {path} does not exist")
    try:
        # pages written with checksums (write_page_checksum=True) are verified as they decode, at no extra read
        return pd.read_parquet(path, page_checksum_verification=True)
    except (pa.ArrowException, OSError, ValueError) as error:
        raise CorruptOutputError(path, f"not a readable Parquet file ({type(error).__name__}: {error})",
                                 output) from error


def read_tables(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Several tables of one layout stacked (the pair tables, their replicates, ...)."""
    return pd.concat([read_table(path) for path in paths], ignore_index=True)
