"""Bad dataset input gets a clear error naming the file, split, problem, rows and fix (issue 14);
what real datasets contain (duplicates, overlap with train) is kept, counted in meta and warned about.

The files are written under tmp_path from rows of the SST-2 sample shipped in the package (real
GLUE sentences), so these tests need nothing outside the repository."""

import json
import re
import warnings

import pandas as pd
import pytest

from reprsim.io.datasets import load_split
from reprsim.stages.data.prepare import prepare_dataset, sample_dir
from reprsim.stages.data.validate import DatasetError, DatasetWarning


def sst2_rows(n: int, start: int = 0) -> list[tuple[str, str]]:
    """`n` (sentence, label) rows of the shipped SST-2 sample, both labels present."""
    lines = sample_dir("sst2").joinpath("train.tsv").read_text(encoding="utf-8").splitlines()[1 + start:1 + start + n]
    return [tuple(line.split("\t")) for line in lines]


def write_tsv(path, rows, header=("sentence", "label")):
    lines = (["\t".join(header)] if header else []) + ["\t".join(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def local(tmp_path, files: dict, **extra) -> dict:
    return {"source": "local", "data_root": str(tmp_path), "files": files,
            "columns": {"text": "sentence", "label": "label"}, "seed": 0,
            "split_fractions": {"validation": 0.2, "test": 0.2}, **extra}


def refusal(tmp_path, spec) -> str:
    with pytest.raises(DatasetError) as caught:
        prepare_dataset("reviews", spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    return str(caught.value)


def test_the_users_file_is_refused_with_every_problem(tmp_path):
    """40 binary-labelled sentences, one label missing, one text empty and one blank: nothing is
    prepared (formerly: a third class "" and two empty examples, silently)."""
    rows = [list(row) for row in sst2_rows(40)]
    rows[6][1] = ""            # line 8
    rows[11][0] = ""           # line 13
    rows[30][0] = "   "        # line 32
    path = write_tsv(tmp_path / "reviews.tsv", rows)
    message = refusal(tmp_path, local(tmp_path, {"train": "reviews.tsv"}))
    assert "2 problems" in message
    text_problem, label_problem = message.splitlines()[1:]
    assert str(path) in text_problem and "split train" in text_problem
    assert "2 rows with empty or whitespace-only text (column 'sentence'): lines 13, 32" in text_problem
    assert str(path) in label_problem
    assert "1 row without a label (column 'label'): line 8" in label_problem
    assert "never made a class" in label_problem


def test_empty_text_pair_is_refused(tmp_path):
    rows = sst2_rows(30)
    frame = pd.DataFrame({"premise": [r[0] for r in rows], "hypothesis": [r[0][:40] for r in rows],
                          "gold": ["entailment" if r[1] == "1" else "not_entailment" for r in rows]})
    frame.loc[[3, 17], "hypothesis"] = ["", " \t "]
    frame.to_csv(tmp_path / "rte.csv", index=False)
    spec = local(tmp_path, {"train": "rte.csv"},
                 columns={"text": "premise", "text_pair": "hypothesis", "label": "gold"})
    message = refusal(tmp_path, spec)
    assert str(tmp_path / "rte.csv") in message
    assert "2 rows with empty or whitespace-only text_pair (column 'hypothesis'): lines 5, 19" in message
    assert "Every example needs a text_pair" in message


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_null_labels_are_refused_not_made_a_class(tmp_path, fmt):
    rows = sst2_rows(30)
    frame = pd.DataFrame({"sentence": [r[0] for r in rows], "label": [float(r[1]) for r in rows]})
    frame.loc[[2, 9], "label"] = None
    path = tmp_path / f"train.{fmt}"
    if fmt == "jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path)
    message = refusal(tmp_path, local(tmp_path, {"train": path.name}))
    unit = "lines" if fmt == "jsonl" else "rows"
    assert str(path) in message and f"2 rows without a label (column 'label'): {unit} 3, 10" in message


@pytest.mark.parametrize("bad", ["1.5", "0.25"])
def test_fractional_labels_are_refused(tmp_path, bad):
    rows = [list(row) for row in sst2_rows(30)]
    rows[4][1] = bad
    path = write_tsv(tmp_path / "train.tsv", rows)
    message = refusal(tmp_path, local(tmp_path, {"train": "train.tsv"}))
    assert str(path) in message
    assert f"1 row with labels that are not integers (['{bad}']): line 6" in message
    assert "label_names" in message


def test_labels_outside_label_names_are_listed(tmp_path):
    rows = [(text, "positive" if label == "1" else "negative") for text, label in sst2_rows(30)]
    rows[7] = (rows[7][0], "neutral")
    write_tsv(tmp_path / "train.tsv", rows)
    message = refusal(tmp_path, local(tmp_path, {"train": "train.tsv"}, label_names=["negative", "positive"]))
    assert str(tmp_path / "train.tsv") in message
    assert "1 row with labels ['neutral'] outside label_names ['negative', 'positive']: line 9" in message


def test_string_labels_are_mapped_in_sorted_order_and_recorded(tmp_path, capsys):
    rows = [(text, "positive" if label == "1" else "negative") for text, label in sst2_rows(40)]
    write_tsv(tmp_path / "train.tsv", rows)
    meta = prepare_dataset("reviews", local(tmp_path, {"train": "train.tsv"}), tmp_path / "out")
    assert meta["label_names"] == ["negative", "positive"] and meta["n_labels"] == 2
    assert meta["label_mapping"] == {"negative": 0, "positive": 1}
    assert "'negative' -> 0, 'positive' -> 1 (sorted" in capsys.readouterr().out
    prepared = pd.concat([load_split(tmp_path / "out", s) for s in ("train", "validation", "test")])
    expected = {text: int(label == "positive") for text, label in rows}
    assert prepared["label"].tolist() == [expected[t] for t in prepared["text"]]


def test_numeric_labels_sort_numerically(tmp_path):
    rows = [(text, ["2", "10", "9"][i % 3]) for i, (text, _) in enumerate(sst2_rows(30))]
    write_tsv(tmp_path / "train.tsv", rows)
    meta = prepare_dataset("grades", local(tmp_path, {"train": "train.tsv"}), tmp_path / "out")
    assert meta["label_mapping"] == {"2": 0, "9": 1, "10": 2}


def test_a_header_read_as_data_is_caught(tmp_path):
    """column_names on a file that has a header: line 1 would become a row with label 'label'."""
    write_tsv(tmp_path / "train.tsv", sst2_rows(30))
    spec = local(tmp_path, {"train": "train.tsv"}, column_names=["text", "y"], columns={"text": "text", "label": "y"})
    message = refusal(tmp_path, spec)
    assert str(tmp_path / "train.tsv") in message
    assert "1 row with text labels among numeric ones (['label']): line 1" in message
    assert "header line read as data" in message


def test_column_names_repeating_the_header_are_caught(tmp_path):
    write_tsv(tmp_path / "train.tsv", sst2_rows(30))
    spec = local(tmp_path, {"train": "train.tsv"}, column_names=["sentence", "label"])
    message = refusal(tmp_path, spec)
    assert str(tmp_path / "train.tsv") in message and "line 1 is a header" in message
    assert "Remove datasets.reviews.column_names" in message


def test_headerless_file_with_the_wrong_column_names(tmp_path):
    """A CoLA-like header-less file described with too many columns."""
    rows = [("gj04", label, "", text) for text, label in sst2_rows(30)]
    write_tsv(tmp_path / "cola.tsv", rows, header=None)
    spec = local(tmp_path, {"train": "cola.tsv"}, column_names=["source", "label", "original_label", "sentence", "x"])
    message = refusal(tmp_path, spec)
    assert str(tmp_path / "cola.tsv") in message
    assert "30 lines with a field count other than the 5 columns of column_names: line 1 has 4, line 2 has 4" in message
    assert "Every line has 4: name that many columns in column_names" in message


def test_headerless_file_read_with_a_header_names_the_fix(tmp_path):
    rows = [("gj04", label, "", text) for text, label in sst2_rows(30)]
    write_tsv(tmp_path / "cola.tsv", rows, header=None)
    message = refusal(tmp_path, local(tmp_path, {"train": "cola.tsv"}))
    assert str(tmp_path / "cola.tsv") in message and "column(s) ['sentence', 'label'] not found" in message
    assert "if the file has no header line, name its columns in datasets.reviews.column_names" in message


def test_ragged_rows_are_refused_with_their_lines(tmp_path):
    rows = [list(row) for row in sst2_rows(30)]
    rows[3][0] += "\tand a tab"      # line 5: three fields
    path = tmp_path / "train.tsv"
    write_tsv(path, rows)
    with path.open("a") as handle:
        handle.write("a stray line without a label\n")   # line 32: one field
    message = refusal(tmp_path, local(tmp_path, {"train": "train.tsv"}))
    assert str(path) in message
    assert "2 lines with a field count other than the 2 columns of the header (line 1): line 5 has 3, line 32 has 1." in message
    assert "A tab inside a text" in message


def test_broken_json_lines_name_the_line(tmp_path):
    records = [json.dumps({"sentence": text, "label": int(label)}) for text, label in sst2_rows(20)]
    records[6] = records[6][:-1]      # a truncated record
    (tmp_path / "train.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    message = refusal(tmp_path, local(tmp_path, {"train": "train.jsonl"}))
    assert str(tmp_path / "train.jsonl") in message and "not valid JSON Lines (line 7:" in message


def test_a_file_that_is_not_utf8(tmp_path):
    rows = sst2_rows(30)
    rows[2] = ("a café review that is charmant", rows[2][1])
    path = tmp_path / "train.tsv"
    path.write_bytes(("sentence\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in rows)).encode("latin-1"))
    message = refusal(tmp_path, local(tmp_path, {"train": "train.tsv"}))
    offset = path.read_bytes().index(b"\xe9")
    assert str(path) in message and "split train" in message
    assert f"not UTF-8: byte {offset} (line 4, column 6) is b'\\xe9'" in message
    assert "iconv -f latin1 -t utf-8" in message


def test_missing_file_names_the_config_key_path_and_data_root(tmp_path):
    write_tsv(tmp_path / "train.tsv", sst2_rows(30))
    message = refusal(tmp_path, local(tmp_path, {"train": "train.tsv", "validation": "dev.tsv"}))
    assert "datasets.reviews.files.validation = 'dev.tsv'" in message
    assert f"{tmp_path / 'dev.tsv'}, which does not exist" in message
    assert f"relative to data_root {str(tmp_path)!r}" in message and "which holds ['train.tsv']" in message


def test_a_split_without_rows_is_refused(tmp_path):
    write_tsv(tmp_path / "train.tsv", sst2_rows(30))
    write_tsv(tmp_path / "dev.tsv", [])
    message = refusal(tmp_path, local(tmp_path, {"train": "train.tsv", "validation": "dev.tsv"}))
    assert str(tmp_path / "dev.tsv") in message and "split validation" in message and "no rows" in message


def test_a_single_class_train_split_is_refused(tmp_path):
    rows = [(text, "1") for text, _ in sst2_rows(30)]
    write_tsv(tmp_path / "train.tsv", rows)
    write_tsv(tmp_path / "dev.tsv", sst2_rows(10, start=100))
    message = refusal(tmp_path, local(tmp_path, {"train": "train.tsv", "validation": "dev.tsv"},
                                      label_names=["0", "1"]))
    assert str(tmp_path / "train.tsv") in message and "split train" in message
    assert "label_names lists ['0', '1'], but all 24 rows of the prepared split have the label '1'" in message
    assert "at least two classes" in message


def test_hub_unlabelled_rows_are_refused(tmp_path, monkeypatch):
    from reprsim.stages.data import hub

    rows = sst2_rows(30)
    tables = {"train": pd.DataFrame({"sentence": [r[0] for r in rows], "label": [int(r[1]) for r in rows]}),
              "test": pd.DataFrame({"sentence": [r[0] for r in sst2_rows(5, 50)], "label": [-1] * 5})}
    for frame in tables.values():   # hub rows are numbered from 1, as hub.hub_tables numbers them
        frame.index += 1
    monkeypatch.setattr(hub, "hub_tables", lambda name, spec: (tables, f"{spec['id']}/{spec['config']}"))
    spec = {"source": "hf", "id": "glue", "config": "sst2", "splits": {"train": "train", "test": "test"},
            "columns": {"text": "sentence", "label": "label"}, "seed": 0}
    message = refusal(tmp_path, spec)
    assert "hub dataset glue/sst2, split 'test'" in message
    assert "5 rows labelled -1, the hub's mark of an unlabelled row" in message and "rows 1, 2, 3, 4, 5" in message


def test_duplicates_conflicts_and_overlap_are_kept_counted_and_warned(tmp_path):
    """Real GLUE files repeat rows, so these are recorded, not refused."""
    rows = sst2_rows(30)
    train = rows + [rows[0], rows[1], (rows[2][0], "1" if rows[2][1] == "0" else "0")]   # lines 32-34
    dev = sst2_rows(10, start=200) + [rows[5]]                                            # line 12
    write_tsv(tmp_path / "train.tsv", train)
    write_tsv(tmp_path / "dev.tsv", dev)
    write_tsv(tmp_path / "test.tsv", sst2_rows(10, start=300))
    with pytest.warns(DatasetWarning) as caught:
        meta = prepare_dataset("reviews", local(tmp_path, {"train": "train.tsv", "validation": "dev.tsv",
                                                           "test": "test.tsv"}), tmp_path / "out")
    assert meta["sizes"] == {"train": 33, "validation": 11, "test": 10}
    messages = [str(w.message) for w in caught]
    train_file, dev_file = str(tmp_path / "train.tsv"), str(tmp_path / "dev.tsv")
    assert any(train_file in m and "2 rows repeating an earlier row" in m and "lines 32, 33" in m for m in messages)
    assert any(train_file in m and "holding 1 text seen with different labels: lines 4, 34" in m for m in messages)
    assert any(dev_file in m and "1 row whose text also occurs in train: line 12" in m for m in messages)
    checks = meta["checks"]
    assert checks["train"]["duplicate_rows"] == 2 and checks["train"]["texts_with_conflicting_labels"] == 1
    assert checks["validation"]["rows_shared_with_train"] == 1


def test_text_lengths_are_recorded_per_split(tmp_path):
    rows = sst2_rows(40)
    write_tsv(tmp_path / "train.tsv", rows)
    meta = prepare_dataset("reviews", local(tmp_path, {"train": "train.tsv"}), tmp_path / "out")
    for split in ("train", "validation", "test"):
        lengths = load_split(tmp_path / "out", split)["text"].str.len()
        assert meta["checks"][split]["text_chars"] == {"max": int(lengths.max()),
                                                       "p99": round(float(lengths.quantile(0.99)), 1)}


@pytest.mark.parametrize("sample, names", [("sst2", ("negative", "positive")), ("cola", ("unacceptable", "acceptable"))])
def test_the_shipped_samples_pass_quietly(tmp_path, capsys, sample, names):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DatasetWarning)
        meta = prepare_dataset(sample, {"source": "sample", "name": sample, "seed": 0}, tmp_path / sample)
    assert meta["label_mapping"] == {"0": 0, "1": 1}
    assert all(meta["checks"][s]["duplicate_rows"] == 0 for s in ("train", "validation", "test"))
    assert re.search(rf"label -> class: '0' -> 0 \({names[0]}\), '1' -> 1 \({names[1]}\)$",
                     capsys.readouterr().out.strip())


def test_builtin_repeats_are_counted_without_warnings(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DatasetWarning)
        meta = prepare_dataset("synth", {"source": "builtin", "n_examples": 2000, "seed": 0,
                                         "split_fractions": {"validation": 0.2, "test": 0.2}}, tmp_path / "synth")
    assert meta["checks"]["train"]["duplicate_rows"] > 0   # a template generator repeats sentences


def test_unlabelled_text_is_prepared_without_classes(tmp_path, capsys):
    """A file of sentences and no label column (columns.label left out): every row kept with the label -1, no
    classes, meta["labelled"] false; a blank text is still refused; the report's dataset table says so."""
    from reprsim.design.dataset_labels import UNLABELLED
    from reprsim.stages.report.pages.index import datasets_table

    write_tsv(tmp_path / "texts.tsv", [(text,) for text, _ in sst2_rows(40)], header=("sentence",))
    spec = local(tmp_path, {"train": "texts.tsv"}, columns={"text": "sentence"})
    meta = prepare_dataset("texts", spec, tmp_path / "out")
    assert meta["labelled"] is False and meta["label_names"] == [] and meta["n_labels"] == 0
    assert meta["label_mapping"] == {}
    assert sum(meta["sizes"].values()) == 40 and all(size > 0 for size in meta["sizes"].values())
    for split in ("train", "validation", "test"):
        assert (load_split(tmp_path / "out", split)["label"] == UNLABELLED).all()
    assert "unlabelled text" in capsys.readouterr().out
    assert datasets_table([str(tmp_path / "out")])["labels"].tolist() == ["none (unlabelled text)"]
    # a labelled dataset still says it is labelled
    write_tsv(tmp_path / "labelled.tsv", sst2_rows(40))
    assert prepare_dataset("labelled", local(tmp_path, {"train": "labelled.tsv"}), tmp_path / "l")["labelled"] is True

    rows = [(text,) for text, _ in sst2_rows(40)]
    rows[4] = ("  ",)  # line 6
    blank = tmp_path / "blank"
    blank.mkdir()
    write_tsv(blank / "blank.tsv", rows, header=("sentence",))
    message = refusal(blank, local(blank, {"train": "blank.tsv"}, columns={"text": "sentence"}))
    assert "1 row with empty or whitespace-only text (column 'sentence'): line 6" in message
