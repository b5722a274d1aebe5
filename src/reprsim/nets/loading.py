"""Loading materialised models and tokenizers, and the facts every model's meta.json records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModel,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
)

from reprsim.io.provenance import versions


def load_tokenizer(model_dir: str | Path):
    """The tokenizer of a materialised model, right-padded and with a pad token."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        # GPT-2 style tokenizers have no pad token; padding positions are masked out anyway
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def n_layers(config) -> int:
    return int(config.num_hidden_layers)


def describe_model(model: PreTrainedModel) -> dict[str, Any]:
    """The facts about a model every meta.json records."""
    return {
        "architecture": model.config.model_type,
        "n_layers": n_layers(model.config),
        "hidden_size": int(model.config.hidden_size),
        "n_parameters": int(sum(p.numel() for p in model.parameters())),
        "versions": versions(),
    }


def load_encoder(model_dir: str | Path, device: torch.device) -> PreTrainedModel:
    """The encoder (no task head) of a materialised model, in eval mode on `device`."""
    model = AutoModel.from_pretrained(model_dir)
    return model.to(device).eval()


def load_classifier(model_dir: str | Path, device: torch.device):
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    return model.to(device).eval()
