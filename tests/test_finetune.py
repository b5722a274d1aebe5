"""Fine-tuning reproducibility and the UNTUNED truncation consistency properties."""

import pytest
import torch

from reprsim.data import load_split
from reprsim.finetune import accuracy, finetune_model, load_classifier, untuned_truncation
from reprsim.models import load_tokenizer
from reprsim.provenance import hash_directory

SPEC = {"source": "finetune", "base": "bert", "dataset": "tiny", "seed": 3, "steps": 6, "batch_size": 8,
        "learning_rate": 1e-3, "warmup_fraction": 0.1, "weight_decay": 0.01, "max_length": 24}


@pytest.fixture(scope="module")
def tuned(tiny_models, tiny_dataset, tmp_path_factory):
    root = tmp_path_factory.mktemp("tuned")
    out = {}
    for family in ("bert", "gpt2"):
        meta = finetune_model(f"ft-{family}", {**SPEC, "base": family}, tiny_models[family], tiny_dataset,
                              root / family, torch.device("cpu"))
        out[family] = (root / family, meta)
    return out


def test_same_seed_same_weights_and_accuracy(tuned, tiny_models, tiny_dataset, tmp_path):
    directory, meta = tuned["bert"]
    again = finetune_model("again", SPEC, tiny_models["bert"], tiny_dataset, tmp_path / "again", torch.device("cpu"))
    assert again["content_hash"] == meta["content_hash"]
    assert again["validation_accuracy"] == meta["validation_accuracy"]
    other = finetune_model("other", {**SPEC, "seed": 4}, tiny_models["bert"], tiny_dataset, tmp_path / "other",
                           torch.device("cpu"))
    assert other["content_hash"] != meta["content_hash"]


def test_training_changed_the_encoder_and_logged_loss(tuned, tiny_models):
    directory, meta = tuned["bert"]
    assert (directory / "training_log.csv").read_text().count("\n") == SPEC["steps"] + 1
    assert meta["parent"] == "bert" and meta["seed"] == 3 and 0 <= meta["validation_accuracy"] <= 1
    assert hash_directory(directory) != hash_directory(tiny_models["bert"])


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_untuned_last_layer_equals_full_model(tuned, tiny_dataset, family):
    directory, meta = tuned[family]
    table = untuned_truncation(directory, tiny_dataset, "validation", 7, torch.device("cpu"))
    untuned = table[table["mode"] == "UNTUNED"].set_index("layer")["value"]
    full = table[table["mode"] == "FULL"]["value"].item()
    assert len(untuned) == meta["n_layers"] + 1
    assert untuned.iloc[-1] == full
    assert full == pytest.approx(meta["validation_accuracy"])
    model = load_classifier(directory, torch.device("cpu"))
    assert full == accuracy(model, load_tokenizer(directory), load_split(tiny_dataset, "validation"), 5, 24, "cpu")
    majority = table[table["mode"] == "MAJORITY"]["value"].item()
    assert 0.5 <= majority <= 1


def test_head_on_each_layer_matches_a_truncated_model(tuned, tiny_dataset):
    """UNTUNED at layer l equals the model with its blocks above l removed."""
    from reprsim.finetune import head_logits

    directory, _ = tuned["bert"]
    model = load_classifier(directory, torch.device("cpu"))
    tokenizer = load_tokenizer(directory)
    batch = tokenizer(["the plot was not dull.", "the cast felt wonderful."], padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch, output_hidden_states=True).hidden_states
        model.bert.encoder.layer = model.bert.encoder.layer[:1]
        truncated = model(**batch).logits
        via_head = head_logits(model, hidden[1], batch["attention_mask"], 1)
    torch.testing.assert_close(via_head, truncated)


@pytest.mark.parametrize("side", ["bottom", "top"])
def test_freezing_really_freezes(tiny_models, tiny_dataset, tmp_path, side):
    """Frozen parameters come out bit-identical to the base model; the others moved."""
    from transformers import AutoModelForSequenceClassification

    meta = finetune_model("frozen", {**SPEC, "freeze": {side: 1}}, tiny_models["bert"], tiny_dataset,
                          tmp_path / "frozen", torch.device("cpu"))
    base = dict(AutoModelForSequenceClassification.from_pretrained(tiny_models["bert"]).named_parameters())
    tuned = dict(AutoModelForSequenceClassification.from_pretrained(tmp_path / "frozen").named_parameters())
    frozen_block = "bert.encoder.layer.0." if side == "bottom" else "bert.encoder.layer.1."
    moving_block = "bert.encoder.layer.1." if side == "bottom" else "bert.encoder.layer.0."
    for name, parameter in tuned.items():
        if name.startswith(frozen_block) or (side == "bottom" and name.startswith("bert.embeddings.")):
            assert torch.equal(parameter, base[name]), name
    assert any(not torch.equal(p, base[n]) for n, p in tuned.items() if n.startswith(moving_block))
    assert meta["frozen_parameters"] > 0


def test_freezing_more_blocks_than_exist_is_refused(tiny_models, tiny_dataset, tmp_path):
    with pytest.raises(ValueError, match="only 2 blocks"):
        finetune_model("x", {**SPEC, "freeze": {"top": 3}}, tiny_models["bert"], tiny_dataset, tmp_path / "x",
                       torch.device("cpu"))


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_skipping_nothing_is_the_full_model_and_spans_are_complete(tuned, tiny_dataset, family):
    from reprsim.finetune import skip_spans

    directory, meta = tuned[family]
    table = skip_spans(directory, tiny_dataset, "validation", 7, torch.device("cpu"))
    depth = meta["n_layers"]
    assert len(table) == 1 + depth * (depth + 1) // 2
    nothing = table[(table["start"] == 0)]["value"].item()
    assert nothing == pytest.approx(meta["validation_accuracy"])


def test_skipping_the_top_blocks_equals_untuned_truncation(tuned, tiny_dataset):
    """Skipping blocks l+1..L feeds layer l to the head: the UNTUNED truncation value at l (BERT)."""
    from reprsim.finetune import skip_spans

    directory, meta = tuned["bert"]
    skip = skip_spans(directory, tiny_dataset, "validation", 7, torch.device("cpu"))
    truncation = untuned_truncation(directory, tiny_dataset, "validation", 7, torch.device("cpu"))
    untuned = truncation[truncation["mode"] == "UNTUNED"].set_index("layer")["value"]
    depth = meta["n_layers"]
    for layer in range(depth):
        top = skip[(skip["start"] == layer + 1) & (skip["end"] == depth)]["value"].item()
        assert top == pytest.approx(untuned[layer])
