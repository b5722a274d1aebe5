"""A fine-tuned model's outputs on the rows the measures compare (the grounding tests' functional side: ReSi's
accuracy difference, prediction disagreement and Jensen-Shannon divergence, tests 1-2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reprsim.io.datasets import load_split, read_meta
from reprsim.io.device import describe
from reprsim.io.store import open_store, pooled_rows, split_examples
from reprsim.nets.classifiers import logits, tokenize_rows
from reprsim.nets.heads import head_logits_of_rows, head_pooling
from reprsim.nets.loading import load_classifier, load_tokenizer


def model_predictions(model_dir: str | Path, dataset_dir: str | Path, split: str, max_examples: int | None,
                      batch_size: int, device: torch.device, store: str | Path | None = None) -> pd.DataFrame:
    """One row per example of `split` (the first `max_examples`, as the extraction takes them): its label, the
    predicted class (argmax over every output, as ReSi scores accuracy) and the logits (logit_0 ...; a model
    fine-tuned with label noise has the dataset's classes first, then the new ones).

    The logits are the model's head on its last-layer rows in `store` (the model's activation store) where it
    holds exactly these rows as the model reads them (:func:`stored_head_rows`, :func:`extracted_alike`), else
    from a forward pass."""
    frame = load_split(dataset_dir, split)
    if max_examples is not None:
        frame = frame.iloc[:max_examples]
    meta = read_meta(model_dir)
    max_length = int(meta["spec"]["max_length"])
    model, tokenizer = load_classifier(model_dir, device), load_tokenizer(model_dir)
    rows = None
    if store is not None and extracted_alike(model, tokenizer, frame, max_length):
        rows = stored_head_rows(store, split, len(frame), max_length, head_pooling(model.config))
    if rows is not None:
        outputs, source = head_logits_of_rows(model, rows), f"the head on {Path(store).name}'s last layer"
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


def extracted_alike(model, tokenizer, frame: pd.DataFrame, max_length: int) -> bool:
    """Whether the extraction fed the model these rows as its forward pass does: it passes no token type ids
    (reprsim.stages.extract.batching), which the BERT-like families read as all 0 but GPT-2 as none (a token
    type 0 adds an embedding); so not a text pair's second segment, nor GPT-2 with a tokenizer that gives types."""
    types = tokenize_rows(tokenizer, frame, max_length).get("token_type_ids")
    return types is None or (model.config.model_type != "gpt2" and not any(map(any, types)))


def stored_head_rows(store_path: str | Path, split: str, rows: int, max_length: int, pooling: str) -> np.ndarray | None:
    """The last-layer rows of the token the head reads (`pooling`) of the first `rows` rows of `split`, from an
    activation store that holds exactly them as the model reads them: extracted at the model's max_length, in
    float32 without autocast; None where it does not (another max_length, fewer or other rows, a reduced
    precision, no such pooling)."""
    store = open_store(store_path)
    attrs = store.attrs
    if (split not in attrs["split_names"] or pooling not in attrs["poolings"] or attrs["max_length"] != max_length
            or attrs["dtype"] != "float32" or (attrs.get("batching") or {}).get("autocast") is not None):
        return None
    examples = split_examples(store, split)
    if not np.array_equal(store["examples/row"][:][examples], np.arange(rows)):
        return None
    return pooled_rows(store, pooling, split)[-1]
