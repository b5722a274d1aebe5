"""Corrupt outputs in a small real results tree: readers fail naming the file and the command that
remakes it, and `reprsim verify` lists every problem (exit 1) or none (exit 0)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from reprsim.cli import main
from reprsim.io.datasets import load_split
from reprsim.io.integrity import CorruptOutputError
from reprsim.io.store import open_store, pooled_rows
from reprsim.nets.loading import load_encoder
from reprsim.stages.extract.activations import extract_activations

STORE = "results/activations/tiny/bert.zarr"
MODEL = "results/models/bert"


@pytest.fixture(scope="module")
def clean_tree(tiny_models, tiny_dataset, tmp_path_factory) -> Path:
    """results/ with a dataset, a model, its store and a table, as the workflow lays them out."""
    root = tmp_path_factory.mktemp("tree")
    shutil.copytree(tiny_dataset, root / "results/datasets/tiny")
    shutil.copytree(tiny_models["bert"], root / MODEL)
    extract_activations(root / MODEL, root / "results/datasets/tiny", root / STORE, splits=["train", "test"],
                        max_length=24, chunk_rows=16, chunk_tokens=64)
    table = root / "results/tables/pairs.parquet"
    table.parent.mkdir(parents=True)
    pd.DataFrame({"measure": ["cka"] * 50, "value": range(50)}).to_parquet(table)
    return root


@pytest.fixture
def tree(clean_tree, tmp_path, monkeypatch) -> Path:
    """A private copy, and the working directory there (as a workflow run has it)."""
    shutil.copytree(clean_tree / "results", tmp_path / "results")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def verify(capsys, *args: str) -> tuple[int, list[str]]:
    code = main(["verify", "results", *args])
    return code, capsys.readouterr().out.strip().splitlines()


def first_chunk(array_dir: Path) -> Path:
    return min(p for p in (array_dir / "c").rglob("*") if p.is_file())


def test_a_clean_tree_verifies(tree, capsys):
    code, lines = verify(capsys)
    assert code == 0, lines
    assert lines == [("verify results: checked 1 dataset(s), 1 model(s), 1 store(s), 1 table(s); "
                      "0 problem(s), 0 leftover temporary file(s)")]


def test_a_damaged_chunk_fails_the_read_and_verification(tree, capsys):
    chunk = first_chunk(Path(STORE) / "pooled/mean")
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    with pytest.raises(CorruptOutputError, match="a chunk does not decode") as caught:
        pooled_rows(open_store(STORE), "mean")
    assert str(caught.value).startswith(f"{STORE}/pooled/mean:")
    assert f"snakemake --forcerun {STORE}" in str(caught.value)
    pooled_rows(open_store(STORE), "cls")  # the other arrays still read
    code, lines = verify(capsys)
    assert code == 1
    assert lines[0] == (f"{STORE}/pooled/mean: content differs from its recorded sha256 (a damaged chunk or "
                        "metadata file). Remake it, in the workflow directory with your usual options: "
                        f"snakemake --forcerun {STORE} (rule extract_activations or import_activations)")
    assert lines[-1].endswith("1 problem(s), 0 leftover temporary file(s)")


def test_a_missing_chunk_is_found_when_the_store_opens(tree):
    first_chunk(Path(STORE) / "pooled/cls").unlink()  # zarr alone would read it as zeros
    with pytest.raises(CorruptOutputError, match="a chunk file is missing"):
        open_store(STORE)


def test_a_model_without_its_weights_file(tree, capsys):
    (Path(MODEL) / "model.safetensors").unlink()
    with pytest.raises(CorruptOutputError, match=r"no weights \(model.safetensors") as caught:
        load_encoder(MODEL, torch.device("cpu"))
    assert str(caught.value).startswith(f"{MODEL}: ") and f"snakemake --forcerun {MODEL}" in str(caught.value)
    code, lines = verify(capsys)
    made_by = "(rule materialize_model or finetune_model or pretrain_model or checkpoint_model)"
    assert code == 1 and any(line.startswith(f"{MODEL}: no weights") and line.endswith(made_by) for line in lines)


def test_a_truncated_weights_file(tree, capsys):
    weights = Path(MODEL) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(CorruptOutputError, match="truncated") as caught:
        load_encoder(MODEL, torch.device("cpu"))
    assert str(caught.value).startswith(f"{weights}: truncated")
    code, lines = verify(capsys)
    assert code == 1
    assert any(line.startswith(f"{weights}: truncated") for line in lines)
    assert sum(line.startswith(str(weights)) for line in lines) == 1  # one line per file


def test_a_model_without_file_checksums_is_checked_by_its_content_hash(tree, capsys):
    """Fine-tuned models record only content_hash: a changed byte is still found, naming the directory."""
    meta = json.loads((Path(MODEL) / "meta.json").read_text())
    del meta["checksums"]
    (Path(MODEL) / "meta.json").write_text(json.dumps(meta))
    (Path(MODEL) / "tokenizer_config.json").write_text("{}")
    code, lines = verify(capsys)
    assert code == 1 and lines[0].startswith(f"{MODEL}: content differs from meta.json content_hash")


def test_a_truncated_dataset_split(tree, capsys):
    split = Path("results/datasets/tiny/test.parquet")
    split.write_bytes(split.read_bytes()[:100])
    with pytest.raises(CorruptOutputError, match="not a readable Parquet file") as caught:
        load_split("results/datasets/tiny", "test")
    assert str(caught.value).startswith(f"{split}: ")
    assert "snakemake --forcerun results/datasets/tiny" in str(caught.value)
    code, lines = verify(capsys)
    assert code == 1 and lines[0].endswith("snakemake --forcerun results/datasets/tiny (rule prepare_dataset)")


def test_a_truncated_table(tree, capsys):
    table = Path("results/tables/pairs.parquet")
    table.write_bytes(table.read_bytes()[:-20])
    code, lines = verify(capsys)
    assert code == 1
    assert lines[0].startswith(f"{table}: not a readable Parquet file")
    assert lines[0].endswith("snakemake --forcerun results/tables/pairs.parquet (rule aggregate_pairs)")


def test_leftover_temporaries_are_reported_and_cleaned(tree, capsys):
    dead = Path("results/models/bert.tmp-999999999")  # no such pid
    dead.mkdir()
    (dead / "config.json").write_text("{}")
    Path("results/tables/pairs.parquet.tmp-999999998").write_bytes(b"half")
    code, lines = verify(capsys)
    assert code == 1
    assert f"{dead}: leftover temporary of an interrupted write; delete it when no workflow runs " \
           "(reprsim verify --clean)" in lines
    assert lines[-1].endswith("0 problem(s), 2 leftover temporary file(s)")  # the temporary model is no model
    code, lines = verify(capsys, "--clean")
    assert code == 0 and f"{dead}: leftover temporary removed" in lines and not dead.exists()
    assert verify(capsys)[0] == 0


def test_inspect_shows_the_truncation_counts(tree, capsys):
    assert main(["inspect", STORE]) == 0
    attrs = json.loads(capsys.readouterr().out)["attrs"]
    assert set(attrs["truncated"]) == {"train", "test"} and set(attrs["checksums"]) >= {"pooled/mean", "tokens/hidden"}
