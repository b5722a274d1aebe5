"""Fine-tuning a model with a classification head (a model source like any other).

The evaluations of fine-tuned models (truncation, skipping blocks) live in
:mod:`reprsim.stages.finetune.truncation` and :mod:`reprsim.stages.finetune.skip`; the helpers they share with it live in :mod:`reprsim.nets`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from transformers import get_linear_schedule_with_warmup

from reprsim.design import perturbations
from reprsim.io.datasets import load_split, read_meta
from reprsim.io.device import describe
from reprsim.nets.classifiers import (
    embedding_modules,
    encode_rows,
    evaluate,
    token_lengths,
    transformer_blocks,
)
from reprsim.nets.loading import describe_model, load_classifier, load_tokenizer, save_trained_model
from reprsim.nets.training import endless_batches, train_steps
from reprsim.workflow.plan import training_steps


def freeze(model, spec: dict | None) -> list[str]:
    """Fix the parameters `spec` names ({bottom: k}: embeddings + first k blocks; {top: k}: last k blocks).

    Returns the names of the frozen parameters (recorded in meta.json).
    """
    if not spec:
        return []
    blocks = transformer_blocks(model)
    (side, k), = spec.items()
    if k > len(blocks):
        raise ValueError(f"freeze: {{{side}: {k}}} but the model has only {len(blocks)} blocks")
    modules = embedding_modules(model) + list(blocks[:k]) if side == "bottom" else list(blocks[len(blocks) - k:])
    frozen = {id(p) for m in modules for p in m.parameters()}
    names = []
    for name, parameter in model.named_parameters():
        if id(parameter) in frozen:
            parameter.requires_grad_(False)
            names.append(name)
    return names


def perturbed_train(train: pd.DataFrame, spec: dict, n_labels: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The train split with the spec's perturbations (ReSi's tests 3-5; reprsim.design.perturbations), and the
    record of what was done (meta.json's keys label_noise, shortcut, augment: null when not set).

    Label noise changes the labels; the shortcut token follows the TRUE labels; augmentation runs after
    the shortcut and leaves its token in front. Each draws from its own seed, so one option set or not
    leaves the others' draws as they are."""
    train = train.copy()
    true = train["label"].to_numpy(dtype=np.int64)
    record: dict[str, Any] = {"label_noise": None, "shortcut": None, "augment": None}
    if noise := spec.get("label_noise"):
        fraction, new_classes = float(noise["fraction"]), int(noise.get("new_classes", 5))
        seed = int(noise.get("seed", 0))
        labels, changed = perturbations.noisy_labels(true, n_labels, fraction, new_classes, seed)
        train["label"] = labels
        record["label_noise"] = {"fraction": fraction, "new_classes": new_classes, "seed": seed,
                                 "changed": int(changed.sum())}
    if shortcut := spec.get("shortcut"):
        rate, seed = perturbations.shortcut_rate(shortcut["rate"], true), int(shortcut.get("seed", 0))
        texts, tokens = perturbations.with_shortcut(train["text"].tolist(), true, n_labels, rate, seed)
        train["text"] = texts
        record["shortcut"] = {"rate": rate, "requested": shortcut["rate"], "seed": seed,
                              "correct_share": float(np.mean(tokens == true)),
                              "tokens": perturbations.shortcut_tokens(n_labels)}
    if augment := spec.get("augment"):
        rate, seed = float(augment["rate"]), int(augment.get("seed", 0))
        texts, changed = perturbations.augmented(train["text"].tolist(), rate, seed)
        train["text"] = texts
        record["augment"] = {"rate": rate, "seed": seed, "changed_examples": int((changed > 0).sum()),
                             "words_changed": int(changed.sum())}
    return train, record


def add_shortcut_tokens(model, tokenizer, tokens: list[str]) -> None:
    """The shortcut tokens registered as additional special tokens (kept whole, never split) and the
    model's embeddings grown to hold them, new rows drawn by transformers (mean_resizing) from torch's RNG.
    A model whose embedding matrix already has spare rows (a vocabulary padded beyond the tokenizer's) is
    never shrunk."""
    tokenizer.add_special_tokens({"additional_special_tokens": tokens}, replace_extra_special_tokens=False)
    rows = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > rows:
        model.resize_token_embeddings(len(tokenizer))


