"""A classifier's task head on stored last-layer rows (the token its head reads, from an activation store): what
the model outputs, without a forward pass through its blocks (layer injection, a fine-tuned model's predictions)."""

from __future__ import annotations

import numpy as np
import torch

from reprsim.nets.classifiers import head_logits
from reprsim.nets.loading import n_layers


def head_pooling(config) -> str:
    """The stored pooling that holds the token a classification head of this family reads."""
    return "last" if config.model_type == "gpt2" else "cls"


@torch.inference_mode()
def head_logits_of_rows(model, rows: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """`model`'s task head on last-layer head-token vectors (rows, d), a one-token sequence per row: its logits
    (rows, outputs), float32, computed on the model's device."""
    device = next(model.parameters()).device
    layer = n_layers(model.config)
    outputs = []
    for start in range(0, len(rows), batch_size):
        hidden = torch.as_tensor(rows[start:start + batch_size], dtype=torch.float32, device=device)[:, None, :]
        mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=device)
        outputs.append(head_logits(model, hidden, mask, layer).float().cpu())
    return torch.cat(outputs).numpy()
