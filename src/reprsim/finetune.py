"""Fine-tuning with a classification head, and truncation of fine-tuned models.

Truncation follows Phang et al. (2021, §4): layer l's representation is fed to
the task head. UNTUNED uses the fine-tuned head as it is, so at the last layer
it reproduces the full model exactly.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd
import torch
from transformers import AutoModelForSequenceClassification, get_linear_schedule_with_warmup

from reprsim.data import load_split, read_meta
from reprsim.device import describe
from reprsim.logs import progress
from reprsim.models import describe_model, load_tokenizer, n_layers
from reprsim.outputs import atomic_directory, write_json
from reprsim.provenance import hash_directory


def _encode_rows(tokenizer, frame: pd.DataFrame, indices: np.ndarray, max_length: int, device) -> dict:
    rows = frame.iloc[indices]
    pairs = rows["text_pair"].tolist() if rows["text_pair"].notna().any() else None
    encoded = tokenizer(
        rows["text"].tolist(), pairs, truncation=True, max_length=max_length,
        padding=True, return_tensors="pt",
    )
    batch = {k: v.to(device) for k, v in encoded.items()}
    batch["labels"] = torch.tensor(rows["label"].to_numpy(), device=device)
    return batch


def _eval_batches(tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device) -> Iterator[dict]:
    for start in range(0, len(frame), batch_size):
        yield _encode_rows(tokenizer, frame, np.arange(start, min(start + batch_size, len(frame))), max_length, device)


def transformer_blocks(model) -> torch.nn.ModuleList:
    """The stack of transformer blocks of a (classification) model, bottom first."""
    base = model.base_model
    for path in ("encoder.layer", "h", "transformer.layer", "layers"):
        module = base
        for name in path.split("."):
            module = getattr(module, name, None)
            if module is None:
                break
        if isinstance(module, torch.nn.ModuleList):
            return module
    raise NotImplementedError(f"cannot find the transformer blocks of a {model.config.model_type!r} model")


def embedding_modules(model) -> list[torch.nn.Module]:
    base = model.base_model
    if hasattr(base, "embeddings"):
        return [base.embeddings]
    return [m for m in (getattr(base, "wte", None), getattr(base, "wpe", None)) if m is not None]


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


def load_classifier(model_dir: str | Path, device: torch.device):
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    return model.to(device).eval()


@torch.inference_mode()
def accuracy(model, tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device) -> float:
    correct = 0
    for batch in _eval_batches(tokenizer, frame, batch_size, max_length, device):
        labels = batch.pop("labels")
        correct += int((model(**batch).logits.argmax(-1) == labels).sum())
    return correct / len(frame)


def finetune_model(
    name: str, spec: dict, base_dir: str | Path, dataset_dir: str | Path, out_dir: str | Path,
    device: torch.device,
) -> dict[str, Any]:
    """Full fine-tuning of `base_dir` on the dataset's train split for a fixed number of steps.

    Reproducible from `spec["seed"]`: it seeds the head's initialisation, dropout
    and the order in which training examples are drawn.
    """
    seed = int(spec["seed"])
    dataset_meta = read_meta(dataset_dir)
    train = load_split(dataset_dir, "train")
    validation = load_split(dataset_dir, "validation")
    tokenizer = load_tokenizer(base_dir)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        base_dir, num_labels=dataset_meta["n_labels"], pad_token_id=tokenizer.pad_token_id
    ).to(device)
    steps, batch_size = int(spec["steps"]), int(spec["batch_size"])
    frozen = freeze(model, spec.get("freeze"))
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=float(spec["learning_rate"]),
        weight_decay=float(spec["weight_decay"]),
    )
    schedule = get_linear_schedule_with_warmup(
        optimizer, int(math.ceil(spec["warmup_fraction"] * steps)), steps
    )
    order = np.random.default_rng(seed)
    permutation, cursor = order.permutation(len(train)), 0
    log = []
    model.train()
    started = time.perf_counter()
    bar = progress(range(1, steps + 1), unit="step", desc=f"finetune {name}")
    for step in bar:
        if cursor + batch_size > len(permutation):  # a new epoch: reshuffle
            permutation, cursor = order.permutation(len(train)), 0
        indices = permutation[cursor:cursor + batch_size]
        cursor += batch_size
        loss = model(**_encode_rows(tokenizer, train, indices, int(spec["max_length"]), device)).loss
        loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        log.append({"step": step, "loss": loss.item(), "learning_rate": schedule.get_last_lr()[0]})
        bar.set_postfix(loss=f"{log[-1]['loss']:.4f}")
    bar.close()
    seconds = time.perf_counter() - started
    model.eval()
    val_accuracy = accuracy(model, tokenizer, validation, 64, int(spec["max_length"]), device)

    with atomic_directory(out_dir) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        pd.DataFrame(log).to_csv(tmp / "training_log.csv", index=False)
        meta = {
            "name": name,
            "source": "finetune",
            "spec": spec,
            "seed": seed,
            "parent": spec["base"],
            "dataset": spec["dataset"],
            "dataset_hash": dataset_meta["content_hash"],
            **describe_model(model),
            "validation_accuracy": val_accuracy,
            "frozen_parameters": len(frozen),
            "trainable_parameters": int(sum(p.numel() for p in model.parameters() if p.requires_grad)),
            "final_loss": log[-1]["loss"],
            "train_seconds": round(seconds, 2),
            "device": describe(device),
            "content_hash": hash_directory(tmp, skip=("meta.json", "training_log.csv")),
        }
        write_json(tmp / "meta.json", meta)
    return meta


# --------------------------------------------------------------------------- truncation
def head_logits(model, hidden: torch.Tensor, attention_mask: torch.Tensor, layer: int) -> torch.Tensor:
    """The task head of `model` applied to layer `layer`'s hidden states (batch, tokens, d).

    Equivalent to discarding the blocks above `layer`. Each family feeds its head
    the way its own forward does.
    """
    kind = model.config.model_type
    if kind == "bert":
        pooled = model.bert.pooler(hidden) if model.bert.pooler is not None else hidden[:, 0]
        return model.classifier(model.dropout(pooled))
    if kind in ("roberta", "electra"):
        return model.classifier(hidden)
    if kind == "distilbert":
        pooled = torch.relu(model.pre_classifier(hidden[:, 0]))
        return model.classifier(model.dropout(pooled))
    if kind == "gpt2":
        # GPT2Model applies its final LayerNorm only to the last hidden state
        if layer < n_layers(model.config):
            hidden = model.transformer.ln_f(hidden)
        last = attention_mask.sum(dim=1) - 1
        return model.score(hidden[torch.arange(hidden.shape[0], device=hidden.device), last])
    raise NotImplementedError(
        f"truncation is implemented for bert, roberta, electra, distilbert and gpt2 heads; got {kind!r}"
    )


def _evaluation_setup(model_dir: str | Path, dataset_dir: str | Path, split: str, device: torch.device):
    """The split's rows, the tokenizer, the classifier (eval mode) and the max length it was tuned with."""
    max_length = int(read_meta(model_dir)["spec"]["max_length"])
    return load_split(dataset_dir, split), load_tokenizer(model_dir), load_classifier(model_dir, device), max_length


