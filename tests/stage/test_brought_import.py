"""Brought activations (source: activations): MiniLM's own pooled test rows, written in each of the four formats
(shuffled, with rows the workflow does not compare, or as the split of a two-split store) and imported back, give the
pair table MiniLM's own store gives, to the bit; and the import keeps extraction's rows and layout."""

import numpy as np
import pandas as pd
import pytest

from reprsim.io.store import open_store, pooled_rows, split_examples
from reprsim.stages.compare.pairs import compare_pair
from reprsim.stages.extract.activations import collect_examples, extract_activations
from reprsim.stages.extract.brought import export_activations, extracted_rows, import_activations, write_split
from reprsim.stages.report.pages.index import _model_phrase, brought_metas, models_table

CAP = 15  # extraction.max_examples: the tiny dataset's test split has 20 rows, so rows 15..19 are not compared
MEASURES = {"linear_cka": {"measure": "cka", "params": {"kernel": "linear", "estimator": "biased"}},
            "svcca": {"measure": "svcca", "params": {"pca_dims": 3}},
            "mutual_knn": {"measure": "mutual_knn", "params": {"k": 3}}}
NUMBERS = ["value", "null_mean", "null_std", "null_p", "ci_low", "ci_high"]


@pytest.fixture(scope="module")
def stores(minilm_dir, tiny_models, tiny_dataset, tmp_path_factory):
    """MiniLM's store and a tiny BERT's, on the train and test splits (first CAP rows of each)."""
    root = tmp_path_factory.mktemp("brought")
    made = {}
    for name, model_dir in (("minilm", minilm_dir), ("bert", tiny_models["bert"])):
        made[name] = root / f"{name}.zarr"
        extract_activations(model_dir, tiny_dataset, made[name], splits=["train", "test"], max_examples=CAP,
                            batch_size=8, max_length=32, poolings=["mean"], tokens=False,
                            provenance={"model": name, "dataset": "tiny"})
    return made


def pair(store_a, store_b):
    return compare_pair(store_a, store_b, representation="mean", split="test", measures=MEASURES,
                        chance={"permutations": 19}, intervals={"resamples": 20})


def write_case(case: str, minilm: str, root) -> str:
    """MiniLM's test rows as brought activations of one format; rows shuffled, or with 3 rows beyond the compared
    ones (their values are noise: they must be dropped)."""
    store = open_store(minilm)
    layers = pooled_rows(store, "mean", "test")
    rows = store["examples/row"][:][split_examples(store, "test")]
    if case == "zarr-store":  # the store itself: the test rows of a two-split store
        return minilm
    if case == "npy":  # as stored, in the dataset's order
        return str(export_activations(minilm, root / "minilm_test", split="test", pooling="mean"))
    order = np.random.default_rng(0).permutation(len(rows))
    layers, rows = layers[:, order], rows[order]
    if case == "safetensors":  # extra rows 15..17, never compared
        noise = np.random.default_rng(1).standard_normal((layers.shape[0], 3, layers.shape[2])).astype(layers.dtype)
        layers, rows = np.concatenate([layers, noise], axis=1), np.concatenate([rows, [17, 15, 16]])
    suffix = {"npz": ".npz", "safetensors": ".safetensors", "zarr": ".zarr"}[case]
    return str(write_split(root / f"minilm_test{suffix}", layers, rows, split="test", pooling="mean"))


@pytest.fixture(scope="module")
def reference(stores):
    return pair(stores["minilm"], stores["bert"])


@pytest.mark.parametrize("case", ["npy", "npz", "safetensors", "zarr", "zarr-store"])
def test_an_imported_copy_gives_the_pair_table_of_the_store_it_came_from(case, stores, reference, tiny_dataset,
                                                                          tmp_path):
    source = write_case(case, str(stores["minilm"]), tmp_path)
    out = tmp_path / "brought.zarr"
    attrs = import_activations({"test": source}, tiny_dataset, out, model="minilm-brought", pooling="mean",
                               splits=["train", "test"], max_examples=CAP, provenance={"dataset": "tiny"})
    table, replicates = pair(out, stores["bert"])
    assert (table["model_a"] == "minilm-brought").all()
    np.testing.assert_array_equal(table[NUMBERS].to_numpy(float), reference[0][NUMBERS].to_numpy(float))
    assert list(table["measure"]) == list(reference[0]["measure"])
    pd.testing.assert_frame_equal(replicates.drop(columns="model_a"), reference[1].drop(columns="model_a"))
    expected_format = {"zarr-store": "zarr"}.get(case, case)
    record = attrs["brought"]["test"]
    assert record["format"] == expected_format and record["rows_given"] == CAP + 3 * (case == "safetensors")
    assert record["rows_dropped"] == 3 * (case == "safetensors") and all(len(h) == 64 for h in record["sha256"].values())


def test_the_store_has_extractions_layout(stores, tiny_dataset, tmp_path):
    source = write_case("npz", str(stores["minilm"]), tmp_path)
    import_activations({"test": source}, tiny_dataset, tmp_path / "b.zarr", model="minilm-brought", pooling="mean",
                       splits=["train", "test"], max_examples=CAP, provenance={"dataset": "tiny"})
    brought, own = open_store(tmp_path / "b.zarr"), open_store(stores["minilm"])
    mine = split_examples(own, "test")
    for name in ("row", "label", "n_words"):
        np.testing.assert_array_equal(brought[f"examples/{name}"][:], own[f"examples/{name}"][:][mine])
    np.testing.assert_array_equal(brought["examples/split"][:], 0)
    np.testing.assert_array_equal(brought["pooled/mean"][:], pooled_rows(own, "mean", "test"))  # shuffled back
    attrs = dict(brought.attrs)
    assert attrs["split_names"] == ["test"] and attrs["split_sizes"] == {"test": CAP}
    assert (attrs["model"], attrs["dataset"], attrs["poolings"], attrs["dtype"]) == ("minilm-brought", "tiny", ["mean"],
                                                                                       "float32")
    assert (attrs["n_layers"], attrs["hidden_size"]) == (own.attrs["n_layers"], own.attrs["hidden_size"])
    assert set(attrs["checksums"]) == {"pooled/mean", "examples/split", "examples/row", "examples/label",
                                       "examples/n_words"}
    # the report names it from its store: it has no model directory
    meta, = brought_metas([stores["minilm"], tmp_path / "b.zarr"])
    assert _model_phrase(meta) == "brought activations, no network (mean pooling of tiny's test; 7 layers × 384)"
    assert models_table([], [meta]).loc[0, "parameters"] == "–"
    # the rows the workflow compares are the ones extraction takes: collect_examples' first max_examples
    assert extracted_rows(20, CAP) == len(collect_examples(tiny_dataset, ["test"], CAP)) == CAP
    assert extracted_rows(20, None) == len(collect_examples(tiny_dataset, ["test"], None)) == 20