def finetune_model(
    name: str, spec: dict, base_dir: str | Path, dataset_dir: str | Path, out_dir: str | Path,
    device: torch.device,
) -> dict[str, Any]:
    """Fine-tuning of `base_dir` (all parameters but those `spec["freeze"]` names) on the train split.

    Reproducible from `spec["seed"]`: it seeds the head's initialisation, dropout
    and the order in which training examples are drawn. The train split may be perturbed first
    (spec label_noise, shortcut, augment: :func:`perturbed_train`, each with its own seed); the
    validation scores are always on the unmodified validation split. With label noise the head has
    n_labels + new_classes outputs; predictions are the argmax over all of them (ReSi's accuracy).
    """
    seed = int(spec["seed"])
    dataset_meta = read_meta(dataset_dir)
    n_labels = int(dataset_meta["n_labels"])
    if spec.get("shortcut") and dataset_meta.get("shortcut"):
        raise ValueError(f"{name}: dataset {spec['dataset']!r} carries shortcut tokens already (its shortcut "
                         "option); fine-tune with a shortcut on a dataset without one")
    train, perturbed = perturbed_train(load_split(dataset_dir, "train"), spec, n_labels)
    n_outputs = n_labels + (perturbed["label_noise"]["new_classes"] if perturbed["label_noise"] else 0)
    validation = load_split(dataset_dir, "validation")
    steps, batch_size = training_steps(spec, len(train)), int(spec["batch_size"])
    if len(train) < batch_size:
        raise ValueError(f"{name}: the train split has {len(train)} examples, fewer than batch_size {batch_size}")
    tokenizer = load_tokenizer(base_dir)
    torch.manual_seed(seed)
    model = load_classifier(base_dir, device, num_labels=n_outputs, pad_token_id=tokenizer.pad_token_id)
    if perturbed["shortcut"]:
        add_shortcut_tokens(model, tokenizer, perturbed["shortcut"]["tokens"])
    frozen = freeze(model, spec.get("freeze"))
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=float(spec["learning_rate"]),
        weight_decay=float(spec["weight_decay"]),
    )
    schedule = get_linear_schedule_with_warmup(
        optimizer, int(math.ceil(spec["warmup_fraction"] * steps)), steps
    )
    lengths = token_lengths(tokenizer, train, int(spec["max_length"]))
    batches = endless_batches(lengths, batch_size, np.random.default_rng(seed), bool(spec.get("group_by_length", True)))
    model.train()
    log, seconds = train_steps(
        lambda indices: model(**encode_rows(tokenizer, train, indices, int(spec["max_length"]), device)).loss,
        batches, optimizer, schedule, steps, f"finetune {name}")
    model.eval()
    scores = evaluate(model, tokenizer, validation, 64, int(spec["max_length"]), device)
    for option, done in perturbed.items():
        if done:
            print(f"{name}: {option} " + ", ".join(f"{k} {v}" for k, v in done.items() if k != "tokens"))
    print(f"{name}: {steps} steps in {seconds:.1f} s; validation "
          + ", ".join(f"{metric} {value:.4f}" for metric, value in scores.items()))

    return save_trained_model(model, tokenizer, out_dir, log, {
        "name": name,
        "source": "finetune",
        "spec": spec,
        "seed": seed,
        "parent": spec["base"],
        "dataset": spec["dataset"],
        "dataset_hash": dataset_meta["content_hash"],
        **describe_model(model),
        "steps": steps,
        "epochs": round(steps * batch_size / len(train), 3),
        **{f"validation_{metric}": value for metric, value in scores.items()},
        "frozen_parameters": len(frozen),
        "trainable_parameters": int(sum(p.numel() for p in model.parameters() if p.requires_grad)),
        "n_outputs": n_outputs,
        **perturbed,
        "final_loss": log[-1]["loss"],
        "train_seconds": round(seconds, 2),
        "device": describe(device),
    })
