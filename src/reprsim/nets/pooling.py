"""Pooling token-level hidden states into one row per example: the definitions the extract stage stores
(reprsim.stages.extract.activations, ``pooled/{mean,cls,last}`` and ``tokens/hidden``) and the public
``reprsim.activations`` returns, written once.

    mean    the mean over an example's real tokens (the attention mask's ones; padding excluded)
    cls     the first real token
    last    the last real token
    tokens  every real token's row, padding dropped (example-major, then position)

`mask` is (batch, tokens), 1 (or True) at real tokens. The extract stage pads on the right, where the first
real token is position 0 and the last is position length - 1; a left-padded mask gets the same definitions.
"""

from __future__ import annotations

import torch

POOLINGS = ("mean", "cls", "last")  # the pooled views a store holds (pooled/{name})


def pool(hidden, mask: torch.Tensor, names=POOLINGS) -> dict[str, torch.Tensor]:
    """Pooled views (layers, batch, d), float32, of hidden states under attention mask (batch, tokens): `hidden` is
    one (batch, tokens, d) tensor per layer (model output's hidden_states), or them stacked. Per layer, without
    stacking the layers: the mean is one batched matrix product."""
    lengths = mask.sum(dim=1)
    views = {}
    if "mean" in names:
        weights = (mask.to(torch.float32) / lengths.to(torch.float32)[:, None])[:, None, :]  # (batch, 1, tokens)
        views["mean"] = torch.stack([torch.bmm(weights, h.float())[:, 0] for h in hidden])
    if "cls" in names or "last" in names:
        first, last = ends(mask)
        batch = torch.arange(mask.shape[0], device=mask.device)
        if "cls" in names:
            views["cls"] = torch.stack([h[batch, first].float() for h in hidden])
        if "last" in names:
            views["last"] = torch.stack([h[batch, last].float() for h in hidden])
    return views


def ends(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each example's first and last real position (batch,): 0 and length - 1 under right padding."""
    positions = torch.arange(mask.shape[1], device=mask.device)
    real = mask.bool()
    first = torch.where(real, positions, mask.shape[1]).amin(dim=1)
    last = torch.where(real, positions, -1).amax(dim=1)
    return first, last


def token_rows(hidden: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every real token's row of one layer's (batch, tokens, d) hidden states, float32 (n_real, d), with its example
    (its index in the batch) and position (its index among the example's real tokens: the store's
    ``tokens/hidden[offsets[example] + position]``), both (n_real,) int64. Rows are example-major, then position."""
    real = mask.bool()
    example, column = real.nonzero(as_tuple=True)
    position = (real.cumsum(dim=1) - 1)[example, column]
    return hidden[example, column].float(), example, position
