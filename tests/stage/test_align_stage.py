"""The aligner stage over activation stores: layer pairing, tidy tables, and layer injection."""

import numpy as np
import pytest
import torch

from reprsim.io.datasets import load_split
from reprsim.nets.classifiers import evaluate
from reprsim.nets.loading import load_classifier, load_tokenizer
from reprsim.stages.align.injection import layer_injection
from reprsim.stages.align.layers import align_layers, synthetic_table
from reprsim.stages.extract.activations import extract_activations
from reprsim.stages.finetune.training import finetune_model
from reprsim.tables.layers import layer_pairs

SPLITS = {"fit": "train", "select": "validation", "score": "test"}
FAST = {"linear": ("linear", {"ridge": [0.0, 1e-2, 1.0]}), "cca": ("cca", {"pca_dims": 6})}
SPEC = {"source": "finetune", "base": "bert", "dataset": "tiny", "steps": 8, "batch_size": 8,
        "learning_rate": 1e-3, "warmup_fraction": 0.1, "weight_decay": 0.01, "max_length": 24}


def _store(model_dir, dataset, path, name):
    extract_activations(model_dir, dataset, path, splits=["train", "validation", "test"], batch_size=8,
                        max_length=24, provenance={"model": name, "dataset": "tiny"})
    return path


@pytest.fixture(scope="module")
def stores(tiny_models, tiny_dataset, tmp_path_factory):
    root = tmp_path_factory.mktemp("align-stores")
    return {name: _store(tiny_models[name], tiny_dataset, root / f"{name}.zarr", name) for name in ("bert", "gpt2")}


def test_layer_pairs_follow_relative_depth():
    assert layer_pairs(2, 4, "matching") == [(0, 0), (1, 2), (2, 4)]
    assert layer_pairs(4, 2, "matching") == [(0, 0), (2, 1), (4, 2)]
    assert len(layer_pairs(2, 3, "all")) == 3 * 4


def test_align_layers_is_tidy_and_scores_the_configured_splits(stores):
    table, examples = align_layers(stores["bert"], stores["gpt2"], "mean", FAST, SPLITS)
    pairs = layer_pairs(2, 3, "matching")
    assert len(table) == len(pairs) * len(FAST) * 2 * 2  # layer pairs x aligners x directions x (fit, score)
    assert set(table["role"]) == {"fit", "score"} and set(table["split"]) == {"train", "test"}
    assert set(table["direction"]) == {"a->b", "b->a"}
    assert set(zip(table["layer_a"], table["layer_b"])) == set(pairs)
    assert (table["rel_error"] >= 0).all() and table["n"].isin([40, 20]).all()
    # every held-out example's error, from which the score split's rel_error is recomputed exactly
    cell = ["layer_a", "layer_b", "direction", "aligner"]
    assert set(examples["role"]) == {"score"} and len(examples) == len(pairs) * len(FAST) * 2 * 20
    sums = examples.groupby(cell)[["sq_error", "target_sq"]].sum()
    scored = table[table["role"] == "score"].set_index(cell)["rel_error"]
    assert np.sqrt(sums["sq_error"] / sums["target_sq"]).loc[scored.index].to_numpy() == pytest.approx(
        scored.to_numpy(), rel=1e-10)


def test_synthetic_table_names_layers_from_the_top(stores):
    table = synthetic_table(stores["bert"], "mean", [-1], {"linear": FAST["linear"]}, SPLITS, [0, 1])
    assert set(table["layer"]) == {2} and set(table["map_seed"]) == {0, 1}
    assert set(table["split"]) == {"test"}
    with pytest.raises(ValueError, match="does not exist"):
        synthetic_table(stores["bert"], "mean", [5], {"linear": FAST["linear"]}, SPLITS, [0])


def test_injection_reference_rows(tiny_models, tiny_dataset, tmp_path):
    """The target's head on its own stored representation reproduces the fine-tuned model's test accuracy."""
    directories, stores = {}, {}
    for seed in (1, 2):
        name = f"ft{seed}"
        directories[name] = tmp_path / name
        finetune_model(name, {**SPEC, "seed": seed}, tiny_models["bert"], tiny_dataset, directories[name],
                       torch.device("cpu"))
        stores[name] = _store(directories[name], tiny_dataset, tmp_path / f"{name}.zarr", name)
    stores["bert"] = _store(tiny_models["bert"], tiny_dataset, tmp_path / "bert.zarr", "bert")
    table = layer_injection(stores, "ft1", "ft2", directories["ft2"], "bert", FAST, SPLITS, seed=0)
    accuracy = table[table["metric"] == "accuracy"].set_index("method")["value"]
    assert list(accuracy.index) == ["target model", "linear", "cca", "random embedding", "random label"]
    model = load_classifier(directories["ft2"], torch.device("cpu"))
    test = load_split(tiny_dataset, "test")
    own = evaluate(model, load_tokenizer(directories["ft2"]), test, 8, 24, "cpu")["accuracy"]
    assert accuracy["target model"] == pytest.approx(own)
    assert accuracy.between(0, 1).all() and (table["n"] == len(test)).all()
    assert np.isfinite(table[table["method"] == "linear"]["rel_error"]).all()
