"""Token-level similarity streamed from two activation stores (Brown et al. 2023: minibatch CKA on tokens).

Token rows of two stores correspond only when both models tokenised the inputs the
same way; that is checked, not assumed. Batches are consecutive runs of `batch_size`
tokens read straight from the Zarr chunks, so memory stays that of one batch
whatever the number of tokens.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from reprsim.io.logs import progress
from reprsim.io.store import open_store
from reprsim.metrics.cka import MinibatchHSIC


def token_minibatch_cka(
    store_a_path: str | Path, store_b_path: str | Path, batch_size: int = 1024, kernel: str = "linear",
    threshold: float = 1.0, max_tokens: int | None = None, device: str = "cpu",
) -> tuple[np.ndarray, dict]:
    """Unbiased minibatch CKA for every layer pair over the stores' token-level hidden states."""
    store_a, store_b = open_store(store_a_path), open_store(store_b_path)
    for store, path in ((store_a, store_a_path), (store_b, store_b_path)):
        if "tokens/hidden" not in store:
            raise KeyError(f"{path} has no token-level hidden states; extract with tokens: true")
    ids_a, ids_b = store_a["tokens/input_ids"], store_b["tokens/input_ids"]
    if ids_a.shape != ids_b.shape or not np.array_equal(ids_a[:], ids_b[:]):
        raise ValueError(
            "the two stores tokenised the inputs differently; token rows do not correspond "
            "(compare at word level after sub-word aggregation instead)"
        )
    n_tokens = ids_a.shape[0] if max_tokens is None else min(max_tokens, ids_a.shape[0])
    batches = n_tokens // batch_size
    if batches < 1:
        raise ValueError(f"batch_size {batch_size} exceeds the {n_tokens} tokens available")
    hidden_a, hidden_b = store_a["tokens/hidden"], store_b["tokens/hidden"]
    accumulator = MinibatchHSIC(kernel, threshold)
    for b in progress(range(batches), unit="batch", desc="token CKA"):
        rows = slice(b * batch_size, (b + 1) * batch_size)
        accumulator.add(torch.from_numpy(hidden_a[:, rows]).to(device), torch.from_numpy(hidden_b[:, rows]).to(device))
    meta = {"measure": "cka_minibatch", "kind": "similarity", "kernel": kernel, "estimator": "unbiased-minibatch",
            "batch_size": batch_size, "n_batches": batches, "n_tokens": n_tokens,
            "dropped_tokens": n_tokens - batches * batch_size}
    return accumulator.cka().cpu().numpy(), meta
