"""Fine-tuning (reproducibility, freezing, epochs, scores) and the truncation / skipping consistency properties."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from reprsim.io.datasets import load_split, read_meta
from reprsim.io.provenance import hash_directory
from reprsim.nets.classifiers import classification_scores, evaluate, head_logits
from reprsim.nets.loading import load_classifier, load_tokenizer
from reprsim.stages.extract.activations import extract_activations
from reprsim.stages.finetune import truncation as truncation_module
from reprsim.stages.finetune.evaluation import evaluation_setup
from reprsim.stages.finetune.skip import skip_spans
from reprsim.nets.training import epoch_batches
from reprsim.stages.finetune.training import finetune_model
from reprsim.nets.heads import stored_head_rows
from reprsim.stages.finetune.truncation import train_head, truncation
from reprsim.workflow.plan import training_steps

NO_HEADS = None

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
    table = truncation(directory, None, tiny_dataset, "validation", 7, torch.device("cpu"), heads=NO_HEADS)
    for metric in ("accuracy", "matthews_correlation"):
        rows = table[table["metric"] == metric]
        untuned = rows[rows["mode"] == "UNTUNED"].set_index("layer")["value"]
        full = rows[rows["mode"] == "FULL"]["value"].item()
        assert len(untuned) == meta["n_layers"] + 1
        assert untuned.iloc[-1] == full
        assert full == pytest.approx(meta[f"validation_{metric}"])
    model = load_classifier(directory, torch.device("cpu"))
    scores = evaluate(model, load_tokenizer(directory), load_split(tiny_dataset, "validation"), 5, 24, "cpu")
    assert scores["accuracy"] == table.query("mode == 'FULL' and metric == 'accuracy'")["value"].item()
    # the majority baseline predicts the train split's most frequent class
    train, validation = load_split(tiny_dataset, "train"), load_split(tiny_dataset, "validation")
    majority = table.query("mode == 'MAJORITY' and metric == 'accuracy'")["value"].item()
    assert majority == pytest.approx((validation["label"] == train["label"].mode().min()).mean())
    assert table.query("mode == 'MAJORITY' and metric == 'matthews_correlation'")["value"].item() == 0


def test_head_on_each_layer_matches_a_truncated_model(tuned, tiny_dataset):
    """UNTUNED at layer l equals the model with its blocks above l removed."""
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


def test_a_batch_larger_than_the_train_split_is_refused_before_loading_the_model(tiny_dataset, tmp_path):
    missing_model = tmp_path / "no-model-here"
    with pytest.raises(ValueError, match="fewer than batch_size 100000"):
        finetune_model("x", {**SPEC, "batch_size": 100_000}, missing_model, tiny_dataset, tmp_path / "x",
                       torch.device("cpu"))


def test_freezing_more_blocks_than_exist_is_refused(tiny_models, tiny_dataset, tmp_path):
    with pytest.raises(ValueError, match="only 2 blocks"):
        finetune_model("x", {**SPEC, "freeze": {"top": 3}}, tiny_models["bert"], tiny_dataset, tmp_path / "x",
                       torch.device("cpu"))


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_skipping_nothing_is_the_full_model_and_spans_are_complete(tuned, tiny_dataset, family):
    directory, meta = tuned[family]
    table = skip_spans(directory, tiny_dataset, "validation", 7, torch.device("cpu"))
    table = table[table["metric"] == "accuracy"]
    depth = meta["n_layers"]
    assert len(table) == 1 + depth * (depth + 1) // 2
    nothing = table[(table["start"] == 0)]["value"].item()
    assert nothing == pytest.approx(meta["validation_accuracy"])


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_continuing_from_the_full_models_stream_gives_the_shortened_models_logits(tuned, tiny_dataset, family):
    """skip_spans continues the model after a span from the full model's stream before it: every span's logits are
    those of the model with the span's blocks removed from its block list, to the bit."""
    from reprsim.nets.classifiers import eval_batches, set_blocks, transformer_blocks
    from reprsim.nets.streams import continued_from, model_inputs, streams_and_output
    from reprsim.stages.finetune.evaluation import evaluation_setup

    frame, tokenizer, model, max_length = evaluation_setup(tuned[family][0], tiny_dataset, "validation",
                                                           torch.device("cpu"))
    blocks = transformer_blocks(model)
    depth = len(blocks)
    with torch.inference_mode():
        for batch in eval_batches(tokenizer, frame, 7, max_length, torch.device("cpu")):
            streams, full = streams_and_output(model, batch, range(depth))
            assert torch.equal(full.logits, model(**model_inputs(batch)).logits)
            for start in range(1, depth + 1):
                for end in range(start, depth + 1):
                    with continued_from(model, end) as state:
                        state.stream = streams[start - 1]
                        continued = model(**model_inputs(batch)).logits
                    set_blocks(model, torch.nn.ModuleList(
                        [b for index, b in enumerate(blocks, start=1) if not start <= index <= end]))
                    shortened = model(**model_inputs(batch)).logits
                    set_blocks(model, blocks)
                    assert torch.equal(continued, shortened), (start, end)


