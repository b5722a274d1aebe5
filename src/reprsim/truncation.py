"""Where a fine-tuned model's task performance lives: truncation and skipping (Phang et al. 2021, §4).

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

Skipping replaces a contiguous span of blocks by the identity, no further training.
Every evaluation scores accuracy and Matthews correlation (CoLA's GLUE metric).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import get_linear_schedule_with_warmup

from reprsim.data import load_split, read_meta
from reprsim.device import describe
from reprsim.finetune import classification_scores, eval_batches, load_classifier, transformer_blocks
from reprsim.logs import progress
from reprsim.models import load_encoder, load_tokenizer, n_layers

HEAD_DEFAULTS = {"epochs": 3, "learning_rate": 1e-3, "batch_size": 32, "weight_decay": 0.01,
                 "max_train_examples": 2000}


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
        return model.score(head_input(model.transformer, hidden, attention_mask, layer))
    raise NotImplementedError(
        f"truncation is implemented for bert, roberta, electra, distilbert and gpt2 heads; got {kind!r}"
    )


def head_input(encoder, hidden: torch.Tensor, attention_mask: torch.Tensor, layer: int) -> torch.Tensor:
    """The token vector (batch, d) a classification head of this family reads from layer `layer`."""
    if encoder.config.model_type != "gpt2":
        return hidden[:, 0]
    # GPT2Model applies its final LayerNorm only to the last hidden state
    if layer < n_layers(encoder.config):
        hidden = encoder.ln_f(hidden)
    last = attention_mask.sum(dim=1) - 1
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


@torch.inference_mode()
def layer_head_inputs(encoder, tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device,
                      desc: str) -> torch.Tensor:
    """Head inputs of every layer for every row: (rows, layers + 1, d), float32 on the CPU."""
    chunks = []
    for batch in progress(eval_batches(tokenizer, frame, batch_size, max_length, device),
                          total=math.ceil(len(frame) / batch_size), unit="batch", desc=desc):
        batch.pop("labels")
        hidden = encoder(**batch, output_hidden_states=True).hidden_states
        mask = batch["attention_mask"]
        chunks.append(torch.stack([head_input(encoder, h, mask, layer) for layer, h in enumerate(hidden)], 1))
    return torch.cat(chunks).float().cpu()


def fresh_head(width: int, n_labels: int, dropout: float) -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Dropout(dropout), torch.nn.Linear(width, width), torch.nn.Tanh(),
        torch.nn.Dropout(dropout), torch.nn.Linear(width, n_labels),
    )


class Standardise(torch.nn.Module):
    """Fixed per-feature centring and scaling by the training features' mean and standard deviation
    (buffers, not trained; a constant feature is only centred)."""

    def __init__(self, features: torch.Tensor):
        super().__init__()
        std = features.std(dim=0)
        self.register_buffer("mean", features.mean(dim=0))
        self.register_buffer("scale", torch.where(std > 0, std, torch.ones_like(std)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.scale


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


def _evaluation_setup(model_dir: str | Path, dataset_dir: str | Path, split: str, device: torch.device):
    """The split's rows, the tokenizer, the classifier (eval mode) and the max length it was tuned with."""
    max_length = int(read_meta(model_dir)["spec"]["max_length"])
    return load_split(dataset_dir, split), load_tokenizer(model_dir), load_classifier(model_dir, device), max_length


def _tagged(rows: list[dict], split: str, frame: pd.DataFrame, model_dir: str | Path, device: torch.device
            ) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    table["split"], table["n"], table["model"] = split, len(frame), Path(model_dir).name
    table["device"] = describe(device)  # where it ran: in a SLURM job, the GPU it was allocated or the CPU
    return table


@torch.inference_mode()
def _untuned_rows(model, tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device,
                  name: str) -> list[dict]:
    layers = n_layers(model.config) + 1
    predictions, full = [[] for _ in range(layers)], []
    for batch in progress(
        eval_batches(tokenizer, frame, batch_size, max_length, device),
        total=math.ceil(len(frame) / batch_size), unit="batch", desc=f"UNTUNED {name}",
    ):
        batch.pop("labels")
        output = model(**batch, output_hidden_states=True)
        full.append(output.logits.argmax(-1).cpu())
        for layer, hidden in enumerate(output.hidden_states):
            predictions[layer].append(head_logits(model, hidden, batch["attention_mask"], layer).argmax(-1).cpu())
    labels = frame["label"].to_numpy()
    rows: list[dict] = []
    for layer in range(layers):
        _scored(rows, "UNTUNED", layer, torch.cat(predictions[layer]).numpy(), labels)
    _scored(rows, "FULL", layers - 1, torch.cat(full).numpy(), labels)
    return rows


