"""Pretraining a small language model from scratch on a dataset's text (source `pretrain`), offline.

`objective: causal` builds a GPT-2 (`GPT2LMHeadModel`) and trains it on next-token prediction. `objective:
masked` trains on BERT's masked-token prediction (a share `mask_probability` of the tokens selected, of which 80%
masked, 10% replaced, 10% kept: `language_models.mask_tokens`), in the blocks `blocks` names: `gpt2` (the default)
is the causal LM's own architecture, its attention made bidirectional (:mod:`reprsim.nets.bidirectional`) and its
tied LM head predicting the token at each masked position, so that it differs from the causal LM in the objective
only; `bert` builds a BERT (`BertForMaskedLM`) of the same sizes, its config translated from the same GPT-2 fields
(:mod:`reprsim.nets.gpt2_as_bert`), which changes the architecture too (post-LayerNorm, token types). Either is
built as a random `init` model is (vocabulary and special tokens from its tokenizer: one
borrowed from another model, or a byte-level BPE trained on a dataset's train split; a masked LM's tokenizer
gains a mask token where it has none), its activation set by the spec's `activation`, then trained on the train
split's text packed into blocks of `context` tokens (:mod:`reprsim.nets.language_models`): AdamW (weight decay
on weight matrices and embeddings, none on biases and LayerNorms), linear warm-up and decay, the blocks
reshuffled each epoch (seeded). It is scored on the validation split's blocks: the mean cross-entropy in nats
of the next token (causal) or of the masked tokens (masked; the validation blocks masked by one fixed seed,
VALIDATION_MASK_SEED, so that every masked model is scored on the same masks), beside the chance reference,
the cross-entropy of the same target tokens under the train split's (add-one smoothed) unigram frequencies.

`checkpoints: [k, ...]` saves the model after step k as well, scored and saved alike, into
`<out_dir>/checkpoints/<k>/` (moved in after the model's own content hash is taken); the models stage's
:mod:`reprsim.stages.models.checkpoints` copies each out as model `{name}@{k}`. Saving in eval mode draws no
dropout randomness and the masked validation has its own generator, so a checkpoint holds the weights of the
same run stopped at step k, bit for bit, and the run goes on as if it had not been saved.

Reproducible from `spec["seed"]`, which seeds the initialisation, dropout, the order of the blocks and the
training masks: the same seed gives bit-identical weights on one device. The directory saved (save_pretrained +
tokenizer + meta.json + training_log.csv) loads with AutoModel (GPT2Model or BertModel: the extraction stage's
encoder) and with AutoModelForCausalLM (a GPT-2, masked or not) or AutoModelForMaskedLM (a BERT); a bidirectional
GPT-2 through :mod:`reprsim.nets.loading`, which restores its attention's direction.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, get_linear_schedule_with_warmup

from reprsim.io.datasets import read_meta
from reprsim.io.device import describe
from reprsim.io.outputs import temporary_sibling
from reprsim.nets.bidirectional import BIDIRECTIONAL, restore_attention
from reprsim.nets.gpt2_as_bert import bert_fields
from reprsim.nets.language_models import (
    IGNORED,
    add_mask_token,
    lm_cross_entropy,
    mask_tokens,
    masked_lm_cross_entropy,
    masked_lm_loss,
    text_blocks,
    texts_of,
    unigram_cross_entropy,
)
from reprsim.nets.loading import check_finite, describe_model, open_tokenizer, save_trained_model
from reprsim.nets.training import endless_batches, train_steps
from reprsim.stages.models.checkpoints import checkpoint_name, checkpoint_spec
from reprsim.stages.models.materialize import init_model, train_tokenizer

ARCHITECTURES = ("gpt2",)  # the config fields a spec names (a BERT's masked LM translates them)
OBJECTIVES = ("causal", "masked")
BLOCKS = {"gpt2": AutoModelForCausalLM, "bert": AutoModelForMaskedLM}  # a masked LM's blocks: built as
ACTIVATION_FIELD = {"gpt2": "activation_function", "bert": "hidden_act"}
MASK_PROBABILITY = 0.15  # the schema's default (BERT's)
VALIDATION_MASK_SEED = 0  # the masks every masked model is scored on, whatever its own seed
DIVERGED = "the training diverged: lower its learning_rate, raise warmup_fraction or set max_grad_norm"

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


def bert_overrides(name: str, spec: dict) -> dict:
    """The BertConfig fields of a masked LM (`objective: masked`): the GPT-2 fields :func:`gpt2_overrides` gives,
    translated (:func:`reprsim.nets.gpt2_as_bert.bert_fields`), so that the masked LM has the width, depth,
    heads, MLP, dropout and positions of the causal LM the same spec would build."""
    gpt2 = gpt2_overrides(name, spec)
    try:
        return bert_fields(gpt2)
    except ValueError as error:
        raise ValueError(f"models.{name}.{error} (objective masked)") from None


def _decayed(model) -> list[dict]:
    """AdamW parameter groups: weight decay on weight matrices and embeddings, none on biases and LayerNorms."""
    matrices = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    others = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    return [{"params": matrices}, {"params": others, "weight_decay": 0.0}]


def pretrain_model(
    name: str, spec: dict, dataset_dir: str | Path, out_dir: str | Path, device: torch.device,
    tokenizer_dir: str | Path | None = None, tokenizer_dataset_dir: str | Path | None = None,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """Pretrain model `name` from `spec` (source pretrain) on the train split of the dataset at `dataset_dir`
    and save it into `out_dir` (save_pretrained + tokenizer + training_log.csv + meta.json, and its checkpoints
    under checkpoints/, atomically).

    The tokenizer is the one saved in `tokenizer_dir` (``tokenizer: <model>``) or a byte-level BPE trained on
    the train split of the dataset ``tokenizer: {train: {dataset}}`` names: `dataset_dir` when that is the
    pretraining dataset, else `tokenizer_dataset_dir`. `stop_after` (internal, for tests) stops the run after
    that step, its schedule still the one for `steps`: the model a checkpoint at that step holds.
    """
    architecture, objective = spec.get("architecture", "gpt2"), spec.get("objective", "causal")
    built = spec.get("blocks", "gpt2")
    if architecture not in ARCHITECTURES:
        raise ValueError(f"models.{name}.architecture: {architecture!r}; pretrain supports {', '.join(ARCHITECTURES)}")
    if objective not in OBJECTIVES:
        raise ValueError(f"models.{name}.objective: {objective!r}; pretrain supports {', '.join(OBJECTIVES)}")
    if built not in BLOCKS or (built != "gpt2" and objective != "masked"):
        raise ValueError(f"models.{name}.blocks: {built!r}; a masked LM takes {' or '.join(BLOCKS)}, a causal one gpt2")
    seed, steps, batch_size = int(spec["seed"]), int(spec["steps"]), int(spec["batch_size"])
    context, masked = int(spec["context"]), objective == "masked"
    probability = float(spec.get("mask_probability", MASK_PROBABILITY))
    checkpoints = sorted(int(step) for step in spec.get("checkpoints") or [])
    if any(not 1 <= step < steps for step in checkpoints):
        raise ValueError(f"models.{name}.checkpoints: {checkpoints}; each must lie in 1 .. steps - 1 = {steps - 1}")
    last = steps if stop_after is None else int(stop_after)
    if not 1 <= last <= steps:
        raise ValueError(f"stop_after = {stop_after} must lie in 1 .. steps = {steps}")
    dataset_meta = read_meta(dataset_dir)
    tokenizer, tokenizer_meta = _tokenizer(name, spec, dataset_dir, tokenizer_dir, tokenizer_dataset_dir)
    added = add_mask_token(tokenizer) if masked else None  # one symbol more; text tokenises as before
    train_blocks = text_blocks(tokenizer, texts_of(dataset_dir, "train"), context)
    validation_blocks = text_blocks(tokenizer, texts_of(dataset_dir, "validation"), context)
    if len(train_blocks) < batch_size:
        raise ValueError(f"{name}: the train split makes {len(train_blocks)} blocks of {context} tokens, fewer than "
                         f"batch_size {batch_size}; lower batch_size or context")
    if built == "bert":
        overrides = bert_overrides(name, spec)
    else:  # GPT-2 blocks, attending both ways under the masked objective
        overrides = {**gpt2_overrides(name, spec), **(BIDIRECTIONAL if masked else {})}
    model = restore_attention(init_model(built, overrides, tokenizer, seed, auto_class=BLOCKS[built]))
    model.to(device)
    vocab_size = int(model.config.vocab_size)

    if masked:
        special_ids, mask_id = tokenizer.all_special_ids, tokenizer.mask_token_id
        masking = torch.Generator().manual_seed(seed)  # the training masks: seeded, apart from torch's global stream
        held_out, held_labels = mask_tokens(validation_blocks, probability, mask_id, special_ids, vocab_size,
                                            torch.Generator().manual_seed(VALIDATION_MASK_SEED))
        if not held_labels.ne(IGNORED).any():
            raise ValueError(f"{name}: mask_probability {probability} masks no token of the "
                             f"{validation_blocks.numel()} validation tokens; raise it")

        def loss_of(indices: np.ndarray) -> torch.Tensor:
            inputs, labels = mask_tokens(train_blocks[torch.from_numpy(indices)], probability, mask_id, special_ids,
                                         vocab_size, masking)
            return masked_lm_loss(model(input_ids=inputs.to(device)).logits, labels.to(device))

        def evaluate() -> tuple[float, int]:
            return masked_lm_cross_entropy(model, held_out, held_labels, batch_size, device)

        targets = validation_blocks[held_labels.ne(IGNORED)]
    else:
        def loss_of(indices: np.ndarray) -> torch.Tensor:
            batch = train_blocks[torch.from_numpy(indices)].to(device)
            return model(input_ids=batch, labels=batch, use_cache=False).loss

        def evaluate() -> tuple[float, int]:
            return lm_cross_entropy(model, validation_blocks, batch_size, device)

        targets = None  # every block's tokens but its first
    unigram_ce = unigram_cross_entropy(train_blocks, validation_blocks, vocab_size, targets=targets)

    def record(step: int, log: list[dict], seconds: float) -> dict[str, Any]:
        """What meta.json says of the model after `step` steps, scored on the validation blocks (eval mode)."""
        model.eval()
        check_finite(model, f"pretrained model {name!r} after step {step}", DIVERGED)
        validation_ce, validation_tokens = evaluate()
        print(f"{name}: step {step} of {steps} ({seconds:.1f} s); validation cross-entropy {validation_ce:.4f} nats "
              f"per {'masked ' if masked else ''}token (unigram {unigram_ce:.4f}, uniform {math.log(vocab_size):.4f}) "
              f"over {validation_tokens} tokens", flush=True)
        return {
            "source": "pretrain",
            "seed": seed,
            "dataset": spec["dataset"],
            "dataset_hash": dataset_meta["content_hash"],
            **tokenizer_meta,
            **describe_model(model),  # architecture: the one built (gpt2, or bert for a BERT's masked LM)
            "objective": objective,
            "attention": "causal" if built == "gpt2" and not masked else "bidirectional",
            "mask_probability": probability if masked else None,
            "mask_token": tokenizer.mask_token if masked else None,
            "mask_token_added": added is not None,
            "validation_mask_seed": VALIDATION_MASK_SEED if masked else None,
            "activation": getattr(model.config, ACTIVATION_FIELD[built]),
            "vocab_size": vocab_size,
            "context": context,
            "n_positions": int(model.config.max_position_embeddings),
            "steps": steps,
            "step": step,
            "epochs": round(step * batch_size / len(train_blocks), 3),
            "tokens_per_step": batch_size * context,
            "train_blocks": len(train_blocks),
            "validation_blocks": len(validation_blocks),
            "validation_tokens": validation_tokens,
            "validation_cross_entropy": validation_ce,
            "unigram_cross_entropy": unigram_ce,
            "final_loss": log[-1]["loss"] if log else None,
            "train_seconds": round(seconds, 2),
            "device": describe(device),
        }

    out_dir = Path(out_dir)
    # checkpoints wait beside the output until the model is saved, then move into it (one atomic output)
    staging = temporary_sibling(out_dir.with_name(out_dir.name + ".checkpoints")) if checkpoints else None
    saved: list[int] = []
    started = time.perf_counter()

    def after_step(step: int, log: list[dict]) -> None:
        if step not in checkpoints:
            return
        meta = record(step, log, time.perf_counter() - started)
        save_trained_model(model, tokenizer, staging / str(step), log, {
            **meta, "name": checkpoint_name(name, step), "spec": checkpoint_spec(spec, step), "parent": name,
            "parent_spec": spec, "checkpoint": step})
        saved.append(step)
        model.train()

    optimizer = torch.optim.AdamW(_decayed(model), lr=float(spec["learning_rate"]),
                                  weight_decay=float(spec["weight_decay"]))
    schedule = get_linear_schedule_with_warmup(optimizer, int(math.ceil(spec["warmup_fraction"] * steps)), steps)
    max_grad_norm = spec.get("max_grad_norm")
    blocks = endless_batches(np.full(len(train_blocks), context), batch_size, np.random.default_rng(seed),
                             group_by_length=False)
    try:
        if staging is not None:
            staging.mkdir(parents=True)
        model.train()
        log, seconds = train_steps(
            loss_of, blocks, optimizer, schedule, last, f"pretrain {name}",
            clip=None if max_grad_norm is None else (model.parameters(), float(max_grad_norm)),
            after_step=after_step if checkpoints else None)
        meta = {"name": name, **record(last, log, seconds), "spec": spec, "parent": None, "checkpoints": saved}
        if stop_after is not None:
            meta["stopped_after"] = last
        return save_trained_model(model, tokenizer, out_dir, log, meta,
                                  attach={"checkpoints": staging} if saved else None)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
