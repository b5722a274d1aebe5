"""Skipping blocks (Phang et al. 2021, §4.1): a fine-tuned model scored with a contiguous span of
its blocks replaced by the identity, no further training."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from reprsim.io.logs import progress
from reprsim.nets.classifiers import (
    classification_scores,
    eval_batches,
    set_blocks,
    transformer_blocks,
)
from reprsim.stages.finetune.evaluation import evaluation_setup, tagged


@torch.inference_mode()
def skip_spans(model_dir: str | Path, dataset_dir: str | Path, split: str, batch_size: int, device: torch.device
               ) -> pd.DataFrame:
    """Phang et al. (2021, §4.1): scores with every contiguous span [start, end] of blocks skipped
    (identity in their place), no further training. Blocks are numbered 1..L; the row
    start = end = 0 is the full model (nothing skipped)."""
    frame, tokenizer, model, max_length = evaluation_setup(model_dir, dataset_dir, split, device)
    blocks = transformer_blocks(model)
    depth = len(blocks)
    batches = list(eval_batches(tokenizer, frame, batch_size, max_length, device))
    spans = [(0, 0)] + [(i, j) for i in range(1, depth + 1) for j in range(i, depth + 1)]
    labels = frame["label"].to_numpy()
    rows = []
    for start, end in progress(spans, unit="span", desc=f"skip {Path(model_dir).name}"):
        kept = [block for index, block in enumerate(blocks, start=1) if not start <= index <= end]
        set_blocks(model, torch.nn.ModuleList(kept))
        predictions = torch.cat([
            model(**{k: v for k, v in batch.items() if k != "labels"}, use_cache=False).logits.argmax(-1).cpu()
            for batch in batches
        ]).numpy()
        for metric, value in classification_scores(predictions, labels).items():
            rows.append({"start": start, "end": end, "blocks_skipped": end - start + 1 if start else 0,
                         "metric": metric, "value": value})
    set_blocks(model, blocks)
    return tagged(rows, split, frame, model_dir, device)
