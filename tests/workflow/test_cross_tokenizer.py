"""config/examples/cross-tokenizer.yaml end to end, offline and shrunk: MiniLM's WordPiece against GPT-2s
with a byte-level BPE learnt from the dataset, compared on identical word lists (words from the dataset,
not the tokenizers), with token-level CKA only where a tokenizer is shared, and word-level attention."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

from reprsim.io.store import open_store

pytestmark = pytest.mark.workflow
EXAMPLE = REPO / "config" / "examples" / "cross-tokenizer.yaml"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The example with 40 sentences per split, every word of the test split and fewer draws; of the pair jobs
    (sentence and word level) those of MiniLM with the BPE GPT-2 and with itself, and no grounding tests (the shared
    tiny run has both, at full extent: this run is about words, tokens and attention across tokenizers)."""
    root = copy_workflow(tmp_path_factory.mktemp("cross-tokenizer"))
    config = yaml.safe_load(EXAMPLE.read_text())
    config["extraction"].update(max_examples=40, batch_size=16)
    config["similarity"]["pairs"] = [["gpt2-bpe-s0", "minilm"], ["minilm", "minilm"]]
    config["grounding"] = {"enabled": False}
    config["similarity"]["word"].update(max_words=None)
    config["similarity"]["chance"] = {"permutations": 19, "seed": 0}
    config["similarity"]["intervals"] = {"resamples": 20, "confidence": 0.95, "seed": 0}
    config["similarity"]["tokens"]["batch_size"] = 64
    config["similarity"]["attention"].update(max_examples=None, permutations=4)
    (root / "cross.yaml").write_text(yaml.safe_dump(config))
    snakemake(root, "--configfile", "cross.yaml")
    return root


def store(root, model):
    return open_store(root / "results" / "activations" / "sst2" / f"{model}.zarr")


def test_different_tokenizers_compare_on_identical_word_lists(run):
    minilm, gpt2 = store(run, "minilm"), store(run, "gpt2-bpe-s0")
    # the tokenizers differ: other token counts for most sentences, another vocabulary
    tokens = [s["examples/n_tokens"][:] for s in (minilm, gpt2)]
    assert (tokens[0] != tokens[1]).mean() > 0.5
    trained = json.loads((run / "results" / "models" / "gpt2-bpe-s0" / "meta.json").read_text())
    assert trained["tokenizer_trained"]["dataset"] == "sst2"
    # ... the words do not: the same count per sentence and the same word rows in both stores
    for name in ("examples/n_words", "words/offsets"):
        np.testing.assert_array_equal(minilm[name][:], gpt2[name][:])
    test = minilm.attrs["split_names"].index("test")
    n_words = int(minilm["examples/n_words"][:][minilm["examples/split"][:] == test].sum())
    table = pd.read_parquet(run / "results" / "pairs" / "word" / "sst2" / "gpt2-bpe-s0__minilm.parquet")
    assert set(table["measure"]) == {"linear_cka", "unbiased_cka", "svcca"}
    meta = json.loads(table["meta"].iloc[0])["words"]
    assert meta["sentences"] == meta["sentences_in_split"] == 40
    # every word a token reached on both sides is compared: n words, many times the sentences
    assert (table["n"] == meta["words"]).all() and meta["words"] + meta["words_without_token"] == n_words
    assert meta["words"] > 10 * 40
    defined = table[table["value"].notna()]
    assert len(defined) > 0.9 * len(table)
    assert np.isfinite(defined[["null_mean", "ci_low", "ci_high"]].to_numpy()).all()
    # layer 0 vs layer 0 of MiniLM with itself at word level is 1; the word pairs with itself agree
    itself = pd.read_parquet(run / "results" / "pairs" / "word" / "sst2" / "minilm__minilm.parquet")
    cka = itself[(itself["measure"] == "linear_cka") & (itself["layer_a"] == itself["layer_b"])]
    np.testing.assert_allclose(cka["value"], 1.0, atol=1e-9)


def test_token_level_cka_only_for_shared_tokenizers(run):
    tokens = pd.read_parquet(run / "results" / "tables" / "token_pairs.parquet")
    assert {(a, b) for a, b in zip(tokens["model_a"], tokens["model_b"])} == {
        ("bert-wordpiece-s0", "minilm"), ("gpt2-bpe-s0", "gpt2-bpe-s1")}
    assert np.isfinite(tokens[["value", "null_mean"]].to_numpy()).all()


def test_attention_across_tokenizers_at_word_level(run):
    table = pd.read_parquet(run / "results" / "tables" / "attention.parquet")
    pair = table[(table["model_a"] == "gpt2-bpe-s0") & (table["model_b"] == "minilm")]
    assert set(pair["layer_a"]) == {1, 2, 3, 4} and set(pair["layer_b"]) == set(range(1, 7))
    assert {json.loads(m)["level"] for m in pair["meta"]} == {"word"}
    defined = pair[pair["value"].notna()]
    assert len(defined) == len(pair) and np.isfinite(defined[["null_mean", "ci_low", "ci_high"]].to_numpy()).all()
    heads = pd.read_parquet(run / "results" / "tables" / "attention_heads.parquet")
    assert set(zip(heads["layer_a"], heads["layer_b"])) == {(4, 4)}
    page = (run / "results" / "report" / "attention.html").read_text()
    assert "Matching layers along depth" in page and page.count("<img") >= 1 + 3
