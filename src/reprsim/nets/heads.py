"""A classifier's task head on stored rows (the token its head reads, from an activation store): what the model
outputs, without a forward pass through its blocks (layer injection, a fine-tuned model's predictions,
truncation's UNTUNED and evaluation features); and whether a store holds exactly the rows a model's own forward
pass would give."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reprsim.io.datasets import read_meta
from reprsim.io.store import open_store, pooled_rows, split_examples
from reprsim.nets.classifiers import head_logits, head_token, token_types_matter
from reprsim.nets.loading import n_layers


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


def stored_head_rows(store_path: str | Path, config, tokenizer, model_dir: str | Path, dataset_dir: str | Path,
                     split: str, frame: pd.DataFrame, max_length: int) -> np.ndarray | None:
    """Every layer's rows (layers + 1, len(frame), d) of the token the model's head reads (:func:`head_token`) for
    the rows of `frame` (rows of `split`, in any order: its index is each row's position in the split), read from
    the activation store at `store_path` when they are what the model's own forward pass computes: the store of
    this model on this dataset (their content hashes), holding these rows, float32 from full-precision passes over
    at most `max_length` tokens, and no token types that change the model (the extract stage's passes feed none).
    Otherwise None, saying why; the caller runs the forward pass. The store's passes batch the rows differently:
    its rows differ from a forward pass's own by float rounding."""
    store, pooling = open_store(store_path), head_token(config)
    attrs = store.attrs
    checks = {
        "another model's store": attrs.get("model_hash") == read_meta(model_dir)["content_hash"],
        "another dataset's store": attrs.get("dataset_hash") == read_meta(dataset_dir)["content_hash"],
        f"no split {split}": split in attrs.get("split_names", []),
        f"no {pooling} pooling": pooling in attrs.get("poolings", []),
        f"stored as {attrs.get('dtype')}": attrs.get("dtype") == "float32",
        "extracted under autocast": (attrs.get("batching") or {}).get("autocast") is None,
        f"max_length {attrs.get('max_length')}, not {max_length}": attrs.get("max_length") == max_length,
        "token types the store's passes lack": not token_types_matter(config, tokenizer, frame),
    }
    positions = None
    if checks[f"no split {split}"]:
        stored = store["examples/row"][:][split_examples(store, split)]  # each stored example's row of the split
        where = {int(row): position for position, row in enumerate(stored)}
        positions = [where.get(int(row)) for row in frame.index]
        checks[f"not every row of split {split}"] = None not in positions
    if not all(checks.values()):
        print(f"{store_path} does not hold the head inputs ({', '.join(k for k, ok in checks.items() if not ok)}): "
              "running the forward pass", flush=True)
        return None
    return pooled_rows(store, pooling, split)[:, positions]
