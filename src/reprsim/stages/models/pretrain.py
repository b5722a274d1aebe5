"""Pretraining a small causal language model from scratch on a dataset's text (source `pretrain`), offline.

A GPT-2 (`GPT2LMHeadModel`) is built as a random `init` model is (vocabulary and special tokens from its
tokenizer: one borrowed from another model, or a byte-level BPE trained on a dataset's train split), its
`activation_function` set by the spec's `activation`, then trained on next-token prediction over the
train split's text packed into blocks of `context` tokens (:mod:`reprsim.nets.language_models`): AdamW
(weight decay on weight matrices and embeddings, none on biases and LayerNorms), linear warm-up and decay,
the blocks reshuffled each epoch (seeded). It is scored on the validation split's blocks: the mean
next-token cross-entropy in nats, beside the chance reference, the cross-entropy of the same tokens under
the train split's (add-one smoothed) unigram frequencies.

Reproducible from `spec["seed"]`, which seeds the initialisation, dropout and the order of the blocks: the
same seed gives bit-identical weights on one device. The directory saved (save_pretrained + tokenizer +
meta.json + training_log.csv) loads with AutoModel (GPT2Model: the extraction stage's encoder) and with
AutoModelForCausalLM.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, get_linear_schedule_with_warmup

from reprsim.io.datasets import read_meta
from reprsim.io.device import describe
from reprsim.nets.language_models import lm_cross_entropy, text_blocks, texts_of, unigram_cross_entropy
from reprsim.nets.loading import check_finite, describe_model, open_tokenizer, save_trained_model
from reprsim.nets.training import endless_batches, train_steps
from reprsim.stages.models.materialize import init_model, train_tokenizer

ARCHITECTURES = ("gpt2",)
# config fields the spec sets through its own keys (the tokenizer sets vocab_size, `activation` the activation)
SET_BY_SPEC = {"vocab_size": "the tokenizer", "activation_function": "models.NAME.activation"}
POSITIONS = ("n_positions", "max_position_embeddings")  # GPT2Config's field and its alias


def _tokenizer(name: str, spec: dict, dataset_dir, tokenizer_dir, tokenizer_dataset_dir):
    """(tokenizer, what meta.json records of it)."""
    chosen = spec["tokenizer"]
    if isinstance(chosen, dict):
        train = chosen["train"]
        if tokenizer_dataset_dir is None:
            if train.get("dataset") not in (None, spec.get("dataset")):
                raise ValueError(f"model {name!r} (source pretrain) trains its tokenizer on dataset "
                                 f"{train['dataset']!r}, not on {spec.get('dataset')!r}: pass that dataset's "
                                 "directory as tokenizer_dataset_dir")
            tokenizer_dataset_dir = dataset_dir
        tokenizer, trained = train_tokenizer(train, tokenizer_dataset_dir)
        print(f"{name}: byte-level BPE of {trained['vocab_size_obtained']} tokens (asked {trained['vocab_size']}) "
              f"from {trained['texts_used']} texts of {trained['dataset']}'s train split", flush=True)
        return tokenizer, {"tokenizer_from": f"trained on {trained['dataset']}", "tokenizer_trained": trained}
    if tokenizer_dir is None:
        raise ValueError(f"model {name!r} (source pretrain) borrows the tokenizer of model {chosen!r}: "
                         "it needs that model's directory (tokenizer_dir)")
    return open_tokenizer(tokenizer_dir), {"tokenizer_from": chosen}


def gpt2_overrides(name: str, spec: dict) -> dict:
    """The GPT2Config fields of `spec`: its `config`, the activation, and n_positions = context unless the
    config sets more (extraction then truncates at the positions the model was trained on)."""
    overrides = dict(spec.get("config") or {})
    for field, by in SET_BY_SPEC.items():
        if field in overrides:
            raise ValueError(f"models.{name}.config.{field}: set by {by}, not in config")
    context = int(spec["context"])
    given = [key for key in POSITIONS if key in overrides]
    if not given:
        overrides["n_positions"] = context
    elif overrides[given[0]] < context:
        raise ValueError(f"models.{name}.config.{given[0]} = {overrides[given[0]]} is below context = {context}: "
                         "the model has no position for the block's later tokens")
    overrides["activation_function"] = spec["activation"]
    return overrides


def _decayed(model) -> list[dict]:
    """AdamW parameter groups: weight decay on weight matrices and embeddings, none on biases and LayerNorms."""
    matrices = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    others = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    return [{"params": matrices}, {"params": others, "weight_decay": 0.0}]


def pretrain_model(
    name: str, spec: dict, dataset_dir: str | Path, out_dir: str | Path, device: torch.device,
    tokenizer_dir: str | Path | None = None, tokenizer_dataset_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Pretrain model `name` from `spec` (source pretrain) on the train split of the dataset at `dataset_dir`
    and save it into `out_dir` (save_pretrained + tokenizer + training_log.csv + meta.json, atomically).

    The tokenizer is the one saved in `tokenizer_dir` (``tokenizer: <model>``) or a byte-level BPE trained on
    the train split of the dataset ``tokenizer: {train: {dataset}}`` names: `dataset_dir` when that is the
    pretraining dataset, else `tokenizer_dataset_dir`.
    """
    architecture = spec.get("architecture", "gpt2")
    if architecture not in ARCHITECTURES:
        raise ValueError(f"models.{name}.architecture: {architecture!r}; pretrain supports {', '.join(ARCHITECTURES)}")
    seed, steps, batch_size = int(spec["seed"]), int(spec["steps"]), int(spec["batch_size"])
    context = int(spec["context"])
    dataset_meta = read_meta(dataset_dir)
    tokenizer, tokenizer_meta = _tokenizer(name, spec, dataset_dir, tokenizer_dir, tokenizer_dataset_dir)
    train_blocks = text_blocks(tokenizer, texts_of(dataset_dir, "train"), context)
    validation_blocks = text_blocks(tokenizer, texts_of(dataset_dir, "validation"), context)
    if len(train_blocks) < batch_size:
        raise ValueError(f"{name}: the train split makes {len(train_blocks)} blocks of {context} tokens, fewer than "
                         f"batch_size {batch_size}; lower batch_size or context")
    model = init_model(architecture, gpt2_overrides(name, spec), tokenizer, seed, auto_class=AutoModelForCausalLM)
    model.to(device)
    optimizer = torch.optim.AdamW(_decayed(model), lr=float(spec["learning_rate"]),
                                  weight_decay=float(spec["weight_decay"]))
    schedule = get_linear_schedule_with_warmup(optimizer, int(math.ceil(spec["warmup_fraction"] * steps)), steps)
    max_grad_norm = spec.get("max_grad_norm")
    blocks = endless_batches(np.full(len(train_blocks), context), batch_size, np.random.default_rng(seed),
                             group_by_length=False)

    def loss_of(indices: np.ndarray) -> torch.Tensor:
        batch = train_blocks[torch.from_numpy(indices)].to(device)
        return model(input_ids=batch, labels=batch, use_cache=False).loss

    model.train()
    log, seconds = train_steps(
        loss_of, blocks, optimizer, schedule, steps, f"pretrain {name}",
        clip=None if max_grad_norm is None else (model.parameters(), float(max_grad_norm)))
    model.eval()
    check_finite(model, f"pretrained model {name!r}", "the training diverged: lower its learning_rate, raise "
                 "warmup_fraction or set max_grad_norm")
    validation_ce, validation_tokens = lm_cross_entropy(model, validation_blocks, batch_size, device)
    unigram_ce = unigram_cross_entropy(train_blocks, validation_blocks, int(model.config.vocab_size))
    print(f"{name}: {steps} steps in {seconds:.1f} s; validation cross-entropy {validation_ce:.4f} nats/token "
          f"(unigram {unigram_ce:.4f}, uniform {math.log(model.config.vocab_size):.4f}) over {validation_tokens} tokens",
          flush=True)

    return save_trained_model(model, tokenizer, out_dir, log, {
        "name": name,
        "source": "pretrain",
        "spec": spec,
        "seed": seed,
        "parent": None,
        "dataset": spec["dataset"],
        "dataset_hash": dataset_meta["content_hash"],
        **tokenizer_meta,
        **describe_model(model),
        "activation": model.config.activation_function,
        "vocab_size": int(model.config.vocab_size),
        "context": context,
        "n_positions": int(model.config.n_positions),
        "steps": steps,
        "epochs": round(steps * batch_size / len(train_blocks), 3),
        "tokens_per_step": batch_size * context,
        "train_blocks": len(train_blocks),
        "validation_blocks": len(validation_blocks),
        "validation_tokens": validation_tokens,
        "validation_cross_entropy": validation_ce,
        "unigram_cross_entropy": unigram_ce,
        "final_loss": log[-1]["loss"] if log else None,
        "train_seconds": round(seconds, 2),
        "device": describe(device),
    })