def test_skipping_the_top_blocks_equals_untuned_truncation(tuned, tiny_dataset):
    """Skipping blocks l+1..L feeds layer l to the head: the UNTUNED truncation value at l (BERT)."""
    directory, meta = tuned["bert"]
    skip = skip_spans(directory, tiny_dataset, "validation", 7, torch.device("cpu")).query("metric == 'accuracy'")
    truncated = truncation(directory, None, tiny_dataset, "validation", 7, torch.device("cpu"), heads=NO_HEADS)
    untuned = truncated.query("mode == 'UNTUNED' and metric == 'accuracy'").set_index("layer")["value"]
    depth = meta["n_layers"]
    for layer in range(depth):
        top = skip[(skip["start"] == layer + 1) & (skip["end"] == depth)]["value"].item()
        assert top == pytest.approx(untuned[layer])


def test_tuned_heads_train_only_the_head(tuned, tiny_models, tiny_dataset):
    """TUNED and TUNEDORIG: one fresh head per layer; the encoders' weights are untouched."""
    directory, meta = tuned["bert"]
    before = {name: hash_directory(path) for name, path in (("tuned", directory), ("base", tiny_models["bert"]))}
    table = truncation(directory, tiny_models["bert"], tiny_dataset, "validation", 7, torch.device("cpu"),
                       heads={"epochs": 2, "max_train_examples": 30})
    assert {name: hash_directory(path) for name, path in (("tuned", directory), ("base", tiny_models["bert"]))} == before
    for mode in ("TUNED", "TUNEDORIG"):
        curve = table.query("mode == @mode and metric == 'accuracy'")
        assert sorted(curve["layer"]) == list(range(meta["n_layers"] + 1))
        assert curve["value"].between(0, 1).all()
    assert (table["n_train_heads"] == 30).all()
    again = truncation(directory, tiny_models["bert"], tiny_dataset, "validation", 7, torch.device("cpu"),
                       heads={"epochs": 2, "max_train_examples": 30})
    assert again["value"].tolist() == table["value"].tolist()  # reproducible from the model's seed


def activation_store(model_dir, dataset_dir, out, **options):
    """The extract stage's store of a model on the tiny dataset, as the workflow writes it (its own batches:
    5 rows, sorted by length, where the truncation's are 7)."""
    settings = {"splits": ["train", "validation"], "batch_size": 5, "max_length": SPEC["max_length"],
                "tokens": False} | options
    extract_activations(model_dir, dataset_dir, out, **settings, provenance={
        "model_hash": read_meta(model_dir)["content_hash"], "dataset_hash": read_meta(dataset_dir)["content_hash"]})
    return out


