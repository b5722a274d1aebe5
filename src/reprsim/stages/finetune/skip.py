"""Skipping blocks (Phang et al. 2021, §4.1): a fine-tuned model scored with a contiguous span of
its blocks replaced by the identity, no further training."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from reprsim.io.logs import progress
from reprsim.nets.classifiers import classification_scores, eval_batches, transformer_blocks
from reprsim.nets.streams import continued_from, model_inputs, streams_and_output
from reprsim.stages.finetune.evaluation import evaluation_setup, tagged


@torch.inference_mode()
def skip_spans(model_dir: str | Path, dataset_dir: str | Path, split: str, batch_size: int, device: torch.device
               ) -> pd.DataFrame:
    """Phang et al. (2021, §4.1): scores with every contiguous span [start, end] of blocks skipped
    (identity in their place), no further training. Blocks are numbered 1..L; the row
    start = end = 0 is the full model (nothing skipped).

    The model with blocks start..end skipped runs blocks 1..start − 1, then end + 1..L: the first part is the
    full model's own, so each batch's stream after every block is read once from the full model's pass, and a
    span only continues the model after `end` from the stream after block start − 1 (reprsim.nets.streams): the
    same operations on the same inputs as running the shortened model, at about half the blocks."""
    frame, tokenizer, model, max_length = evaluation_setup(model_dir, dataset_dir, split, device)
    depth = len(transformer_blocks(model))
    spans = [(0, 0)] + [(i, j) for i in range(1, depth + 1) for j in range(i, depth + 1)]
    predictions = {span: [] for span in spans}
    batches = list(eval_batches(tokenizer, frame, batch_size, max_length, device))
    for batch in progress(batches, unit="batch", desc=f"skip {Path(model_dir).name}: {len(spans)} spans"):
        streams, full = streams_and_output(model, batch, range(depth))
        predictions[(0, 0)].append(full.logits.argmax(-1).cpu())
        for start, end in spans[1:]:
            with continued_from(model, end) as state:
                state.stream = streams[start - 1]
                predictions[(start, end)].append(model(**model_inputs(batch), use_cache=False).logits.argmax(-1).cpu())
    labels = frame["label"].to_numpy()
    rows = []
    for start, end in spans:
        for metric, value in classification_scores(torch.cat(predictions[(start, end)]).numpy(), labels).items():
            rows.append({"start": start, "end": end, "blocks_skipped": end - start + 1 if start else 0,
                         "metric": metric, "value": value})
    return tagged(rows, split, frame, model_dir, device)
