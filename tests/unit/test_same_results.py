"""benchmarks/same_results.py, the check that a change to the code changed no number: it passes float noise
and timing columns, and names every other difference."""

import importlib.util
import json

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

spec = importlib.util.spec_from_file_location("same_results", REPO / "benchmarks" / "same_results.py")
same_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(same_results)


def table(value: float, seconds: float, meta: dict) -> pd.DataFrame:
    return pd.DataFrame({"layer_a": [0, 1], "value": [value, 0.25], "fit_seconds": [seconds, seconds],
                         "meta": [json.dumps(meta)] * 2, "spans": [np.array([1, 2]), np.array([3])]})


@pytest.fixture
def folders(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    for folder in (before, after):
        (folder / "tables").mkdir(parents=True)
    table(0.5, 1.0, {"ridge": 0.1, "train_seconds": 3.0}).to_parquet(before / "tables" / "t.parquet")
    return before, after


def test_float_noise_and_timings_pass(folders, capsys):
    before, after = folders
    table(0.5 * (1 + 1e-12), 9.0, {"ridge": 0.1, "train_seconds": 7.0}).to_parquet(after / "tables" / "t.parquet")
    assert same_results.main([str(before), str(after)]) == 0
    assert "1 tables, 0 differ" in capsys.readouterr().out


@pytest.mark.parametrize("value, meta, named", [
    (0.5 * (1 + 1e-6), {"ridge": 0.1}, "value: 1 of 2 rows differ"),
    (0.5, {"ridge": 0.2}, "meta: 2 of 2 rows differ"),
])
def test_a_changed_number_is_named(folders, capsys, value, meta, named):
    before, after = folders
    table(value, 1.0, meta).to_parquet(after / "tables" / "t.parquet")
    assert same_results.main([str(before), str(after)]) == 1
    assert named in capsys.readouterr().out


def test_a_missing_table_is_named(folders, capsys):
    before, after = folders
    assert same_results.main([str(before), str(after)]) == 1
    assert "tables/t.parquet: only before" in capsys.readouterr().out