def without_token_types(model_dir, out):
    """A copy of a model whose tokenizer gives no token type ids, as GPT-2's own does (the tiny GPT-2 borrows
    MiniLM's WordPiece, which gives them, and GPT-2 adds their embedding: the extract stage feeds none)."""
    shutil.copytree(model_dir, out)
    config = out / "tokenizer_config.json"
    names = {"model_input_names": ["input_ids", "attention_mask"]}
    config.write_text(json.dumps(json.loads(config.read_text()) | names))
    return out


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_head_inputs_read_from_the_stores_give_the_forward_passes_table(tuned, tiny_models, tiny_dataset, tmp_path,
                                                                        family, monkeypatch):
    """The evaluation rows' head inputs of the fine-tuned model and its base read from their activation stores
    (first token; GPT-2: last real token, final LayerNorm below the top) give the table of the forward passes,
    and the encoders run only on the heads' train rows."""
    directory, base = tuned[family][0], tiny_models[family]
    if family == "gpt2":
        directory = without_token_types(directory, tmp_path / "tuned")
        base = without_token_types(base, tmp_path / "base")
    heads = {"epochs": 2, "max_train_examples": 30}
    forward = truncation(directory, base, tiny_dataset, "validation", 7, torch.device("cpu"), heads=heads)
    passes, run = [], truncation_module.layer_head_inputs
    monkeypatch.setattr(truncation_module, "layer_head_inputs",
                        lambda encoder, tokenizer, frame, *rest: passes.append(len(frame)) or run(encoder, tokenizer,
                                                                                                  frame, *rest))
    stored = truncation(directory, base, tiny_dataset, "validation", 7, torch.device("cpu"), heads=heads,
                        store=activation_store(directory, tiny_dataset, tmp_path / "tuned.zarr"),
                        base_store=activation_store(base, tiny_dataset, tmp_path / "base.zarr"))
    assert passes == [30, 30]  # TUNED's and TUNEDORIG's train rows; no evaluation row
    pd.testing.assert_frame_equal(stored, forward)


@pytest.mark.parametrize("family, options, reason", [
    ("bert", {"max_examples": 10}, "not every row of split validation"),
    ("bert", {"splits": ["train"]}, "no split validation"),
    ("bert", {"max_length": 16}, "max_length 16, not 24"),
    ("bert", {"dtype": "float16"}, "stored as float16"),
    ("bert", {"poolings": ["mean", "last"]}, "no cls pooling"),
    ("gpt2", {}, "token types the store's passes lack"),
])
def test_a_store_that_does_not_hold_the_head_inputs_exactly_is_passed_by(tuned, tiny_dataset, tmp_path, capsys,
                                                                         family, options, reason):
    directory, _ = tuned[family]
    store = activation_store(directory, tiny_dataset, tmp_path / "other.zarr", **options)
    frame, tokenizer, model, max_length = evaluation_setup(directory, tiny_dataset, "validation", torch.device("cpu"))
    assert stored_head_rows(store, model.config, tokenizer, directory, tiny_dataset, "validation", frame,
                            max_length) is None
    assert reason in capsys.readouterr().out


def test_another_models_store_is_passed_by_and_the_forward_pass_runs(tuned, tiny_models, tiny_dataset, tmp_path,
                                                                     capsys):
    directory, _ = tuned["bert"]
    base_store = activation_store(tiny_models["bert"], tiny_dataset, tmp_path / "base.zarr")
    table = truncation(directory, None, tiny_dataset, "validation", 7, torch.device("cpu"), store=base_store)
    assert "another model's store" in capsys.readouterr().out
    pd.testing.assert_frame_equal(table, truncation(directory, None, tiny_dataset, "validation", 7,
                                                    torch.device("cpu")))


def test_a_fresh_head_learns_from_fixed_features():
    """train_head optimises only its own parameters, and it can fit a separable problem."""
    rng = np.random.default_rng(0)
    features = torch.tensor(rng.normal(size=(400, 8)), dtype=torch.float32)
    labels = (features[:, 0] + 0.5 * features[:, 3] > 0).long()
    frozen = features.clone()
    head = train_head(features, labels, 2, {"epochs": 20, "learning_rate": 3e-3}, seed=0, dropout=0.0)
    assert torch.equal(features, frozen)
    with torch.no_grad():
        accuracy = (head(features).argmax(-1) == labels).float().mean().item()
    assert accuracy > 0.95


