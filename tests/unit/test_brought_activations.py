"""Brought activations (models.NAME.source: activations): every refusal of a brought split names the file, split and
what was expected (reprsim.stages.extract.brought); the config refuses a brought model wherever a network is needed,
and names the split its pairs or aligners need (reprsim.config); the rules leave it out where a section defaults to
every model or pair."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from conftest import REPO

from reprsim.config import ConfigError, load_yaml, validate_config
from reprsim.stages.extract.brought import BroughtActivationsError, kept_rows, read_split, write_split
from reprsim.workflow import brought

WHERE = "brought activations of model 'b', split 'test'"


def layers(n_layers=3, rows=6, dims=4, dtype="float32", seed=0):
    return np.random.default_rng(seed).standard_normal((n_layers, rows, dims)).astype(dtype)


def refusal(path, **options) -> str:
    with pytest.raises(BroughtActivationsError) as caught:
        read_split(path, split="test", pooling="mean", where=WHERE, **options)
    message = str(caught.value)
    assert message.startswith(WHERE) and str(path) in message
    return message


def npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def test_every_format_reads_back(tmp_path):
    stack, rows = layers(), np.array([5, 0, 3, 1, 2, 4])
    for name in ("split_npy", "split.npz", "split.safetensors", "split.zarr"):
        read = read_split(write_split(tmp_path / name, stack, rows, split="test", pooling="mean"), split="test",
                          pooling="mean", where=WHERE)
        np.testing.assert_array_equal(read.layers, stack)
        np.testing.assert_array_equal(read.row_ids, rows)
        assert read.format == brought.source_format(tmp_path / name) and read.sha256


def test_layers_of_different_shapes_are_refused(tmp_path):
    stack = layers()
    message = refusal(npz(tmp_path / "a.npz", layer_0=stack[0], layer_1=stack[1][:, :3], layer_2=stack[2],
                          row_ids=np.arange(6)))
    assert "layer_1 has shape (6, 3) where layer_0 has (6, 4); every layer must have the same rows and dims" in message
    message = refusal(npz(tmp_path / "b.npz", layer_0=stack[0], layer_1=stack[1][:5], row_ids=np.arange(6)))
    assert "layer_1 has shape (5, 4)" in message


def test_a_gap_in_the_layer_files_is_refused(tmp_path):
    directory = write_split(tmp_path / "split", layers(4), np.arange(6), split="test", pooling="mean")
    (directory / "layer_2.npy").unlink()
    message = refusal(directory)
    assert "format npy" in message and "layer_2 missing (found layer_0, layer_1, layer_3)" in message
    assert "expected layer_0 ... layer_3 without gaps" in message


def test_unexpected_and_missing_names_are_refused(tmp_path):
    stack = layers(2)
    message = refusal(npz(tmp_path / "a.npz", layer_0=stack[0], layer_01=stack[1], rows=np.arange(6)))
    assert "unexpected array(s) layer_01, rows" in message and "no row_ids array" in message


def test_nan_and_infinite_values_are_counted_per_layer(tmp_path):
    stack = layers()
    stack[1, 0, :2] = np.nan
    stack[2, 3, 1] = np.inf
    message = refusal(write_split(tmp_path / "a.safetensors", stack, np.arange(6), split="test", pooling="mean"))
    assert "layer_1 holds 2 NaN and 0 infinite value(s) (of 24)" in message
    assert "layer_2 holds 0 NaN and 1 infinite value(s)" in message and "layer_0 holds" not in message


def test_integer_activations_and_float_row_ids_are_refused(tmp_path):
    message = refusal(npz(tmp_path / "a.npz", layer_0=np.ones((6, 4), np.int64), row_ids=np.arange(6)))
    assert "layer_0 is int64 (integer activations are refused); expected float16, float32 or float64" in message
    message = refusal(npz(tmp_path / "b.npz", layer_0=layers(1)[0], row_ids=np.arange(6.0)))
    assert "row_ids is float64 of shape (6,); expected a 1-D integer array" in message
    from safetensors.numpy import save_file

    save_file({"layer_0": np.ones((6, 4), np.int32), "row_ids": np.arange(6)}, str(tmp_path / "c.safetensors"))
    assert "layer_0 is I32; expected a float dtype (F16, F32 or F64)" in refusal(tmp_path / "c.safetensors")


def test_row_ids_out_of_range_repeated_or_missing_are_refused(tmp_path):
    read = read_split(write_split(tmp_path / "a.npz", layers(rows=6), np.array([0, 1, 1, 2, 9, -1]), split="test",
                                  pooling="mean"), split="test", pooling="mean", where=WHERE)
    with pytest.raises(BroughtActivationsError) as caught:
        kept_rows(read, 8, 5, WHERE)
    message = str(caught.value)
    assert message.startswith(WHERE) and "a.npz" in message and "3 problem(s)" in message
    assert "2 row id(s) outside the split's 8 rows (0..7): -1, 9" in message
    assert "1 row id(s) given more than once: 1" in message
    assert "2 of the 5 rows the workflow compares are missing: 3, 4" in message


def test_extra_rows_are_dropped_and_the_rest_put_in_the_datasets_order(tmp_path):
    read = read_split(write_split(tmp_path / "a.npz", layers(rows=5), np.array([4, 2, 0, 6, 1]), split="test",
                                  pooling="mean"), split="test", pooling="mean", where=WHERE)
    np.testing.assert_array_equal(kept_rows(read, 10, 3, WHERE), [2, 4, 1])  # rows 0, 1, 2; rows 4 and 6 dropped


def test_an_unknown_format_or_missing_file_is_named(tmp_path):
    (tmp_path / "acts.pt").write_bytes(b"x")
    message = refusal(tmp_path / "acts.pt")
    assert "of no accepted format" in message and ".npz" in message and ".safetensors" in message
    message = refusal(tmp_path / "absent.npz")
    assert "no such file" in message
    (tmp_path / "empty").mkdir()
    assert "holds no .npy files" in refusal(tmp_path / "empty")


def test_a_zarr_source_needs_the_split_and_the_pooling(tmp_path):
    path = write_split(tmp_path / "s.zarr", layers(), np.arange(6), split="validation", pooling="cls")
    message = refusal(path)
    assert "no rows of split 'test' (its splits: ['validation'])" in message
    assert "no pooled/mean (it holds pooled/cls)" in message


def test_declared_shape_reads_headers_only(tmp_path):
    for name in ("d", "a.npz", "a.safetensors", "a.zarr"):
        path = write_split(tmp_path / name, layers(3, 6, 4), np.arange(6), split="test", pooling="mean")
        assert brought.declared_shape(path, "mean") == (3, 4), name


# ----------------------------------------------------------------- the config
@pytest.fixture()
def config():
    """The default config with a brought model of MiniLM's mean rows on every split."""
    config = load_yaml(REPO / "config" / "config.yaml")
    config["models"]["b"] = {"source": "activations", "dataset": "sst2", "pooling": "mean",
                             "splits": {s: f"acts/{s}.npz" for s in ("train", "validation", "test")}}
    return config


