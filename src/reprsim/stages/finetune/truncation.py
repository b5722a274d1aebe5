"""Where a fine-tuned model's task performance lives: truncation (Phang et al. 2021, §4).

Truncation feeds layer l's representation to a classifier head, discarding the blocks above:
- UNTUNED: the fine-tuned head as it is, so at the last layer it reproduces the full model;
- TUNED: the fine-tuned encoder frozen, a fresh head trained on layer l;
- TUNEDORIG: the base (pre-fine-tuning) encoder frozen, a fresh head trained on layer l;
plus the full model (FULL) and the train split's majority class (MAJORITY).

The fresh head is dense → tanh → linear on the token the family's own head reads (the
first token for BERT-style encoders, the last real token after the final LayerNorm for
GPT-2): RoBERTa's classification head, equal in form to BERT's pooler + classifier, the
same for every family so TUNED and TUNEDORIG curves compare like with like. Phang et al.
"further fine-tune the output head"; we start it fresh (the issue's definition), which
TUNEDORIG needs anyway since the base model has no task head.

The evaluation rows' head inputs of every layer come from one forward pass of each encoder, or, when the
extract stage's store of that encoder holds them exactly (reprsim.nets.heads.stored_head_rows), from the store: the
rows the extraction holds are computed once, for every stage that reads them. The heads'
training rows (a seeded sample of the train split) always run through the encoders here.

Skipping blocks is :mod:`reprsim.stages.finetune.skip`. Every evaluation scores accuracy and Matthews correlation (CoLA's GLUE metric).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import get_linear_schedule_with_warmup

from reprsim.io.datasets import load_split, read_meta
from reprsim.io.logs import progress
from reprsim.nets.classifiers import (
    classification_scores,
    eval_batches,
    final_norm,
    fresh_head,
    head_input,
    head_on_input,
    length_order,
)
from reprsim.nets.heads import stored_head_rows
from reprsim.nets.loading import load_encoder, load_tokenizer
from reprsim.nets.standardise import Standardise
from reprsim.schema import schema_defaults
from reprsim.stages.finetune.evaluation import evaluation_setup, tagged

# the fresh heads' settings when a caller gives none: the schema's defaults (finetune_eval.heads)
HEAD_DEFAULTS = {k: v for k, v in schema_defaults("finetune_eval", "heads").items() if k != "enabled"}


@torch.inference_mode()
def layer_head_inputs(encoder, tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device,
                      desc: str) -> torch.Tensor:
    """Head inputs of every layer for every row: (rows, layers + 1, d), float32 on the CPU, in the
    frame's order (computed in order of length)."""
    order = length_order(tokenizer, frame, max_length)
    chunks = []
    for batch in progress(eval_batches(tokenizer, frame.iloc[order], batch_size, max_length, device),
                          total=math.ceil(len(frame) / batch_size), unit="batch", desc=desc):
        batch.pop("labels")
        hidden = encoder(**batch, output_hidden_states=True).hidden_states
        mask = batch["attention_mask"]
        chunks.append(torch.stack([head_input(encoder, h, mask, layer) for layer, h in enumerate(hidden)], 1))
    features = torch.cat(chunks).float().cpu()
    restored = torch.empty_like(features)
    restored[torch.as_tensor(order)] = features
    return restored


def train_head(features: torch.Tensor, labels: torch.Tensor, n_labels: int, settings: dict, seed: int,
               dropout: float = 0.1) -> torch.nn.Sequential:
    """A fresh head trained on fixed features (rows, d) with AdamW and a linear warm-up/decay schedule.

    Only the head exists here: the encoder that made `features` cannot change. The features are
    standardised first (with the training rows' statistics): intermediate layers of pretrained
    encoders have a few dimensions of large magnitude that saturate the tanh, and a head on the
    raw features of MiniLM's lower layers learnt only the majority class.
    """
    settings = HEAD_DEFAULTS | settings
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    head = torch.nn.Sequential(Standardise(features), *fresh_head(features.shape[1], n_labels, dropout))
    batch_size = int(settings["batch_size"])
    steps = max(1, math.ceil(settings["epochs"] * len(features) / batch_size))
    optimizer = torch.optim.AdamW(head.parameters(), lr=settings["learning_rate"],
                                  weight_decay=settings["weight_decay"])
    schedule = get_linear_schedule_with_warmup(optimizer, math.ceil(0.1 * steps), steps)
    order, cursor = torch.randperm(len(features), generator=generator), 0
    head.train()
    for _ in range(steps):
        if cursor + batch_size > len(order):
            order, cursor = torch.randperm(len(features), generator=generator), 0
        rows = order[cursor:cursor + batch_size]
        cursor += batch_size
        loss = torch.nn.functional.cross_entropy(head(features[rows]), labels[rows])
        loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
    return head.eval()


def _scored(rows: list[dict], mode: str, layer: int, predictions, labels) -> None:
    for metric, value in classification_scores(predictions, labels).items():
        rows.append({"layer": layer, "mode": mode, "metric": metric, "value": value})


