"""Reading prepared datasets (the data stage's `{split}.parquet` tables and any output's meta.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from reprsim.io.integrity import CorruptOutputError, remake_command
from reprsim.io.tables import read_table


def load_split(dataset_dir: str | Path, split: str) -> pd.DataFrame:
    path = Path(dataset_dir) / f"{split}.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"prepared split {path} is missing; remake the dataset: {remake_command(dataset_dir)}")
    return read_table(path, output=dataset_dir)


def read_meta(directory: str | Path) -> dict:
    """The meta.json of an output directory (dataset, model); unreadable JSON is a corrupt output."""
    path = Path(directory) / "meta.json"
    try:
        with open(path) as handle:
            return json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CorruptOutputError(path, f"not valid JSON ({error})", directory) from error