def problems_of(config) -> str:
    with pytest.raises(ConfigError) as caught:
        validate_config(config)
    return str(caught.value)


NO_NETWORK = "model 'b' is brought activations (source: activations) and has no network, so it cannot take part in"


def test_a_brought_model_is_valid_and_gets_its_pooling_default(config):
    del config["models"]["b"]["pooling"]
    assert validate_config(config)["models"]["b"]["pooling"] == "mean"


@pytest.mark.parametrize("edit, key, section", [
    (lambda c: c["models"]["minilm-ft-s1"].update(base="b"), "models.minilm-ft-s1.base", "fine-tuning"),
    (lambda c: c["models"]["bert-small-s0"].update(tokenizer="b"), "models.bert-small-s0.tokenizer",
     "a borrowed tokenizer"),
    (lambda c: c.update(stitching={"pairs": [["b", "minilm"]]}), "stitching.pairs", "model stitching"),
    (lambda c: c["similarity"]["attention"].update(pairs=[["minilm", "b"]]), "similarity.attention.pairs",
     "attention similarity"),
    (lambda c: c["similarity"].update(tokens={"pairs": [["minilm", "b"]]}), "similarity.tokens.pairs",
     "token-level CKA"),
    (lambda c: c["similarity"]["word"].update(pairs=[["minilm", "b"]]), "similarity.word.pairs",
     "word-level representation pairs"),
    (lambda c: c.setdefault("grounding", {}).update(monotonicity_models=["b"]), "grounding.monotonicity_models",
     "grounding's monotonicity"),
    (lambda c: c.setdefault("grounding", {}).update(deletion={"models": ["minilm", "b"]}), "grounding.deletion.models",
     "grounding's deletion models"),
    (lambda c: c.setdefault("grounding", {}).update(prediction={"models": ["b"]}), "grounding.prediction.models",
     "grounding's prediction models"),
    (lambda c: c.update(universality={"reference": ["minilm-ft-s1", "minilm-ft-s2"], "floor": ["b"],
                                      "factors": {"data": {"x": ["minilm"]}}}), "universality", "a universality study"),
])
def test_a_section_that_needs_a_network_refuses_a_brought_model(config, edit, key, section):
    edit(config)
    message = problems_of(config)
    assert f"key '{key}' names 'b': {NO_NETWORK} {section}" in message


