"""Loading materialised models and tokenizers, and the facts every model's meta.json records.

Weights load from safetensors only (never a pickle) and no model's own code runs
(trust_remote_code=False). A directory that lacks a file or holds a damaged one fails with
CorruptOutputError before transformers reads it; a model with NaN or inf weights fails when loaded.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from itertools import chain
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
)

from reprsim.io.integrity import CorruptOutputError, remake_command
from reprsim.io.model_files import config_problems, tokenizer_problems, weights_problems
from reprsim.io.outputs import atomic_directory, write_json
from reprsim.io.provenance import FINETUNE_UNHASHED, file_checksums, hash_directory, versions
from reprsim.nets.bidirectional import restore_attention

# what transformers raises on a file it cannot parse (a safetensors file's header is checked before)
UNREADABLE = (OSError, ValueError)


def _require(model_dir: Path, problems: list[tuple[Path, str]]) -> None:
    if problems:
        path, problem = problems[0]
        raise CorruptOutputError(path, problem, model_dir)


def open_tokenizer(model_dir: str | Path):
    """The tokenizer saved in a model directory, as saved."""
    model_dir = Path(model_dir)
    _require(model_dir, tokenizer_problems(model_dir))
    try:
        return AutoTokenizer.from_pretrained(model_dir, trust_remote_code=False)
    except Exception as error:  # tokenizers raises a bare Exception on a damaged tokenizer.json
        raise CorruptOutputError(model_dir, f"the tokenizer does not load ({type(error).__name__}: {error})") from error


def load_tokenizer(model_dir: str | Path):
    """The tokenizer of a materialised model, right-padded and with a pad token."""
    tokenizer = open_tokenizer(model_dir)
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


def _finite(tensor: torch.Tensor) -> bool:
    # a finite sum has no NaN or inf in it (one pass, no mask); an infinite one may be overflow: look closer
    return bool(torch.isfinite(tensor.sum())) or bool(torch.isfinite(tensor).all())


@torch.no_grad()
def check_finite(model: PreTrainedModel, what: str, fix: str) -> None:
    """Refuse a model with NaN or inf in any parameter or floating buffer, naming them (`what`: the model)."""
    tensors = chain(model.named_parameters(), model.named_buffers())
    bad = [name for name, tensor in tensors if tensor.is_floating_point() and not _finite(tensor)]
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise ValueError(f"{what}: non-finite weights (NaN or inf) in {len(bad)} tensor(s): {shown}; {fix}")


def _load(auto_class, model_dir: str | Path, device: torch.device, **config) -> PreTrainedModel:
    model_dir = Path(model_dir)
    _require(model_dir, config_problems(model_dir) + weights_problems(model_dir))
    try:
        model = auto_class.from_pretrained(model_dir, use_safetensors=True, trust_remote_code=False, **config)
    except UNREADABLE as error:
        raise CorruptOutputError(model_dir, f"transformers cannot load it ({type(error).__name__}: {error})") from error
    model = restore_attention(model).to(device).eval()
    check_finite(model, str(model_dir), "the weights were written so (a fine-tuning that diverged: lower its "
                 f"learning_rate), or changed since; remake it: {remake_command(model_dir)}")
    return model


def load_encoder(model_dir: str | Path, device: torch.device, attention: bool = False) -> PreTrainedModel:
    """The encoder (no task head) of a materialised model, in eval mode on `device`; with `attention`, in
    transformers' eager attention, the implementation that returns attention weights."""
    return _load(AutoModel, model_dir, device, **({"attn_implementation": "eager"} if attention else {}))


def load_classifier(model_dir: str | Path, device: torch.device, **config):
    """The model with a sequence-classification head, in eval mode on `device`; `config` overrides
    config fields (num_labels, pad_token_id: a base model given a new head, initialised from torch's RNG)."""
    return _load(AutoModelForSequenceClassification, model_dir, device, **config)


def load_causal_lm(model_dir: str | Path, device: torch.device, **config):
    """The model with its causal language-modelling head (a pretrained model, source pretrain), in eval mode on
    `device`; `config` overrides config fields. Same checks as every load: safetensors only, no remote code,
    finite weights."""
    return _load(AutoModelForCausalLM, model_dir, device, **config)


def save_trained_model(model: PreTrainedModel, tokenizer, out_dir: str | Path, log: list[dict], meta: dict[str, Any],
                       attach: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """A model trained by the workflow (fine-tuned, pretrained) written atomically: save_pretrained weights, the
    tokenizer, its training_log.csv and meta.json, which gains the content hash (training log and meta left
    out) and a checksum per file (so that `reprsim verify` names a damaged one). `attach`: name -> directory
    moved into the output under that name after the hash is taken (outputs with a meta.json of their own, such
    as a pretraining's checkpoints), so the content hash stays the model's own. Returns the meta written."""
    with atomic_directory(out_dir) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        pd.DataFrame(log).to_csv(tmp / "training_log.csv", index=False)
        meta = {**meta, "content_hash": hash_directory(tmp, skip=FINETUNE_UNHASHED), "checksums": file_checksums(tmp)}
        write_json(tmp / "meta.json", meta)
        for name, directory in (attach or {}).items():
            shutil.move(directory, tmp / name)
    return meta
