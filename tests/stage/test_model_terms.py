"""Per-model terms (rule model_terms): a pair job that reads both models' terms stores writes the table it
writes when it prepares everything itself; a store resting on other rows or half-samples is not used (and the
job says so); Grams too large to store are rebuilt from the rows; a damaged store names itself."""

import numpy as np
import pandas as pd
import pytest

from reprsim.io.integrity import CorruptOutputError
from reprsim.stages.compare import terms as terms_module
from reprsim.stages.compare.pairs import compare_pair
from reprsim.stages.compare.terms import families, model_terms
from test_compare_device import CHANCE, INTERVALS, MEASURES, NUMBERS, stores  # noqa: F401

SHARED = {label: spec for label, spec in MEASURES.items() if label != "procrustes"}


def pair(stores, terms=(None, None), intervals=INTERVALS, **options):  # noqa: F811
    return compare_pair(stores["a"], stores["b"], representation="mean", split="test", measures=SHARED,
                        chance=CHANCE, intervals=intervals, terms=terms, **options)


def terms_of(stores, tmp_path, intervals=INTERVALS, measures=SHARED):  # noqa: F811
    paths = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.zarr"
        model_terms(stores[name], path, representation="mean", split="test", measures=measures, intervals=intervals)
        paths.append(path)
    return tuple(paths)


def assert_same_tables(left, right):
    left, right = left[0], right[0]
    assert list(left["measure"]) == list(right["measure"]) and list(left["meta"]) == list(right["meta"])
    np.testing.assert_allclose(left[NUMBERS].to_numpy(float), right[NUMBERS].to_numpy(float), rtol=1e-12, atol=0)


def test_every_shared_family_is_prepared_once_per_model():
    assert families(SHARED) == ["basis-0.99-4", "basis-None-4", "gram-linear", "gram-rbf-1.0", "neighbours-5"]


def test_a_pair_job_reading_terms_stores_writes_the_table_it_computes_alone(stores, tmp_path, capsys):  # noqa: F811
    alone = pair(stores)
    capsys.readouterr()
    read = pair(stores, terms_of(stores, tmp_path))
    assert "prepared here" not in capsys.readouterr().out
    assert_same_tables(alone, read)
    pd.testing.assert_frame_equal(alone[1], read[1], check_exact=False, rtol=1e-12)


def test_a_store_on_other_half_samples_is_not_used(stores, tmp_path, capsys):  # noqa: F811
    other = terms_of(stores, tmp_path, {**INTERVALS, "seed": 1})
    capsys.readouterr()
    assert_same_tables(pair(stores), pair(stores, other))
    assert "rests on other half-samples; its terms are prepared here" in capsys.readouterr().out


def test_grams_too_large_to_store_are_rebuilt_from_the_rows(stores, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(terms_module, "GRAM_STORE_BYTES", 0)
    paths = terms_of(stores, tmp_path)
    arrays, _ = terms_module.read_terms(paths[0])
    assert "gram-linear/kc" not in arrays and "gram-linear/rep_rows" in arrays
    assert_same_tables(pair(stores), pair(stores, paths))


def test_a_damaged_terms_store_names_its_file(stores, tmp_path):  # noqa: F811
    paths = terms_of(stores, tmp_path)
    chunk = next(p for p in sorted((paths[0] / "gram-linear" / "kc").rglob("*")) if p.is_file() and p.name != "zarr.json")
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    with pytest.raises(CorruptOutputError, match="gram-linear/kc"):
        pair(stores, paths)


def test_a_measure_drawing_fewer_half_samples_than_the_store_holds_uses_the_first_ones(stores, tmp_path):  # noqa: F811
    """A store holds the half-samples of the job's measure with the most (8 here); one with 5 takes the first 5,
    which are the same draws."""
    fewer = {label: {**spec, "resamples": 5} for label, spec in SHARED.items() if label in ("linear_cka", "mutual_knn")}
    paths = terms_of(stores, tmp_path, measures=fewer)
    alone = compare_pair(stores["a"], stores["b"], representation="mean", split="test", measures=fewer,
                         chance=CHANCE, intervals=INTERVALS)
    read = compare_pair(stores["a"], stores["b"], representation="mean", split="test", measures=fewer,
                        chance=CHANCE, intervals=INTERVALS, terms=paths)
    assert_same_tables(alone, read)
    assert set(read[0]["n_resamples"]) == {5}
