"""Layer-similarity views of fine-tuned models and the block-structure summary (Phang et al. 2021, §3)."""

import numpy as np
import pytest

from reprsim.metrics.cka import linear_cka
from reprsim.stages.compare.pairs import compare_pair
from reprsim.stages.extract.activations import extract_activations
from reprsim.stages.finetune.layer_views import (
    block_structure,
    block_summary,
    layer_views,
    view_matrix,
)


def _two_blocks(size: int, split: int, within: float, between: float) -> np.ndarray:
    upper = np.arange(size) >= split
    matrix = np.where(upper[:, None] == upper[None, :], within, between)
    np.fill_diagonal(matrix, 1.0)
    return matrix


@pytest.mark.parametrize("split", [1, 3, 5])
def test_block_structure_finds_a_constructed_split(split):
    rng = np.random.default_rng(split)
    noise = rng.uniform(-0.03, 0.03, size=(7, 7))
    matrix = _two_blocks(7, split, within=0.8, between=0.3) + (noise + noise.T) / 2
    found = block_structure(matrix)
    assert found["split"] == split
    assert found["contrast"] == pytest.approx(0.5, abs=0.05)
    assert found["within"] - found["between"] == pytest.approx(found["contrast"])


def test_undefined_entries_are_left_out():
    matrix = _two_blocks(6, 3, within=0.9, between=0.2)
    matrix[0, :] = matrix[:, 0] = np.nan
    assert block_structure(matrix) == pytest.approx({"split": 3, "within": 0.9, "between": 0.2, "contrast": 0.7})


def test_block_structure_of_a_worked_example():
    """4 layers, split 2: within pairs (0,1),(2,3) twice each, between the 8 cross entries."""
    matrix = np.array([[1.0, 0.9, 0.2, 0.1],
                       [0.9, 1.0, 0.3, 0.2],
                       [0.2, 0.3, 1.0, 0.7],
                       [0.1, 0.2, 0.7, 1.0]])
    found = block_structure(matrix)
    assert found == pytest.approx({"split": 2, "within": 0.8, "between": 0.2, "contrast": 0.6})
    with pytest.raises(ValueError, match="at least 3 layers"):
        block_structure(np.eye(2))


def _views(stores, tmp_path, model="ft", base="base", siblings=("other",)):
    """The views' CLS-token pair tables, computed by the compare stage's pair job, then the views."""
    from reprsim.io.outputs import write_parquet

    measures = {"linear_cka": {"measure": "cka", "params": {"kernel": "linear", "estimator": "biased"}}}
    names = sorted({base, model, *siblings})
    tables, replicates = [], []
    for i, a in enumerate(names):
        for b in names[i:]:
            table, long = compare_pair(stores[a], stores[b], representation="cls", split="test", measures=measures,
                                       chance={"permutations": 19, "seed": 0},
                                       intervals={"resamples": 20, "confidence": 0.95, "seed": 0})
            tables.append(tmp_path / f"{a}__{b}.parquet")
            replicates.append(tmp_path / f"{a}__{b}.resamples.parquet")
            write_parquet(tables[-1], table)
            write_parquet(replicates[-1], long)
    return layer_views(model, tables, replicates, base, list(siblings), "linear_cka")


def test_views_of_real_stores(tiny_models, tiny_dataset, tmp_path):
    """ORIG–ORIG and FT–FT are symmetric with unit diagonal; FT–ORIG of a model with itself is FT–FT;
    every value is linear CKA of the stored first-token rows, with its chance level and interval from the
    pair job; the block contrast has an interval from the same replicates."""
    stores = {}
    for name, family in (("base", "bert"), ("ft", "bert"), ("other", "bert")):
        stores[name] = tmp_path / f"{name}.zarr"
        extract_activations(tiny_models[family], tiny_dataset, stores[name], splits=["test"], batch_size=8,
                            max_length=24, provenance={"model": name, "dataset": "tiny"})
    table, summary = _views(stores, tmp_path)
    assert list(dict.fromkeys(table["view"])) == ["ORIG–ORIG", "FT–ORIG", "FT–FT", "FT[ft]–FT[other]"]
    for view in ("ORIG–ORIG", "FT–FT"):
        matrix = view_matrix(table, view)
        assert matrix.shape == (3, 3)
        # the first token at the embedding layer is one vector for every example: undefined
        assert np.isnan(matrix[0]).all() and np.isnan(matrix[:, 0]).all()
        np.testing.assert_allclose(matrix[1:, 1:], matrix[1:, 1:].T, atol=1e-12)
        np.testing.assert_allclose(np.diag(matrix)[1:], 1.0, atol=1e-12)
    # the three stores hold the same random model, so every view equals ORIG–ORIG
    np.testing.assert_allclose(view_matrix(table, "FT–ORIG"), view_matrix(table, "ORIG–ORIG"), atol=1e-12)
    from reprsim.io.store import open_store, pooled_rows

    cls = pooled_rows(open_store(stores["ft"]), "cls", "test").astype(np.float64)
    assert view_matrix(table, "FT–FT")[1, 2] == pytest.approx(linear_cka(cls[1], cls[2]), rel=1e-10)
    defined = table.dropna(subset=["value"])
    assert (defined["ci_low"] <= defined["value"]).all() and (defined["value"] <= defined["ci_high"]).all()
    assert defined["null_mean"].between(0, 1).all() and (defined["n_permutations"] == 19).all()
    assert list(summary["view"]) == ["ORIG–ORIG", "FT–FT"] and (summary["model"] == "ft").all()
    # two blocks of which layer 0 is undefined: no split has entries within and across, so no contrast either
    assert summary[["contrast", "ci_low", "ci_high"]].isna().all().all()


def test_the_block_contrast_has_its_interval_from_the_replicates():
    """The best split's contrast in every replicate of the pair tables gives the contrast's interval."""
    import pandas as pd

    rng = np.random.default_rng(0)
    matrix = _two_blocks(5, 2, within=0.8, between=0.3)
    rows, replicates = [], []
    for view in ("ORIG–ORIG", "FT–FT"):
        layer_a, layer_b = np.indices(matrix.shape)
        rows.append(pd.DataFrame({"view": view, "model": "m", "layer_a": layer_a.ravel(), "layer_b": layer_b.ravel(),
                                  "value": matrix.ravel(), "null_mean": 0.05}))
        for r in range(30):
            noisy = matrix + rng.normal(scale=0.02, size=matrix.shape)
            replicates.append(pd.DataFrame({"view": view, "layer_a": layer_a.ravel(), "layer_b": layer_b.ravel(),
                                            "replicate": r, "value": ((noisy + noisy.T) / 2).ravel(), "n": 100,
                                            "m": 50}))
    summary = block_summary(pd.concat(rows), pd.concat(replicates))
    assert (summary["split"] == 2).all() and np.allclose(summary["contrast"], 0.5)
    assert (summary["ci_low"] < 0.5).all() and (summary["ci_high"] > 0.5).all()
    assert (summary["ci_high"] - summary["ci_low"] < 0.1).all() and np.allclose(summary["null_contrast"], 0.0)


def test_views_refuse_stores_with_different_rows(tiny_models, tiny_dataset, tmp_path):
    stores = {}
    for name, rows in (("base", None), ("ft", 5)):
        stores[name] = tmp_path / f"{name}.zarr"
        extract_activations(tiny_models["bert"], tiny_dataset, stores[name], splits=["test"], batch_size=8,
                            max_length=24, max_examples=rows, provenance={"model": name, "dataset": "tiny"})
    with pytest.raises(ValueError, match="different 'test' rows"):
        _views(stores, tmp_path, siblings=())
