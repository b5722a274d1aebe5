"""Reading prepared datasets (the data stage's `{split}.parquet` tables and any output's meta.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd


def load_split(dataset_dir: str | Path, split: str) -> pd.DataFrame:
    path = Path(dataset_dir) / f"{split}.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"prepared split {path} is missing; rerun the dataset rule")
    return pd.read_parquet(path)


def read_meta(directory: str | Path) -> dict:
    with open(Path(directory) / "meta.json") as handle:
        return json.load(handle)