def test_a_fresh_head_is_not_blinded_by_large_feature_dimensions():
    """Pretrained layers carry a few huge dimensions; the head standardises its inputs, so such a
    dimension (no signal) leaves what it learns with the default settings unchanged."""
    rng = np.random.default_rng(1)
    features = rng.normal(scale=0.1, size=(2000, 16))
    labels = torch.tensor((features[:, 0] - features[:, 2] > 0).astype(np.int64))
    outlier = features.copy()
    outlier[:, 5] = -8.0 + 30 * features[:, 5]  # mean -8, sd 3, as MiniLM's lower layers have

    def accuracy(X):
        X = torch.tensor(X, dtype=torch.float32)
        head = train_head(X[:1500], labels[:1500], 2, {}, seed=0)
        with torch.no_grad():
            return (head(X[1500:]).argmax(-1) == labels[1500:]).float().mean().item()

    assert accuracy(features) > 0.7
    assert accuracy(outlier) == pytest.approx(accuracy(features), abs=1e-6)


def test_matthews_correlation_matches_its_definition():
    labels = np.array([1, 1, 1, 0, 0, 1, 0, 1])
    predictions = np.array([1, 0, 1, 0, 1, 1, 0, 1])
    tp, tn, fp, fn = 4, 2, 1, 1
    expected = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    scores = classification_scores(predictions, labels)
    assert scores["matthews_correlation"] == pytest.approx(expected)
    assert scores["accuracy"] == pytest.approx(6 / 8)
    assert classification_scores(labels, labels)["matthews_correlation"] == pytest.approx(1.0)
    assert classification_scores(np.ones(8, int), labels)["matthews_correlation"] == 0.0
    # three classes: Gorodkin's R_K equals Pearson's correlation of the one-hot codes
    labels3 = np.array([0, 1, 2, 2, 1, 0, 2, 1, 0, 0])
    predictions3 = np.array([0, 2, 2, 2, 1, 0, 1, 1, 0, 2])
    onehot = lambda v: np.eye(3)[v]  # noqa: E731
    x, y = onehot(predictions3) - onehot(predictions3).mean(0), onehot(labels3) - onehot(labels3).mean(0)
    pearson = (x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum())
    assert classification_scores(predictions3, labels3)["matthews_correlation"] == pytest.approx(pearson)


def test_epochs_set_the_number_of_steps():
    assert training_steps({"steps": 7, "batch_size": 8}, 100) == 7
    assert training_steps({"steps": None, "epochs": 2, "batch_size": 8}, 100) == 25
    assert training_steps({"steps": None, "epochs": None, "batch_size": 8}, 100) == 300


@pytest.mark.parametrize("group_by_length", [False, True])
def test_an_epoch_visits_distinct_rows_in_full_batches(group_by_length):
    lengths = np.random.default_rng(0).integers(3, 60, size=1000)
    batches = epoch_batches(lengths, 32, np.random.default_rng(7), group_by_length)
    rows = np.concatenate(batches)
    assert len(batches) == 1000 // 32 and all(len(batch) == 32 for batch in batches)
    assert len(np.unique(rows)) == len(rows)
    again = epoch_batches(lengths, 32, np.random.default_rng(7), group_by_length)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))


def test_grouping_by_length_cuts_padding_and_still_shuffles():
    lengths = np.random.default_rng(0).integers(3, 60, size=3200)
    rng = np.random.default_rng(1)
    plain = epoch_batches(lengths, 32, rng, group_by_length=False)
    grouped = epoch_batches(lengths, 32, rng, group_by_length=True)
    padded = lambda batches: sum(len(batch) * lengths[batch].max() for batch in batches)
    assert padded(grouped) < 0.7 * padded(plain)
    # batches are not served shortest to longest: their maximum lengths are not sorted
    maxima = [lengths[batch].max() for batch in grouped]
    assert maxima != sorted(maxima) and maxima != sorted(maxima, reverse=True)
