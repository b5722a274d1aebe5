"""Pretraining a small causal LM from scratch (source pretrain) on the packaged SST-2 sample, offline: it learns
(training loss falls, held-out cross-entropy beats the unigram chance level), is seeded to the bit, records its
activation, loads as an encoder (extraction) and as a causal LM; and the text packing it trains on. A masked LM
(objective masked) in the same GPT-2 blocks, attending both ways, learns too and loads alike, its attention still
bidirectional after a load; the BERT of the same sizes (blocks bert) builds, loads and is extracted; the masking
has BERT's statistics; a checkpoint holds the weights of the run stopped at its step and leaves the run
undisturbed."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    BertForMaskedLM,
    BertModel,
    GPT2LMHeadModel,
    GPT2Model,
)

from reprsim.io.datasets import read_meta
from reprsim.io.store import open_store
from reprsim.io.verify import check_model
from reprsim.nets.language_models import (
    IGNORED,
    lm_cross_entropy,
    mask_tokens,
    masked_lm_cross_entropy,
    text_blocks,
    texts_of,
    unigram_cross_entropy,
)
from reprsim.nets.loading import load_causal_lm, load_encoder, load_tokenizer, open_tokenizer
from reprsim.stages.extract.activations import TruncationWarning, extract_activations
from reprsim.stages.models.checkpoints import copy_checkpoint
from reprsim.stages.models.materialize import init_model
from reprsim.stages.models.pretrain import VALIDATION_MASK_SEED, bert_overrides, gpt2_overrides, pretrain_model
from reprsim.workflow import resources

CPU = torch.device("cpu")
VOCAB = 600
# 400 steps of 16 blocks of 32 tokens (2.1 passes over the 2,985 train blocks): about 5 s on 2 cores. The
# held-out cross-entropy then lies ~0.5 nats below the unigram chance level (4.87 against 5.39 nats/token)
SPEC = {"source": "pretrain", "dataset": "sst2", "architecture": "gpt2", "activation": "gelu",
        "tokenizer": {"train": {"dataset": "sst2", "vocab_size": VOCAB, "seed": 0, "max_texts": None,
                                "min_frequency": 2}},
        "config": {"n_embd": 32, "n_layer": 2, "n_head": 2}, "context": 32, "steps": 400, "batch_size": 16,
        "learning_rate": 3.0e-3, "warmup_fraction": 0.1, "weight_decay": 0.01, "max_grad_norm": 1.0, "seed": 0}


@pytest.fixture(scope="module")
def sst2(sst2_sample):
    return sst2_sample


@pytest.fixture(scope="module")
def pretrained(sst2, tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "gpt-s0"
    return out, pretrain_model("gpt-s0", SPEC, sst2, out, CPU)


def short(seed: int = 0, **changes) -> dict:
    """A 20-step run that borrows the pretrained model's tokenizer (no BPE to train again)."""
    return {**SPEC, "tokenizer": "gpt-s0", "steps": 20, "seed": seed, **changes}


# A masked LM leaves the unigram plateau later than a causal one: 600 steps of a 64-wide, 2-block GPT-2 attending
# both ways, without dropout (about 9 s on 2 cores), end ~0.35 nats below the unigram reference of the masked
# tokens (5.09 against 5.45), where SPEC's 32-wide model at 400 steps ends ~0.1 below. Its tokenizer, gpt-s0's
# BPE, has no mask token. The BERT of the same sizes (blocks bert) is built and trained for a few steps only.
MASKED = {**SPEC, "tokenizer": "gpt-s0", "objective": "masked", "mask_probability": 0.15, "steps": 600,
          "config": {"n_embd": 64, "n_layer": 2, "n_head": 2, "resid_pdrop": 0.0, "attn_pdrop": 0.0, "embd_pdrop": 0.0},
          "checkpoints": [300]}
MASKED_BERT = {**MASKED, "blocks": "bert", "steps": 20, "checkpoints": []}


