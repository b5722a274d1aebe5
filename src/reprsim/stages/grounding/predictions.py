"""A fine-tuned model's outputs on the rows the measures compare (the grounding tests' functional side: ReSi's
accuracy difference, prediction disagreement and Jensen-Shannon divergence, tests 1-2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reprsim.io.datasets import load_split, read_meta
from reprsim.io.device import describe
from reprsim.nets.classifiers import logits
from reprsim.nets.heads import head_logits_of_rows, stored_head_rows
from reprsim.nets.loading import load_classifier, load_tokenizer


def model_predictions(model_dir: str | Path, dataset_dir: str | Path, split: str, max_examples: int | None,
                      batch_size: int, device: torch.device, store: str | Path | None = None) -> pd.DataFrame:
    """One row per example of `split` (the first `max_examples`, as the extraction takes them): its label, the
    predicted class (argmax over every output, as ReSi scores accuracy) and the logits (logit_0 ...; a model
    fine-tuned with label noise has the dataset's classes first, then the new ones).

    The logits are the model's head on its last-layer rows in `store` (the model's activation store) where it
    holds exactly these rows as the model reads them (reprsim.nets.heads.stored_head_rows), else from a forward
    pass."""
    frame = load_split(dataset_dir, split)
    if max_examples is not None:
        frame = frame.iloc[:max_examples]
    meta = read_meta(model_dir)
    max_length = int(meta["spec"]["max_length"])
    model, tokenizer = load_classifier(model_dir, device), load_tokenizer(model_dir)
    rows = None if store is None else stored_head_rows(store, model.config, tokenizer, model_dir, dataset_dir, split,
                                                       frame, max_length)
    if rows is not None:
        outputs, source = head_logits_of_rows(model, rows[-1]), f"the head on {Path(store).name}'s last layer"
    else:
        outputs, source = logits(model, tokenizer, frame, batch_size, max_length, device), "a forward pass"
    n_labels = int(read_meta(dataset_dir)["n_labels"])
    if outputs.shape[1] < n_labels:
        raise ValueError(f"{model_dir}: its head has {outputs.shape[1]} outputs but {dataset_dir} has {n_labels} "
                         "classes; a model fine-tuned on another task cannot be scored on this dataset")
    table = pd.DataFrame({"row": np.arange(len(frame)), "label": frame["label"].to_numpy(),
                          "predicted": outputs.argmax(axis=1)})
    for column in range(outputs.shape[1]):
        table[f"logit_{column}"] = outputs[:, column]
    table["split"], table["model"], table["device"] = split, Path(model_dir).name, describe(device)
    accuracy = float((table["predicted"] == table["label"]).mean())
    print(f"{Path(model_dir).name} on {split}: {len(table)} rows, accuracy {accuracy:.4f} ({source})", flush=True)
    return table