def _tagged(rows: list[dict], split: str, frame: pd.DataFrame, model_dir: str | Path) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    table["split"], table["n"], table["model"] = split, len(frame), Path(model_dir).name
    return table


@torch.inference_mode()
def untuned_truncation(
    model_dir: str | Path, dataset_dir: str | Path, split: str, batch_size: int, device: torch.device
) -> pd.DataFrame:
    """UNTUNED truncation curve: accuracy per layer with the tuned head, plus full model and majority class."""
    frame, tokenizer, model, max_length = _evaluation_setup(model_dir, dataset_dir, split, device)
    layers = n_layers(model.config) + 1
    correct = np.zeros(layers, dtype=np.int64)
    full_correct = 0
    for batch in progress(
        _eval_batches(tokenizer, frame, batch_size, max_length, device),
        total=math.ceil(len(frame) / batch_size), unit="batch", desc=f"truncation {Path(model_dir).name}",
    ):
        labels = batch.pop("labels")
        output = model(**batch, output_hidden_states=True)
        full_correct += int((output.logits.argmax(-1) == labels).sum())
        for layer, hidden in enumerate(output.hidden_states):
            logits = head_logits(model, hidden, batch["attention_mask"], layer)
            correct[layer] += int((logits.argmax(-1) == labels).sum())
    n = len(frame)
    majority = frame["label"].value_counts().iloc[0] / n
    rows = [
        {"layer": layer, "mode": "UNTUNED", "metric": "accuracy", "value": correct[layer] / n}
        for layer in range(layers)
    ]
    rows.append({"layer": layers - 1, "mode": "FULL", "metric": "accuracy", "value": full_correct / n})
    rows.append({"layer": -1, "mode": "MAJORITY", "metric": "accuracy", "value": float(majority)})
    return _tagged(rows, split, frame, model_dir)


# --------------------------------------------------------------------------- skipping
def _set_blocks(model, blocks: torch.nn.ModuleList) -> None:
    """Swap the model's block stack (the ModuleList transformer_blocks found) for `blocks`."""
    current = transformer_blocks(model)
    for parent in model.base_model.modules():
        for name, child in parent.named_children():
            if child is current:
                setattr(parent, name, blocks)
                return
    raise NotImplementedError("cannot replace the transformer blocks of this model")


@torch.inference_mode()
def skip_spans(model_dir: str | Path, dataset_dir: str | Path, split: str, batch_size: int, device: torch.device
               ) -> pd.DataFrame:
    """Phang et al. (2021, §4.1): accuracy with every contiguous span [start, end] of blocks skipped
    (identity in their place), no further training. Blocks are numbered 1..L; the row
    start = end = 0 is the full model (nothing skipped)."""
    frame, tokenizer, model, max_length = _evaluation_setup(model_dir, dataset_dir, split, device)
    blocks = transformer_blocks(model)
    depth = len(blocks)
    batches = list(_eval_batches(tokenizer, frame, batch_size, max_length, device))
    spans = [(0, 0)] + [(i, j) for i in range(1, depth + 1) for j in range(i, depth + 1)]
    rows = []
    for start, end in progress(spans, unit="span", desc=f"skip {Path(model_dir).name}"):
        kept = [block for index, block in enumerate(blocks, start=1) if not start <= index <= end]
        _set_blocks(model, torch.nn.ModuleList(kept))
        correct = 0
        for batch in batches:
            inputs = {k: v for k, v in batch.items() if k != "labels"}
            correct += int((model(**inputs, use_cache=False).logits.argmax(-1) == batch["labels"]).sum())
        rows.append({"start": start, "end": end, "blocks_skipped": end - start + 1 if start else 0,
                     "metric": "accuracy", "value": correct / len(frame)})
    _set_blocks(model, blocks)
    return _tagged(rows, split, frame, model_dir)