@pytest.fixture(scope="module")
def masked(pretrained, sst2, tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "mlm-s0"
    return out, pretrain_model("mlm-s0", MASKED, sst2, out, CPU, tokenizer_dir=pretrained[0])


@pytest.fixture(scope="module")
def masked_bert(pretrained, sst2, tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "bert-mlm-s0"
    return out, pretrain_model("bert-mlm-s0", MASKED_BERT, sst2, out, CPU, tokenizer_dir=pretrained[0])


# ----------------------------------------------------------------- training


def test_training_loss_falls_and_is_logged(pretrained):
    out, meta = pretrained
    log = pd.read_csv(out / "training_log.csv")
    assert list(log["step"]) == list(range(1, SPEC["steps"] + 1))
    assert log["loss"].tail(5).mean() < log["loss"].head(5).mean() - 1.0
    assert meta["final_loss"] == log["loss"].iloc[-1]
    assert log["learning_rate"].iloc[-1] < log["learning_rate"].max()  # warmed up, then decayed


def test_held_out_cross_entropy_beats_the_unigram_chance_level(pretrained):
    _, meta = pretrained
    vocab = meta["vocab_size"]
    assert vocab <= VOCAB and meta["tokenizer_trained"]["vocab_size_obtained"] == vocab
    # the chance reference itself is informative: unigram frequencies beat a uniform guess
    assert meta["unigram_cross_entropy"] < math.log(vocab) - 0.5
    # ... and the model, which sees context, beats them on held-out text by a clear margin
    assert meta["validation_cross_entropy"] < meta["unigram_cross_entropy"] - 0.2
    assert meta["validation_tokens"] == meta["validation_blocks"] * (SPEC["context"] - 1)


def test_meta_records_the_run(pretrained, sst2):
    out, meta = pretrained
    assert read_meta(out) == meta
    assert meta["source"] == "pretrain" and meta["parent"] is None and meta["seed"] == 0
    assert meta["dataset"] == "sst2" and meta["dataset_hash"] == read_meta(sst2)["content_hash"]
    assert meta["architecture"] == "gpt2" and meta["n_layers"] == 2 and meta["hidden_size"] == 32
    assert meta["tokenizer_from"] == "trained on sst2" and meta["context"] == meta["n_positions"] == 32
    assert meta["tokens_per_step"] == 16 * 32 and meta["epochs"] == round(400 * 16 / meta["train_blocks"], 3)
    assert meta["spec"] == SPEC and meta["activation"] == "gelu"
    assert check_model(out) == []  # what `reprsim verify` checks: files, checksums


def test_the_same_seed_gives_bit_identical_weights(pretrained, sst2, tmp_path):
    made = {name: pretrain_model(name, short(seed), sst2, tmp_path / name, CPU, tokenizer_dir=pretrained[0])
            for name, seed in (("a", 0), ("b", 0), ("c", 1))}
    weights = {name: load_file(tmp_path / name / "model.safetensors") for name in made}
    assert weights["a"].keys() == weights["b"].keys()
    assert all(torch.equal(weights["a"][key], weights["b"][key]) for key in weights["a"])
    assert made["a"]["content_hash"] == made["b"]["content_hash"] != made["c"]["content_hash"]
    assert made["a"]["validation_cross_entropy"] == made["b"]["validation_cross_entropy"]
    assert made["a"]["tokenizer_from"] == "gpt-s0"


def test_the_activation_is_recorded_in_the_config(pretrained, sst2, tmp_path):
    pretrain_model("relu", short(activation="relu", steps=2), sst2, tmp_path / "relu", CPU, tokenizer_dir=pretrained[0])
    for directory, expected in ((pretrained[0], "gelu"), (tmp_path / "relu", "relu")):
        assert AutoModel.from_pretrained(directory).config.activation_function == expected
        assert read_meta(directory)["activation"] == expected


# ----------------------------------------------------------------- loading and extraction


def test_it_loads_as_encoder_and_as_causal_lm(pretrained, sst2):
    out, meta = pretrained
    encoder = load_encoder(out, CPU)
    causal = load_causal_lm(out, CPU)
    assert type(encoder) is GPT2Model and type(causal) is GPT2LMHeadModel
    assert type(AutoModelForCausalLM.from_pretrained(out)) is GPT2LMHeadModel
    # the encoder is the causal LM's transformer, weight for weight
    for name, tensor in encoder.state_dict().items():
        assert torch.equal(tensor, causal.transformer.state_dict()[name]), name
    tokenizer = open_tokenizer(out)
    blocks = text_blocks(tokenizer, texts_of(sst2, "validation"), SPEC["context"])
    # in the run's batches: the same computation (other batches sum the float32 losses in another order)
    again, count = lm_cross_entropy(causal, blocks, SPEC["batch_size"], CPU)
    assert count == meta["validation_tokens"] and again == pytest.approx(meta["validation_cross_entropy"], abs=1e-6)


def test_extraction_reads_the_pretrained_model(pretrained, sst2, tmp_path):
    out, meta = pretrained
    # n_positions = context: extraction stops at the positions the model was trained on, and says so
    with pytest.warns(TruncationWarning, match="longer than max_length 32 tokens"):
        extract_activations(out, sst2, tmp_path / "s.zarr", splits=["test"], max_examples=24, batch_size=8,
                            max_length=64, chunk_tokens=64)
    store = open_store(tmp_path / "s.zarr")
    assert store.attrs["n_layers"] == 2 and store.attrs["hidden_size"] == 32
    hidden = store["pooled/mean"][:]
    assert hidden.shape == (3, 24, 32) and np.isfinite(hidden).all()
    assert store["tokens/input_ids"][:].max() < meta["vocab_size"]


# ----------------------------------------------------------------- refusals


def test_config_the_spec_sets_elsewhere_is_refused():
    with pytest.raises(ValueError, match="config.vocab_size"):
        gpt2_overrides("m", {**SPEC, "config": {"vocab_size": 10}})
    with pytest.raises(ValueError, match="n_positions = 16 is below context = 32"):
        gpt2_overrides("m", {**SPEC, "config": {"n_positions": 16}})
    assert gpt2_overrides("m", SPEC) == {"n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 32,
                                         "activation_function": "gelu"}
    assert gpt2_overrides("m", {**SPEC, "config": {"max_position_embeddings": 64}})["max_position_embeddings"] == 64


def test_a_tokenizer_trained_on_another_dataset_needs_its_directory(sst2, tmp_path):
    spec = {**SPEC, "tokenizer": {"train": {"dataset": "other", "vocab_size": VOCAB}}}
    with pytest.raises(ValueError, match="tokenizer_dataset_dir"):
        pretrain_model("m", spec, sst2, tmp_path / "m", CPU)
    with pytest.raises(ValueError, match="tokenizer_dir"):
        pretrain_model("m", {**SPEC, "tokenizer": "minilm"}, sst2, tmp_path / "m", CPU)
    assert not (tmp_path / "m").exists()


# ----------------------------------------------------------------- packing and scoring


def test_text_blocks_pack_texts_with_eos_between_and_drop_the_remainder(pretrained):
    tokenizer = open_tokenizer(pretrained[0])
    eos = tokenizer.eos_token_id
    texts = ["a gorgeous , witty movie .", "dull .", "it is a film ."]
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    stream = [token for row in ids for token in (*row, eos)]  # no bos, no template: text then eos
    assert tokenizer.bos_token_id not in stream
    blocks = text_blocks(tokenizer, texts, 4)
    assert blocks.dtype == torch.long and blocks.shape == (len(stream) // 4, 4)
    assert blocks.reshape(-1).tolist() == stream[: len(stream) // 4 * 4]  # the remainder dropped
    assert text_blocks(tokenizer, texts, len(stream)).reshape(-1).tolist() == stream  # exactly one block
    with pytest.raises(ValueError, match="not even one block"):
        text_blocks(tokenizer, texts, len(stream) + 1)
    with pytest.raises(ValueError, match="no texts"):
        text_blocks(tokenizer, [], 4)
    with pytest.raises(ValueError, match="context"):
        text_blocks(tokenizer, texts, 1)


def test_text_blocks_without_an_eos_token_just_concatenate(minilm_dir):
    tokenizer = load_tokenizer(minilm_dir)  # BERT WordPiece: [CLS] / [SEP], no eos
    assert tokenizer.eos_token_id is None
    texts = ["a movie .", "another one ."]
    stream = [t for text in texts for t in tokenizer(text, add_special_tokens=False)["input_ids"]]
    assert text_blocks(tokenizer, texts, 2).reshape(-1).tolist() == stream[: len(stream) // 2 * 2]


def test_lm_cross_entropy_is_the_mean_next_token_loss(pretrained, sst2):
    model = load_causal_lm(pretrained[0], CPU)
    blocks = text_blocks(open_tokenizer(pretrained[0]), texts_of(sst2, "test")[:40], 16)
    value, count = lm_cross_entropy(model, blocks, 3, CPU)  # batches of 3: the last one shorter
    with torch.no_grad():
        expected = model(input_ids=blocks, labels=blocks).loss.item()  # transformers' shifted mean
    assert count == blocks.shape[0] * 15 and value == pytest.approx(expected, rel=1e-5)
    model.train()
    lm_cross_entropy(model, blocks, 8, CPU)
    assert model.training  # the mode is restored


def test_unigram_cross_entropy_by_hand():
    train = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 2]])  # counts 5, 2, 1, 0 of 4 tokens; +1 each over 12
    blocks = torch.tensor([[3, 0, 1], [2, 3, 3]])  # predicted: 0, 1, 3, 3
    p = {0: 6 / 12, 1: 3 / 12, 3: 1 / 12}
    expected = -(math.log(p[0]) + math.log(p[1]) + 2 * math.log(p[3])) / 4
    assert unigram_cross_entropy(train, blocks, 4) == pytest.approx(expected)


# ----------------------------------------------------------------- job resources


def test_the_resource_estimate_counts_the_parameters_exactly(pretrained):
    out, meta = pretrained
    facts = resources.pretrain_facts(SPEC, meta["vocab_size"])
    assert facts == {"n_parameters": meta["n_parameters"], "n_layers": 2, "hidden_size": 32,
                     "vocab_size": meta["vocab_size"]}
    wider = {**SPEC, "config": {"hidden_size": 48, "num_hidden_layers": 3, "n_head": 4, "n_inner": 100,
                                "n_positions": 40}}
    model = AutoModelForCausalLM.from_config(
        AutoModelForCausalLM.from_pretrained(out).config.__class__(vocab_size=321, **gpt2_overrides("w", wider)))
    assert resources.pretrain_facts(wider, 321)["n_parameters"] == sum(p.numel() for p in model.parameters())
    for attempt in (2, 3):
        for estimate in (lambda a: resources.pretrain_mem_mb(facts, SPEC, a),
                         lambda a: resources.minutes(resources.pretrain_seconds(facts, SPEC, 500), a)):
            assert abs(estimate(attempt) - attempt * estimate(1)) < attempt
    assert resources.minutes(resources.pretrain_seconds(facts, SPEC, 500), 1) == resources.MIN_MINUTES + 1  # a tiny model: the floor


# ----------------------------------------------------------------- masked language modelling


def test_a_masked_lm_beats_the_unigram_chance_level_of_its_masked_tokens(masked):
    out, meta = masked
    assert meta["objective"] == "masked" and meta["mask_probability"] == 0.15
    assert (meta["architecture"], meta["attention"]) == ("gpt2", "bidirectional")
    assert meta["validation_cross_entropy"] < meta["unigram_cross_entropy"] - 0.15
    # about 15% of the validation tokens (eos ones excepted) are scored
    assert 0.1 < meta["validation_tokens"] / (meta["validation_blocks"] * MASKED["context"]) < 0.16
    log = pd.read_csv(out / "training_log.csv")
    assert log["loss"].tail(20).mean() < log["loss"].head(20).mean() - 0.5
    # the job's resource estimate counts a masked LM's parameters exactly (the mask token included)
    assert resources.pretrain_facts(MASKED, meta["vocab_size"] - 1)["n_parameters"] == meta["n_parameters"]


def test_a_masked_lm_in_gpt2_blocks_attends_both_ways_after_every_load(masked, pretrained):
    """The masked LM is the causal LM's architecture (same parameter names and shapes); only its attention differs,
    and a load restores that: the first position's state depends on the last token, under both of transformers'
    attention implementations, which a causal model's never does."""
    (out, _), (causal_dir, _) = masked, pretrained
    tokenizer = open_tokenizer(out)
    ids = torch.tensor([tokenizer("a gorgeous , witty , seductive movie .")["input_ids"]])
    changed = ids.clone()
    changed[0, -2] = (changed[0, -2] + 1) % len(open_tokenizer(causal_dir))
    for directory, bidirectional in ((out, True), (causal_dir, False)):
        for attention in (False, True):  # SDPA, then eager (the attention measures' implementation)
            encoder = load_encoder(directory, CPU, attention=attention)
            assert type(encoder) is GPT2Model
            with torch.no_grad():
                first = [encoder(input_ids=x).last_hidden_state[0, 0] for x in (ids, changed)]
            assert (not torch.allclose(*first)) is bidirectional, (directory.name, attention)
    lm = load_causal_lm(out, CPU)
    assert type(lm) is GPT2LMHeadModel and all(
        not module.is_causal for module in lm.modules() if hasattr(module, "is_causal"))
    masked_names = {name: tuple(t.shape) for name, t in load_encoder(out, CPU).state_dict().items()}
    assert set(masked_names) == set(load_encoder(causal_dir, CPU).state_dict())


def test_a_masked_lm_gains_a_mask_token_and_tokenises_as_before(masked, pretrained, sst2):
    out, meta = masked
    tokenizer, borrowed = open_tokenizer(out), open_tokenizer(pretrained[0])
    assert meta["mask_token"] == tokenizer.mask_token == "<mask>" and meta["mask_token_added"]
    assert borrowed.mask_token is None and len(tokenizer) == len(borrowed) + 1 == meta["vocab_size"]
    assert tokenizer.mask_token_id == len(borrowed)  # the one new symbol, after the others
    texts = texts_of(sst2, "validation")[:50]
    assert tokenizer(texts)["input_ids"] == borrowed(texts)["input_ids"]  # BOS/EOS template included


def test_a_masked_lm_has_the_sizes_of_the_causal_lm_of_its_config(pretrained):
    tokenizer = open_tokenizer(pretrained[0])
    spec = {**SPEC, "config": {"n_embd": 48, "n_layer": 3, "n_head": 4, "n_inner": 100}, "activation": "gelu_new"}
    causal = init_model("gpt2", gpt2_overrides("c", spec), tokenizer, 0, auto_class=AutoModelForCausalLM).config
    bert = init_model("bert", bert_overrides("m", spec), tokenizer, 0, auto_class=AutoModelForMaskedLM).config
    assert (bert.hidden_size, bert.num_hidden_layers, bert.num_attention_heads, bert.intermediate_size,
            bert.max_position_embeddings) == (causal.n_embd, causal.n_layer, causal.n_head, causal.n_inner,
                                              causal.n_positions) == (48, 3, 4, 100, 32)
    assert (bert.hidden_act, bert.hidden_dropout_prob, bert.attention_probs_dropout_prob, bert.layer_norm_eps) == (
        causal.activation_function, causal.resid_pdrop, causal.attn_pdrop, causal.layer_norm_epsilon)
    assert bert_overrides("m", SPEC)["intermediate_size"] == 4 * 32  # GPT-2's MLP width, not BERT's 3072
    with pytest.raises(ValueError, match=r"models.m.config.use_cache: a masked LM \(a BERT\) has no such field"):
        bert_overrides("m", {**SPEC, "config": {"n_embd": 32, "use_cache": False}})
    with pytest.raises(ValueError, match="config.embd_pdrop: a BERT drops out its embeddings with the residual"):
        bert_overrides("m", {**SPEC, "config": {"embd_pdrop": 0.2}})


def test_a_masked_lm_loads_and_is_extracted(masked, sst2, tmp_path):
    out, meta = masked
    assert check_model(out) == [] and read_meta(out) == meta
    lm = load_causal_lm(out, CPU)
    tokenizer = open_tokenizer(out)
    blocks = text_blocks(tokenizer, texts_of(sst2, "validation"), MASKED["context"])
    inputs, labels = mask_tokens(blocks, 0.15, tokenizer.mask_token_id, tokenizer.all_special_ids, len(tokenizer),
                                 torch.Generator().manual_seed(VALIDATION_MASK_SEED))
    again, count = masked_lm_cross_entropy(lm, inputs, labels, MASKED["batch_size"], CPU)  # the run's batches
    assert count == meta["validation_tokens"] and again == pytest.approx(meta["validation_cross_entropy"], abs=1e-6)
    with pytest.warns(TruncationWarning):  # n_positions = context, as a causal LM's
        extract_activations(out, sst2, tmp_path / "s.zarr", splits=["test"], max_examples=24, batch_size=8,
                            max_length=64, chunk_tokens=64)
    store = open_store(tmp_path / "s.zarr")
    assert store.attrs["n_layers"] == 2 and store.attrs["hidden_size"] == 64
    assert store["pooled/mean"][:].shape == (3, 24, 64) and np.isfinite(store["pooled/mean"][:]).all()


def test_a_berts_masked_lm_builds_loads_and_is_extracted(masked_bert, sst2, tmp_path):
    out, meta = masked_bert
    assert (meta["architecture"], meta["attention"], meta["objective"]) == ("bert", "bidirectional", "masked")
    assert check_model(out) == [] and read_meta(out) == meta
    assert resources.pretrain_facts(MASKED_BERT, meta["vocab_size"] - 1)["n_parameters"] == meta["n_parameters"]
    assert type(load_encoder(out, CPU)) is BertModel and type(AutoModelForMaskedLM.from_pretrained(out)) is BertForMaskedLM
    with pytest.warns(TruncationWarning):
        extract_activations(out, sst2, tmp_path / "s.zarr", splits=["test"], max_examples=8, batch_size=8,
                            max_length=64, chunk_tokens=64)
    assert open_store(tmp_path / "s.zarr")["pooled/mean"][:].shape == (3, 8, 64)
    with pytest.raises(ValueError, match="models.c.blocks: 'bert'; a masked LM takes gpt2 or bert, a causal one gpt2"):
        pretrain_model("c", {**SPEC, "blocks": "bert"}, sst2, tmp_path / "c", CPU)


def test_masking_has_berts_statistics():
    vocab, mask_id, specials = 50, 49, [0, 1, 2, 49]  # e.g. BOS, EOS, PAD and the mask token
    ids = torch.randint(0, vocab - 1, (400, 500), generator=torch.Generator().manual_seed(1))  # 200k tokens
    inputs, labels = mask_tokens(ids, 0.15, mask_id, specials, vocab, torch.Generator().manual_seed(0))
    special = torch.isin(ids, torch.tensor(specials))
    selected = labels != IGNORED
    assert not (selected & special).any() and torch.equal(labels[selected], ids[selected])
    assert torch.equal(inputs[~selected], ids[~selected])
    n, k = int((~special).sum()), int(selected.sum())
    assert abs(k / n - 0.15) < 4 * math.sqrt(0.15 * 0.85 / n)
    masked = selected & (inputs == mask_id)
    kept = selected & (inputs == ids)
    replaced = selected & ~masked & ~kept
    candidates = vocab - len(specials)  # a drawn replacement equals the original 1 time in 46
    for count, share in ((masked, 0.8), (replaced, 0.1 * (1 - 1 / candidates)), (kept, 0.1 * (1 + 1 / candidates))):
        assert abs(int(count.sum()) / k - share) < 4 * math.sqrt(share * (1 - share) / k)
    assert not torch.isin(inputs[replaced], torch.tensor(specials)).any()
    # pure and seeded: the same generator state gives the same masks, another seed others
    again = mask_tokens(ids, 0.15, mask_id, specials, vocab, torch.Generator().manual_seed(0))
    other = mask_tokens(ids, 0.15, mask_id, specials, vocab, torch.Generator().manual_seed(1))
    assert torch.equal(again[0], inputs) and torch.equal(again[1], labels) and not torch.equal(other[1], labels)


def test_the_unigram_reference_of_chosen_targets():
    train = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 2]])  # counts 5, 2, 1, 0 of 4 tokens; +1 each over 12
    p = {0: 6 / 12, 1: 3 / 12, 3: 1 / 12}
    expected = -(math.log(p[0]) + math.log(p[3])) / 2
    assert unigram_cross_entropy(train, train, 4, targets=torch.tensor([0, 3])) == pytest.approx(expected)


