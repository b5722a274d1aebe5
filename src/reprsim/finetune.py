"""Fine-tuning a model with a classification head (a model source like any other).

The evaluations of fine-tuned models (truncation, skipping blocks) live in
:mod:`reprsim.truncation`; they share the batching and scoring helpers here.
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


def _tokenize(tokenizer, rows: pd.DataFrame, max_length: int, **options) -> dict:
    pairs = rows["text_pair"].tolist() if rows["text_pair"].notna().any() else None
    return tokenizer(rows["text"].tolist(), pairs, truncation=True, max_length=max_length, **options)


def _encode_rows(tokenizer, frame: pd.DataFrame, indices: np.ndarray, max_length: int, device) -> dict:
    rows = frame.iloc[indices]
    encoded = _tokenize(tokenizer, rows, max_length, padding=True, return_tensors="pt")
    batch = {k: v.to(device) for k, v in encoded.items()}
    batch["labels"] = torch.tensor(rows["label"].to_numpy(), device=device)
    return batch


def eval_batches(tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device) -> Iterator[dict]:
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


DEFAULT_STEPS = 300


def classification_scores(predictions, labels) -> dict[str, float]:
    """Accuracy and Matthews correlation (Gorodkin's multi-class form; CoLA's GLUE metric).

    The correlation is 0 when predictions or labels hold a single class (its
    denominator vanishes), as scikit-learn reports it.
    """
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if predictions.shape != labels.shape or predictions.size == 0:
        raise ValueError(f"need as many predictions as labels (> 0); got {predictions.shape} and {labels.shape}")
    classes = np.union1d(predictions, labels)
    confusion = np.zeros((classes.size, classes.size), dtype=np.float64)
    np.add.at(confusion, (np.searchsorted(classes, labels), np.searchsorted(classes, predictions)), 1)
    n, correct = confusion.sum(), np.trace(confusion)
    true, predicted = confusion.sum(axis=1), confusion.sum(axis=0)
    denominator = np.sqrt((n**2 - predicted @ predicted) * (n**2 - true @ true))
    mcc = (correct * n - predicted @ true) / denominator if denominator > 0 else 0.0
    return {"accuracy": float(correct / n), "matthews_correlation": float(mcc)}


@torch.inference_mode()
def predict(model, tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device) -> np.ndarray:
    """The model's predicted class for every row of `frame`."""
    predictions = [
        model(**{k: v for k, v in batch.items() if k != "labels"}).logits.argmax(-1).cpu()
        for batch in eval_batches(tokenizer, frame, batch_size, max_length, device)
    ]
    return torch.cat(predictions).numpy()


def evaluate(model, tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device) -> dict[str, float]:
    return classification_scores(predict(model, tokenizer, frame, batch_size, max_length, device), frame["label"])


GROUPING_WINDOW = 50  # batches per window whose examples are sorted by length (as transformers' Trainer)


def epoch_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                  group_by_length: bool) -> list[np.ndarray]:
    """One epoch's batches of row indices: a seeded shuffle cut into full batches (the remainder
    is left out). With `group_by_length`, each window of GROUPING_WINDOW batches is sorted by
    token length before cutting and the batches are then shuffled, so a batch holds similar
    lengths (little padding) while every epoch still visits the rows in a new random grouping."""
    permutation = rng.permutation(len(lengths))
    n_batches = len(permutation) // batch_size
    permutation = permutation[:n_batches * batch_size]
    if group_by_length:
        window = GROUPING_WINDOW * batch_size
        permutation = np.concatenate([
            chunk[np.argsort(-lengths[chunk], kind="stable")]
            for chunk in np.split(permutation, range(window, len(permutation), window))
        ]) if len(permutation) else permutation
    batches = np.split(permutation, n_batches) if n_batches else []
    if group_by_length:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def token_lengths(tokenizer, frame: pd.DataFrame, max_length: int) -> np.ndarray:
    return np.array([len(ids) for ids in _tokenize(tokenizer, frame, max_length)["input_ids"]])


def training_steps(spec: dict, n_train: int) -> int:
    """`steps` when given, else `epochs` passes over the train split, else DEFAULT_STEPS."""
    if spec.get("steps") is not None:
        return int(spec["steps"])
    if spec.get("epochs") is not None:
        return max(1, math.ceil(float(spec["epochs"]) * n_train / int(spec["batch_size"])))
    return DEFAULT_STEPS


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
    model = AutoModelForSequenceClassification.from_pretrained(
        base_dir, num_labels=dataset_meta["n_labels"], pad_token_id=tokenizer.pad_token_id
    ).to(device)
    frozen = freeze(model, spec.get("freeze"))
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=float(spec["learning_rate"]),
        weight_decay=float(spec["weight_decay"]),
    )
    schedule = get_linear_schedule_with_warmup(
        optimizer, int(math.ceil(spec["warmup_fraction"] * steps)), steps
    )
    order = np.random.default_rng(seed)
    lengths = token_lengths(tokenizer, train, int(spec["max_length"]))
    group_by_length = bool(spec.get("group_by_length", True))
    batches: list[np.ndarray] = []
    log = []
    model.train()
    started = time.perf_counter()
    bar = progress(range(1, steps + 1), unit="step", desc=f"finetune {name}")
    for step in bar:
        if not batches:  # a new epoch
            batches = epoch_batches(lengths, batch_size, order, group_by_length)[::-1]
        indices = batches.pop()
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
    scores = evaluate(model, tokenizer, validation, 64, int(spec["max_length"]), device)
    print(f"{name}: {steps} steps in {seconds:.1f} s; validation "
          + ", ".join(f"{metric} {value:.4f}" for metric, value in scores.items()))

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
            "steps": steps,
            "epochs": round(steps * batch_size / len(train), 3),
            **{f"validation_{metric}": value for metric, value in scores.items()},
            "frozen_parameters": len(frozen),
            "trainable_parameters": int(sum(p.numel() for p in model.parameters() if p.requires_grad)),
            "final_loss": log[-1]["loss"],
            "train_seconds": round(seconds, 2),
            "device": describe(device),
            "content_hash": hash_directory(tmp, skip=("meta.json", "training_log.csv")),
        }
        write_json(tmp / "meta.json", meta)
    return meta
