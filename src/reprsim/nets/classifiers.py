"""Sequence classifiers as the finetune and align stages use them: batches of encoded rows, the
transformer blocks, a family's task head on any layer, a fresh head, and the task scores."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd
import torch

from reprsim.nets.loading import n_layers


def tokenize_rows(tokenizer, rows: pd.DataFrame, max_length: int, **options) -> dict:
    pairs = rows["text_pair"].tolist() if rows["text_pair"].notna().any() else None
    return tokenizer(rows["text"].tolist(), pairs, truncation=True, max_length=max_length, **options)


def encode_rows(tokenizer, frame: pd.DataFrame, indices: np.ndarray, max_length: int, device) -> dict:
    rows = frame.iloc[indices]
    encoded = tokenize_rows(tokenizer, rows, max_length, padding=True, return_tensors="pt")
    batch = {k: v.to(device) for k, v in encoded.items()}
    batch["labels"] = torch.tensor(rows["label"].to_numpy(), device=device)
    return batch


def eval_batches(tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device) -> Iterator[dict]:
    for start in range(0, len(frame), batch_size):
        yield encode_rows(tokenizer, frame, np.arange(start, min(start + batch_size, len(frame))), max_length, device)


def token_lengths(tokenizer, frame: pd.DataFrame, max_length: int) -> np.ndarray:
    return np.array([len(ids) for ids in tokenize_rows(tokenizer, frame, max_length)["input_ids"]])


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


def set_blocks(model, blocks: torch.nn.ModuleList) -> None:
    """Swap the model's block stack (the ModuleList transformer_blocks found) for `blocks`."""
    current = transformer_blocks(model)
    for parent in model.base_model.modules():
        for name, child in parent.named_children():
            if child is current:
                setattr(parent, name, blocks)
                return
    raise NotImplementedError("cannot replace the transformer blocks of this model")


def embedding_output(model) -> torch.nn.Module:
    """The module whose output is the residual stream entering block 1 (layer 0): BERT-style
    `embeddings` (token + position + type embeddings, LayerNorm, dropout), GPT-2's `drop`
    (dropout of token + position embeddings)."""
    base = model.base_model
    for name in ("embeddings", "drop"):
        module = getattr(base, name, None)
        if isinstance(module, torch.nn.Module):
            return module
    raise NotImplementedError(f"cannot find the embedding output of a {model.config.model_type!r} model")


def embedding_modules(model) -> list[torch.nn.Module]:
    base = model.base_model
    if hasattr(base, "embeddings"):
        return [base.embeddings]
    return [m for m in (getattr(base, "wte", None), getattr(base, "wpe", None)) if m is not None]


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


def length_order(tokenizer, frame: pd.DataFrame, max_length: int) -> np.ndarray:
    """The rows in order of token length (stable): batches cut from it pad little (about half the
    tokens of SST-2's rows in their own order)."""
    return np.argsort(token_lengths(tokenizer, frame, max_length), kind="stable")


@torch.inference_mode()
@torch.no_grad()
def logits(model, tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device) -> np.ndarray:
    """The model's output logits (rows, outputs) for every row of `frame` (in its order; computed in order of
    length), float32."""
    order = length_order(tokenizer, frame, max_length)
    outputs = [
        model(**{k: v for k, v in batch.items() if k != "labels"}).logits.float().cpu()
        for batch in eval_batches(tokenizer, frame.iloc[order], batch_size, max_length, device)
    ]
    stacked = torch.cat(outputs).numpy()
    restored = np.empty_like(stacked)
    restored[order] = stacked
    return restored


def predict(model, tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device) -> np.ndarray:
    """The model's predicted class for every row of `frame` (in its order; computed in order of length)."""
    return logits(model, tokenizer, frame, batch_size, max_length, device).argmax(axis=1)


def evaluate(model, tokenizer, frame: pd.DataFrame, batch_size: int, max_length: int, device) -> dict[str, float]:
    return classification_scores(predict(model, tokenizer, frame, batch_size, max_length, device), frame["label"])


def head_logits(model, hidden: torch.Tensor, attention_mask: torch.Tensor, layer: int) -> torch.Tensor:
    """The task head of `model` applied to layer `layer`'s hidden states (batch, tokens, d).

    Equivalent to discarding the blocks above `layer`. Each family feeds its head
    the way its own forward does.
    """
    return head_on_input(model, head_input(model.base_model, hidden, attention_mask, layer))


def head_on_input(model, inputs: torch.Tensor) -> torch.Tensor:
    """The task head of `model` on the token vectors (batch, d) it reads (:func:`head_input`)."""
    kind = model.config.model_type
    if kind == "bert":
        pooled = model.bert.pooler(inputs[:, None]) if model.bert.pooler is not None else inputs
        return model.classifier(model.dropout(pooled))
    if kind in ("roberta", "electra"):
        return model.classifier(inputs[:, None])  # their heads read the first token of (batch, tokens, d)
    if kind == "distilbert":
        pooled = torch.relu(model.pre_classifier(inputs))
        return model.classifier(model.dropout(pooled))
    if kind == "gpt2":
        return model.score(inputs)
    raise NotImplementedError(
        f"truncation is implemented for bert, roberta, electra, distilbert and gpt2 heads; got {kind!r}"
    )


def head_input(encoder, hidden: torch.Tensor, attention_mask: torch.Tensor, layer: int) -> torch.Tensor:
    """The token vector (batch, d) a classification head of this family reads from layer `layer`."""
    if encoder.config.model_type != "gpt2":
        return hidden[:, 0]
    hidden = final_norm(encoder, hidden, layer)
    last = attention_mask.sum(dim=1) - 1
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def head_token(config) -> str:
    """The token a family's classification head reads, by the name of the extract stage's pooling that
    holds it (reprsim.stages.extract.activations.pool): the first ("cls"), GPT-2's last real one ("last")."""
    return "last" if config.model_type == "gpt2" else "cls"


def token_types_matter(config, tokenizer, frame: pd.DataFrame) -> bool:
    """Whether the token type ids the tokenizer gives `frame`'s rows make the model compute other than it does
    without them: a second text of a pair (type 1); GPT-2, which adds the embedding of every token type id it is
    given (BERT-style models take type 0 by default)."""
    if "token_type_ids" not in tokenizer.model_input_names:
        return False
    return bool(frame["text_pair"].notna().any()) or config.model_type == "gpt2"


def final_norm(encoder, hidden: torch.Tensor, layer: int) -> torch.Tensor:
    """Layer `layer`'s hidden states (any leading shape, d) as the family's head sees them: GPT2Model applies
    its final LayerNorm only to the last hidden state, so below the top layer the head input gets it here."""
    if encoder.config.model_type == "gpt2" and layer < n_layers(encoder.config):
        return encoder.ln_f(hidden)
    return hidden


def fresh_head(width: int, n_labels: int, dropout: float) -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Dropout(dropout), torch.nn.Linear(width, width), torch.nn.Tanh(),
        torch.nn.Dropout(dropout), torch.nn.Linear(width, n_labels),
    )