# ----------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("objective", ["causal", "masked"])
def test_a_checkpoint_is_the_run_stopped_at_its_step(pretrained, sst2, tmp_path, objective):
    spec = short(objective=objective, mask_probability=0.15)
    runs = {"checkpointed": {**spec, "checkpoints": [8, 15]}, "stopped": spec, "plain": spec}
    made = {name: pretrain_model("m", runs[name], sst2, tmp_path / name, CPU, tokenizer_dir=pretrained[0],
                                 stop_after=8 if name == "stopped" else None) for name in runs}
    checkpoint = tmp_path / "checkpointed" / "checkpoints" / "8"
    weights = load_file(checkpoint / "model.safetensors")
    stopped = load_file(tmp_path / "stopped" / "model.safetensors")
    assert weights.keys() == stopped.keys() and all(torch.equal(weights[key], stopped[key]) for key in weights)
    meta = read_meta(checkpoint)
    assert meta["validation_cross_entropy"] == made["stopped"]["validation_cross_entropy"]
    assert meta["unigram_cross_entropy"] == made["stopped"]["unigram_cross_entropy"]
    assert meta["content_hash"] == made["stopped"]["content_hash"]
    assert meta["step"] == made["stopped"]["stopped_after"] == 8 and meta["steps"] == 20
    assert meta["name"] == "m@8" and meta["parent"] == "m" and meta["parent_spec"] == runs["checkpointed"]
    assert meta["spec"] == {**spec, "checkpoint": 8} and len(pd.read_csv(checkpoint / "training_log.csv")) == 8
    # saving the checkpoints leaves the run as it was: the final model is the plain run's, bit for bit
    assert made["checkpointed"]["content_hash"] == made["plain"]["content_hash"]
    assert made["checkpointed"]["checkpoints"] == [8, 15]
    assert sorted(p.name for p in (tmp_path / "checkpointed" / "checkpoints").iterdir()) == ["15", "8"]
    assert check_model(tmp_path / "checkpointed") == [] and check_model(checkpoint) == []
    assert not list(tmp_path.glob("*.tmp-*"))  # the staging directory is gone


