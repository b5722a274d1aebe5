"""A random model whose tokenizer is trained offline on a dataset (`tokenizer: {train: {...}}`): saved with the
model and reloaded, its vocabulary bounded and seeded, usable for extraction; and the config checks of the key."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import REPO
from test_config import problems_of

from reprsim.config import load_yaml, validate_config
from reprsim.io.datasets import read_meta
from reprsim.io.outputs import write_parquet
from reprsim.io.provenance import hash_directory
from reprsim.io.store import open_store
from reprsim.nets.loading import load_encoder, load_tokenizer
from reprsim.stages.extract.activations import extract_activations
from reprsim.stages.models.materialize import dataset_texts, materialize_model

GPT2 = {"n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64}


def spec(**train):
    return {"source": "init", "architecture": "gpt2", "seed": 0, "config": GPT2,
            "tokenizer": {"train": {"dataset": "sst2", "vocab_size": 600, "seed": 0, "max_texts": None,
                                    "min_frequency": 2, **train}}}


@pytest.fixture(scope="module")
def sst2(sst2_sample):
    return sst2_sample


@pytest.fixture(scope="module")
def trained(sst2, tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "gpt2-bpe"
    return out, materialize_model("gpt2-bpe", spec(), out, dataset_dir=sst2)


def test_the_trained_tokenizer_is_saved_with_the_model_and_reloads(trained):
    out, meta = trained
    tokenizer = load_tokenizer(out)
    assert len(tokenizer) <= 600 and tokenizer.pad_token == "<pad>" and tokenizer.pad_token_id is not None
    text = "a gorgeous , witty , seductive movie ."
    assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == text
    recorded = read_meta(out)
    assert recorded["tokenizer_trained"] == meta["tokenizer_trained"]
    assert meta["tokenizer_trained"] == {"dataset": "sst2", "split": "train", "vocab_size": 600,
                                         "vocab_size_obtained": len(tokenizer), "seed": 0, "max_texts": None,
                                         "min_frequency": 2, "texts_used": 3000}
    assert meta["tokenizer_from"] == "trained on sst2" and meta["seed"] == 0
    model = load_encoder(out, torch.device("cpu"))
    assert model.config.vocab_size == len(tokenizer) and model.config.pad_token_id == tokenizer.pad_token_id
    assert model.config.bos_token_id == tokenizer.bos_token_id and model.config.eos_token_id == tokenizer.eos_token_id
    batch = tokenizer([text, "short ."], padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       output_hidden_states=True).hidden_states
    assert len(hidden) == 3 and all(torch.isfinite(h).all() for h in hidden)


def test_the_vocabulary_is_bounded_by_vocab_size(sst2, tmp_path):
    meta = materialize_model("small", spec(vocab_size=300), tmp_path / "small", dataset_dir=sst2)
    assert meta["tokenizer_trained"]["vocab_size_obtained"] <= 300
    assert len(load_tokenizer(tmp_path / "small")) <= 300


def test_the_same_seed_gives_the_same_vocabulary(sst2, tmp_path):
    made = {name: materialize_model(name, spec(max_texts=500, seed=seed), tmp_path / name, dataset_dir=sst2)
            for name, seed in (("a", 0), ("b", 0), ("c", 1))}
    vocab = {name: load_tokenizer(tmp_path / name).get_vocab() for name in made}
    assert vocab["a"] == vocab["b"] and vocab["a"] != vocab["c"]
    assert made["a"]["content_hash"] == made["b"]["content_hash"] == hash_directory(tmp_path / "b")
    assert made["a"]["tokenizer_trained"]["texts_used"] == 500


def test_text_pairs_are_trained_on_too(tmp_path):
    dataset = tmp_path / "pairs"
    dataset.mkdir()
    write_parquet(dataset / "train.parquet", pd.DataFrame({"text": ["a premise .", "another one ."],
                                                           "text_pair": ["a hypothesis .", None], "label": [0, 1]}))
    assert dataset_texts(dataset) == ["a premise .", "a hypothesis .", "another one ."]


def test_extraction_runs_on_a_model_with_a_trained_tokenizer(trained, tiny_dataset, tmp_path):
    out, _ = trained
    extract_activations(out, tiny_dataset, tmp_path / "s.zarr", splits=["test"], batch_size=7, max_length=32,
                        chunk_tokens=50)
    store = open_store(tmp_path / "s.zarr")
    tokenizer = load_tokenizer(out)
    offsets = store["tokens/offsets"][:]
    assert store["tokens/hidden"].shape == (3, offsets[-1], 32)
    assert np.isfinite(store["tokens/hidden"][:]).all()
    ids = store["tokens/input_ids"][:]
    assert ids.max() < len(tokenizer) and tokenizer.pad_token_id not in ids  # padding is never stored
    assert ids[offsets[0]] == tokenizer.bos_token_id and ids[offsets[1] - 1] == tokenizer.eos_token_id


def test_a_trained_tokenizer_without_its_dataset_is_refused(tmp_path):
    with pytest.raises(ValueError, match="sst2"):
        materialize_model("x", spec(), tmp_path / "x")


# ----------------------------------------------------------------- configuration

@pytest.fixture()
def config():
    config = load_yaml(REPO / "config" / "config.yaml")
    config["models"]["gpt2-bpe-s0"] = {"source": "init", "architecture": "gpt2", "seed": 0,
                                       "tokenizer": {"train": {"dataset": "sst2", "vocab_size": 2000}},
                                       "config": {"n_embd": 128, "n_layer": 4, "n_head": 4}}
    return config


def test_a_trained_tokenizer_is_valid_and_gets_its_defaults(config):
    validated = validate_config(copy.deepcopy(config))
    assert validated["models"]["gpt2-bpe-s0"]["tokenizer"] == {
        "train": {"dataset": "sst2", "vocab_size": 2000, "seed": 0, "max_texts": None, "min_frequency": 2}}
    assert validated["models"]["bert-small-s0"]["tokenizer"] == "minilm"  # the borrowed form is unchanged


@pytest.mark.parametrize("train, expected", [
    ({"dataset": "nope"}, "key 'models.gpt2-bpe-s0.tokenizer.train.dataset' is 'nope', which is not a dataset"),
    ({"dataset": "sst2", "vocab_size": 100}, "key 'models.gpt2-bpe-s0.tokenizer.train.vocab_size' is 100; must be ≥ 300"),
    ({"dataset": "sst2", "vocab_size": "2k"}, "key 'models.gpt2-bpe-s0.tokenizer.train.vocab_size' must be of type integer"),
    ({"dataset": "sst2", "min_frequency": 0}, "key 'models.gpt2-bpe-s0.tokenizer.train.min_frequency' is 0"),
    ({"dataset": "sst2", "max_text": 10}, "key 'models.gpt2-bpe-s0.tokenizer.train.max_text' is unknown (did you mean 'max_texts'?)"),
    ({"vocab_size": 2000}, "models.gpt2-bpe-s0.tokenizer.train: 'dataset' is a required property"),
])
def test_trained_tokenizer_errors_name_the_key(config, train, expected):
    config["models"]["gpt2-bpe-s0"]["tokenizer"]["train"] = train
    assert expected in problems_of(config)


def test_a_tokenizer_that_is_neither_a_name_nor_a_training_is_refused(config):
    config["models"]["gpt2-bpe-s0"]["tokenizer"] = 3
    assert "key 'models.gpt2-bpe-s0.tokenizer' must be of type string or object" in problems_of(config)
    config["models"]["gpt2-bpe-s0"]["tokenizer"] = {"model": "minilm"}
    assert "key 'models.gpt2-bpe-s0.tokenizer.model' is unknown" in problems_of(config)


def test_a_model_can_borrow_a_trained_tokenizer(config):
    """Another random model may borrow the trained tokenizer's model; the cycle check follows names only."""
    config["models"]["bert-bpe"] = {"source": "init", "architecture": "bert", "tokenizer": "gpt2-bpe-s0",
                                    "config": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}}
    validate_config(config)
    config["models"]["gpt2-bpe-s0"]["tokenizer"] = "bert-bpe"
    assert "depends on itself" in problems_of(config)
