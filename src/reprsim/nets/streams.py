"""A model's residual stream between its blocks: read at chosen layers in one forward pass, and fed back in to
continue the model from a layer (stitching, reprsim.stages.stitch; skipping blocks, reprsim.stages.finetune.skip).

Layer l is the stream after block l (0 = the embedding output), read at the block's output: for GPT-2 the top
layer is taken before the final LayerNorm. The forward passes run on the model's own modules, through hooks.
"""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace
from typing import Iterator, Sequence

import torch

from reprsim.nets.classifiers import embedding_output, set_blocks, transformer_blocks


def _first(output):
    return output[0] if isinstance(output, tuple) else output


class _Captured(Exception):
    """Raised by the capture hook once the highest layer asked for is in hand: the blocks above it never run."""


def model_inputs(batch: dict) -> dict:
    """The arguments a forward pass takes from a batch (no labels: the stitch computes its own loss)."""
    return {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}


@torch.no_grad()
def residual_stream(model, batch: dict, layers: Sequence[int]) -> dict[int, torch.Tensor]:
    """The residual stream of `model` at each of `layers` (batch, tokens, d), from one forward pass that stops
    after the highest of them."""
    return _capture(model, batch, layers, complete=False)


@torch.no_grad()
def streams_and_output(model, batch: dict, layers: Sequence[int]) -> tuple[dict[int, torch.Tensor], object]:
    """The residual stream at each of `layers` and the model's output, from one whole forward pass."""
    return _capture(model, batch, layers, complete=True)


def _capture(model, batch: dict, layers: Sequence[int], complete: bool):
    modules = [embedding_output(model), *transformer_blocks(model)]
    wanted = sorted(set(int(layer) for layer in layers))
    if not wanted or wanted[0] < 0 or wanted[-1] >= len(modules):
        raise ValueError(f"layers {list(layers)} outside 0..{len(modules) - 1} of a {model.config.model_type} model")
    captured: dict[int, torch.Tensor] = {}

    def hook(layer: int):
        def capture(module, args, output):
            captured[layer] = _first(output).detach()
            if layer == wanted[-1] and not complete:
                raise _Captured
        return capture

    handles = [modules[layer].register_forward_hook(hook(layer)) for layer in wanted]
    try:
        if complete:
            return captured, model(**model_inputs(batch), use_cache=False)
        model.base_model(**model_inputs(batch), use_cache=False)
    except _Captured:
        pass
    finally:
        for handle in handles:
            handle.remove()
    return captured


@contextmanager
def continued_from(model, layer: int) -> Iterator[SimpleNamespace]:
    """Within the block, `model(**inputs)` runs g_{>layer}: its blocks layer + 1..L (and head) on
    `state.stream` in place of its own embedding output. Yields `state`."""
    blocks = transformer_blocks(model)
    if not 0 <= layer <= len(blocks):
        raise ValueError(f"cannot continue a {len(blocks)}-block {model.config.model_type} model after layer {layer}")
    state = SimpleNamespace(stream=None)

    def replace(module, args, output):
        if state.stream is None:
            raise RuntimeError("continued_from: set state.stream before the forward pass")
        return state.stream

    handle = embedding_output(model).register_forward_hook(replace)
    set_blocks(model, torch.nn.ModuleList(list(blocks)[layer:]))
    try:
        yield state
    finally:
        set_blocks(model, blocks)
        handle.remove()