def evaluation_head_inputs(encoder, tokenizer, frame: pd.DataFrame, store: str | Path | None, model_dir, dataset_dir,
                           split: str, batch_size: int, max_length: int, device, desc: str) -> torch.Tensor:
    """Head inputs of every layer for the evaluation rows (rows, layers + 1, d), float32 on the CPU, in the
    frame's order: read from the encoder's activation store when it holds them (reprsim.nets.heads.stored_head_rows), else from a
    forward pass."""
    stored = None if store is None else stored_head_rows(store, encoder.config, tokenizer, model_dir, dataset_dir,
                                                         split, frame, max_length)
    if stored is None:
        return layer_head_inputs(encoder, tokenizer, frame, batch_size, max_length, device, desc)
    with torch.inference_mode():
        return torch.stack([final_norm(encoder, torch.from_numpy(rows).to(device), layer).float().cpu()
                            for layer, rows in enumerate(stored)], 1)


@torch.inference_mode()
def _untuned_rows(model, inputs: torch.Tensor, labels: np.ndarray, device) -> list[dict]:
    """UNTUNED: the model's own head on each layer's head inputs; FULL: on the top layer's (the full model)."""
    rows: list[dict] = []
    predictions = [head_on_input(model, inputs[:, layer].to(device)).argmax(-1).cpu().numpy()
                   for layer in range(inputs.shape[1])]
    for layer, layer_predictions in enumerate(predictions):
        _scored(rows, "UNTUNED", layer, layer_predictions, labels)
    _scored(rows, "FULL", len(predictions) - 1, predictions[-1], labels)
    return rows


def _tuned_head_rows(mode: str, encoder, tokenizer, train: pd.DataFrame, eval_inputs: torch.Tensor,
                     labels: np.ndarray, n_labels: int, heads: dict, seed: int, batch_size: int, max_length: int,
                     device, name: str) -> list[dict]:
    """A fresh head per layer on `encoder`'s frozen head inputs (train rows), scored on the evaluation rows'."""
    train_inputs = layer_head_inputs(encoder, tokenizer, train, batch_size, max_length, device,
                                     f"{mode} {name}: train features")
    train_labels = torch.tensor(train["label"].to_numpy())
    dropout = float(getattr(encoder.config, "hidden_dropout_prob", getattr(encoder.config, "resid_pdrop", 0.1)))
    rows: list[dict] = []
    for layer in progress(range(train_inputs.shape[1]), unit="head", desc=f"{mode} {name}: heads"):
        head = train_head(train_inputs[:, layer], train_labels, n_labels, heads, seed + layer, dropout)
        with torch.inference_mode():
            predictions = head(eval_inputs[:, layer]).argmax(-1).numpy()
        _scored(rows, mode, layer, predictions, labels)
    return rows


def truncation(model_dir: str | Path, base_dir: str | Path | None, dataset_dir: str | Path, split: str,
               batch_size: int, device: torch.device, heads: dict | None = None, store: str | Path | None = None,
               base_store: str | Path | None = None) -> pd.DataFrame:
    """Truncation curves of one fine-tuned model: rows (layer, mode, metric, value).

    `heads` (settings for the fresh TUNED/TUNEDORIG heads, see HEAD_DEFAULTS) None: UNTUNED,
    FULL and MAJORITY only. TUNEDORIG needs `base_dir`, the model fine-tuning started from.
    Head training rows are a seeded sample of at most `max_train_examples` train rows.
    The evaluation rows' head inputs of every layer come from one pass of each encoder, or from its activation
    store on the dataset (`store`: the model's, `base_store`: the base's) when that holds them exactly.
    """
    frame, tokenizer, model, max_length = evaluation_setup(model_dir, dataset_dir, split, device)
    name = Path(model_dir).name
    labels = frame["label"].to_numpy()
    train = load_split(dataset_dir, "train")
    eval_inputs = evaluation_head_inputs(model.base_model, tokenizer, frame, store, model_dir, dataset_dir, split,
                                         batch_size, max_length, device, f"{name}: {len(frame)} evaluation rows")
    rows = _untuned_rows(model, eval_inputs, labels, device)
    counts = train["label"].value_counts()
    majority = min(counts[counts == counts.max()].index)  # ties: the lowest class, deterministically
    _scored(rows, "MAJORITY", -1, np.full(len(frame), majority), labels)
    if heads is not None:
        heads = HEAD_DEFAULTS | heads
        seed = int(read_meta(model_dir)["seed"])
        if len(train) > heads["max_train_examples"]:
            train = train.sample(n=int(heads["max_train_examples"]), random_state=seed).sort_index()
        n_labels = model.config.num_labels
        rows += _tuned_head_rows("TUNED", model.base_model, tokenizer, train, eval_inputs, labels, n_labels, heads,
                                 seed, batch_size, max_length, device, name)
        if base_dir is not None:
            base, base_tokenizer = load_encoder(base_dir, device), load_tokenizer(base_dir)
            base_inputs = evaluation_head_inputs(base, base_tokenizer, frame, base_store, base_dir, dataset_dir,
                                                 split, batch_size, max_length, device,
                                                 f"TUNEDORIG {name}: {len(frame)} evaluation rows")
            rows += _tuned_head_rows("TUNEDORIG", base, base_tokenizer, train, base_inputs, labels, n_labels,
                                     heads, seed, batch_size, max_length, device, name)
    table = tagged(rows, split, frame, model_dir, device)
    table["n_train_heads"] = len(train) if heads is not None else 0
    return table
