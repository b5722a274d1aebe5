"""Layer injection (Ren et al. 2023, §4.5, Table 5): does a map between two fine-tuned models keep behaviour?

For models M1 and M2 fine-tuned on the same task, X is M1's last-layer representation of
the token its head reads and Y is M2's. An aligner g fit on train rows (X → Y, selected on
validation rows) maps M1's held-out representations into M2's space, and M2's own task
head, unchanged, classifies g(X). Reference rows: M2's head on its own Y (what a perfect map
would reach), a randomly initialised head of M2's family on the base model's representation
(their "Random Emb."), and uniformly random labels ("Random Label").
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification

from reprsim.aligners.linear import relative_error
from reprsim.aligners.registry import SHARING, make
from reprsim.io.store import open_store, pooled_rows, split_examples
from reprsim.nets.bidirectional import restore_attention
from reprsim.nets.classifiers import classification_scores, head_token
from reprsim.nets.heads import head_logits_of_rows
from reprsim.nets.loading import load_classifier


def last_layer_rows(store_path: str | Path, pooling: str, split: str) -> np.ndarray:
    return pooled_rows(open_store(store_path), pooling, split)[-1].astype(np.float32)


def split_labels(store_path: str | Path, split: str) -> np.ndarray:
    store = open_store(store_path)
    return store["examples/label"][:][split_examples(store, split)]


def classify(model, representation: np.ndarray) -> np.ndarray:
    """`model`'s head on last-layer head-token vectors (rows, d): the predicted class per row."""
    return head_logits_of_rows(model, representation).argmax(axis=1)


def _random_head_model(model_dir: str | Path, seed: int):
    """M2's architecture with every weight (head included) drawn afresh from its initialiser."""
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(model_dir))
    return restore_attention(model).eval()


def layer_injection(
    stores: dict[str, str | Path], source: str, target: str, target_dir: str | Path, base: str,
    aligners: dict[str, tuple[str, dict]], splits: dict[str, str], seed: int = 0,
) -> pd.DataFrame:
    """Rows (source, target, method, metric, value, rel_error) for one direction source → target.

    `stores` maps model names (source, target, base) to activation stores; `splits` maps the
    roles fit / select / score to split names.
    """
    model = load_classifier(target_dir, torch.device("cpu"))
    pooling = head_token(model.config)
    rows = {role: {name: last_layer_rows(stores[name], pooling, split) for name in (source, target)}
            for role, split in splits.items()}
    labels = split_labels(stores[target], splits["score"])
    if not np.array_equal(labels, split_labels(stores[source], splits["score"])):
        raise ValueError(f"{source} and {target} stores hold different {splits['score']!r} rows; re-extract alike")
    X, Y = rows["score"][source], rows["score"][target]
    out = []

    def record(method: str, predictions: np.ndarray, rel_error: float = np.nan, **meta) -> None:
        for metric, value in classification_scores(predictions, labels).items():
            out.append({"source": source, "target": target, "method": method, "metric": metric, "value": value,
                        "rel_error": rel_error, **meta})

    record("target model", classify(model, Y))
    shared = ({}, {})  # the CCA family's decompositions of the fit rows, made once
    for label, (name, params) in aligners.items():
        started = time.perf_counter()
        options = {"shared": shared} if name in SHARING else {}
        aligner = make(name, **params).fit(rows["fit"][source], rows["fit"][target],
                                           rows["select"][source], rows["select"][target], **options)
        mapped = np.asarray(aligner.transform(X), dtype=np.float32)
        record(label, classify(model, mapped), relative_error(Y, mapped), aligner=name,
               fit_seconds=round(time.perf_counter() - started, 2))
    base_rows = last_layer_rows(stores[base], pooling, splits["score"])
    record("random embedding", classify(_random_head_model(target_dir, seed), base_rows))
    n_labels = model.config.num_labels
    record("random label", np.random.default_rng(seed).integers(0, n_labels, size=len(labels)))
    table = pd.DataFrame(out)
    table["split"], table["n"] = splits["score"], len(labels)
    return table