def _tuned_head_rows(mode: str, encoder, tokenizer, train: pd.DataFrame, frame: pd.DataFrame, n_labels: int,
                     heads: dict, seed: int, batch_size: int, max_length: int, device, name: str) -> list[dict]:
    """A fresh head per layer on `encoder`'s frozen head inputs (train rows), scored on `frame`."""
    train_inputs = layer_head_inputs(encoder, tokenizer, train, batch_size, max_length, device,
                                     f"{mode} {name}: train features")
    eval_inputs = layer_head_inputs(encoder, tokenizer, frame, batch_size, max_length, device,
                                    f"{mode} {name}: {len(frame)} evaluation rows")
    train_labels = torch.tensor(train["label"].to_numpy())
    dropout = float(getattr(encoder.config, "hidden_dropout_prob", getattr(encoder.config, "resid_pdrop", 0.1)))
    rows: list[dict] = []
    for layer in progress(range(train_inputs.shape[1]), unit="head", desc=f"{mode} {name}: heads"):
        head = train_head(train_inputs[:, layer], train_labels, n_labels, heads, seed + layer, dropout)
        with torch.inference_mode():
            predictions = head(eval_inputs[:, layer]).argmax(-1).numpy()
        _scored(rows, mode, layer, predictions, frame["label"].to_numpy())
    return rows


def truncation(model_dir: str | Path, base_dir: str | Path | None, dataset_dir: str | Path, split: str,
               batch_size: int, device: torch.device, heads: dict | None = None) -> pd.DataFrame:
    """Truncation curves of one fine-tuned model: rows (layer, mode, metric, value).

    `heads` (settings for the fresh TUNED/TUNEDORIG heads, see HEAD_DEFAULTS) None: UNTUNED,
    FULL and MAJORITY only. TUNEDORIG needs `base_dir`, the model fine-tuning started from.
    Head training rows are a seeded sample of at most `max_train_examples` train rows.
    """
    frame, tokenizer, model, max_length = _evaluation_setup(model_dir, dataset_dir, split, device)
    name = Path(model_dir).name
    train = load_split(dataset_dir, "train")
    rows = _untuned_rows(model, tokenizer, frame, batch_size, max_length, device, name)
    counts = train["label"].value_counts()
    majority = min(counts[counts == counts.max()].index)  # ties: the lowest class, deterministically
    _scored(rows, "MAJORITY", -1, np.full(len(frame), majority), frame["label"].to_numpy())
    if heads is not None:
        heads = HEAD_DEFAULTS | heads
        seed = int(read_meta(model_dir)["seed"])
        if len(train) > heads["max_train_examples"]:
            train = train.sample(n=int(heads["max_train_examples"]), random_state=seed).sort_index()
        n_labels = model.config.num_labels
        encoders = {"TUNED": (model.base_model, tokenizer)}
        if base_dir is not None:
            encoders["TUNEDORIG"] = (load_encoder(base_dir, device), load_tokenizer(base_dir))
        for mode, (encoder, encoder_tokenizer) in encoders.items():
            rows += _tuned_head_rows(mode, encoder, encoder_tokenizer, train, frame, n_labels, heads, seed,
                                     batch_size, max_length, device, name)
    table = _tagged(rows, split, frame, model_dir, device)
    table["n_train_heads"] = len(train) if heads is not None else 0
    return table


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
    """Phang et al. (2021, §4.1): scores with every contiguous span [start, end] of blocks skipped
    (identity in their place), no further training. Blocks are numbered 1..L; the row
    start = end = 0 is the full model (nothing skipped)."""
    frame, tokenizer, model, max_length = _evaluation_setup(model_dir, dataset_dir, split, device)
    blocks = transformer_blocks(model)
    depth = len(blocks)
    batches = list(eval_batches(tokenizer, frame, batch_size, max_length, device))
    spans = [(0, 0)] + [(i, j) for i in range(1, depth + 1) for j in range(i, depth + 1)]
    labels = frame["label"].to_numpy()
    rows = []
    for start, end in progress(spans, unit="span", desc=f"skip {Path(model_dir).name}"):
        kept = [block for index, block in enumerate(blocks, start=1) if not start <= index <= end]
        _set_blocks(model, torch.nn.ModuleList(kept))
        predictions = torch.cat([
            model(**{k: v for k, v in batch.items() if k != "labels"}, use_cache=False).logits.argmax(-1).cpu()
            for batch in batches
        ]).numpy()
        for metric, value in classification_scores(predictions, labels).items():
            rows.append({"start": start, "end": end, "blocks_skipped": end - start + 1 if start else 0,
                         "metric": metric, "value": value})
    _set_blocks(model, blocks)
    return _tagged(rows, split, frame, model_dir, device)