def test_a_checkpoint_is_copied_out_as_a_model(pretrained, sst2, tmp_path):
    spec = {**short(), "checkpoints": [5]}
    pretrain_model("m", spec, sst2, tmp_path / "m", CPU, tokenizer_dir=pretrained[0])
    child = {**short(), "checkpoint": 5}
    meta = copy_checkpoint(tmp_path / "m", "m@5", child, tmp_path / "m@5")
    assert read_meta(tmp_path / "m@5") == meta and meta["step"] == 5
    assert check_model(tmp_path / "m@5") == [] and type(load_encoder(tmp_path / "m@5", CPU)) is GPT2Model
    with pytest.raises(ValueError, match="remake its pretrained model"):
        copy_checkpoint(tmp_path / "m", "m@5", {**child, "learning_rate": 1.0}, tmp_path / "x")
    with pytest.raises(FileNotFoundError, match="saved checkpoints at steps 5"):
        copy_checkpoint(tmp_path / "m", "m@6", {**child, "checkpoint": 6}, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_checkpoints_must_lie_before_the_last_step(sst2, tmp_path):
    with pytest.raises(ValueError, match=r"models.m.checkpoints: \[20\]"):
        pretrain_model("m", {**short(), "checkpoints": [20]}, sst2, tmp_path / "m", CPU, tokenizer_dir=tmp_path)
