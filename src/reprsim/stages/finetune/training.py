"""Fine-tuning a model with a classification head (a model source like any other).

The evaluations of fine-tuned models (truncation, skipping blocks) live in
:mod:`reprsim.stages.finetune.truncation` and :mod:`reprsim.stages.finetune.skip`; the helpers they share with it live in :mod:`reprsim.nets`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import get_linear_schedule_with_warmup

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


def finetune_model(
    name: str, spec: dict, base_dir: str | Path, dataset_dir: str | Path, out_dir: str | Path,
    device: torch.device,
) -> dict[str, Any]:
    """Fine-tuning of `base_dir` (all parameters but those `spec["freeze"]` names) on the train split.

    Reproducible from `spec["seed"]`: it seeds the head's initialisation, dropout
    and the order in which training examples are drawn.
    """
    seed = int(spec["seed"])
    dataset_meta = read_meta(dataset_dir)
    train = load_split(dataset_dir, "train")
    validation = load_split(dataset_dir, "validation")
    steps, batch_size = training_steps(spec, len(train)), int(spec["batch_size"])
    if len(train) < batch_size:
        raise ValueError(f"{name}: the train split has {len(train)} examples, fewer than batch_size {batch_size}")
    tokenizer = load_tokenizer(base_dir)
    torch.manual_seed(seed)
    model = load_classifier(base_dir, device, num_labels=dataset_meta["n_labels"], pad_token_id=tokenizer.pad_token_id)
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
        "final_loss": log[-1]["loss"],
        "train_seconds": round(seconds, 2),
        "device": describe(device),
    })