def test_the_compared_and_aligned_splits_must_be_brought(config):
    config["models"]["b"]["splits"] = {"validation": "acts/validation.npz"}
    config["align"]["pairs"] = None  # every pair of distinct models: b's too (its pooling is align.representation)
    message = problems_of(config)
    assert ("key 'models.b.splits' brings no 'test' split (similarity.split), which its pairs compare; add "
            "models.b.splits.test") in message
    assert "brings no 'train' split (align.splits.fit)" in message and "(align.splits.score)" in message
    assert "(align.splits.select)" not in message
    config["models"]["b"]["splits"] = {"test": "acts/test.npz"}
    config["align"]["enabled"] = False
    config["similarity"]["pairs"] = [["minilm", "minilm"]]  # not compared: nothing to bring
    validate_config(copy.deepcopy(config))


def test_a_brought_model_is_compared_at_its_pooling_only(config):
    config["models"]["b"]["pooling"] = "cls"
    config["align"]["enabled"] = False
    validate_config(copy.deepcopy(config))  # representations mean and word: left out of their pairs
    config["similarity"]["pairs"] = [["minilm", "b"]]
    message = problems_of(copy.deepcopy(config))
    assert "key 'similarity.pairs' names 'b', brought activations of pooling 'cls', which " \
           "similarity.representations = ['mean', 'word'] does not compare" in message
    config["align"].update(enabled=True, pairs=[["minilm", "b"]])
    config["similarity"]["pairs"] = None
    assert "but align.representation is 'mean'" in problems_of(config)


def test_a_brought_models_dataset_and_splits_are_extracted_ones(config):
    config["models"]["b"]["dataset"] = "nope"
    assert "key 'models.b.dataset' is 'nope', which is not a dataset in this config" in problems_of(copy.deepcopy(config))
    config["models"]["b"]["dataset"] = "sst2"
    config["extraction"]["splits"] = ["validation", "test"]
    config["align"]["enabled"] = False
    message = problems_of(config)
    assert "key 'models.b.splits.train': extraction.splits = ['validation', 'test'] does not extract that split" in message
    config["models"]["b"]["splits"]["tset"] = "x.npz"
    assert "key 'models.b.splits.tset' is unknown (did you mean 'test'?)" in problems_of(config)


def test_sections_that_default_to_every_model_leave_brought_ones_out(config):
    config = validate_config(config)
    models = config["models"]
    pairs = [("b", "minilm"), ("minilm", "minilm"), ("b", "b")]
    assert brought.taking_part(models, pairs, "mean", "sst2") == pairs
    assert brought.taking_part(models, pairs, "word") == [("minilm", "minilm")]
    assert brought.taking_part(models, pairs, "mean", "other") == [("minilm", "minilm")]
    assert "b" not in brought.network_models(models) and brought.brought_models(models) == ["b"]
    assert brought.with_store(models, ["b", "minilm"], "other") == ["minilm"]


def test_export_activations_writes_a_brought_file_from_a_store(tmp_path, capsys):
    from reprsim.cli import main

    stack = layers()
    store = write_split(tmp_path / "s.zarr", stack, np.arange(6), split="test", pooling="mean")
    assert main(["export-activations", str(store), str(tmp_path / "out.safetensors"), "--split", "test"]) == 0
    read = read_split(tmp_path / "out.safetensors", split="test", pooling="mean", where=WHERE)
    np.testing.assert_array_equal(read.layers, stack)
    assert main(["export-activations", str(store), str(tmp_path / "o.npz"), "--split", "train"]) == 2
    assert "has no rows of split 'train'" in capsys.readouterr().err


def test_the_plan_sizes_a_brought_store_from_its_files_headers(config, tmp_path, monkeypatch):
    from reprsim.workflow.predicted import PredictedFacts, UnknownSize

    monkeypatch.chdir(tmp_path)
    config["models"]["b"]["splits"] = {"test": "acts/test.npz"}
    config["align"]["enabled"] = False
    facts = PredictedFacts(validate_config(config))
    with pytest.raises(UnknownSize, match="acts/test.npz cannot be read yet"):
        facts.store("sst2", "b")
    write_split(tmp_path / "acts" / "test.npz", layers(3, 6, 4), np.arange(6), split="test", pooling="mean")
    store = facts.store("sst2", "b")  # the rows extraction takes of the sample's test split; depth and width declared
    assert (store["n_examples"], store["n_layers"], store["hidden_size"], store["split_sizes"]) == (872, 2, 4,
                                                                                                  {"test": 872})
    with pytest.raises(UnknownSize, match="no network"):
        facts.model("b")
