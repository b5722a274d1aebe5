"""Competence on one yardstick (rule competence_probe, read by the universality study): how well a linear probe
decodes the dataset's labels from each layer of a model, on the rows the study compares. Models of different
objectives, data or widths have cross-entropies that do not compare; a probe of one task on the same rows does.

Nested cross-validation on the compared rows alone (no train split is needed, and no row scores a probe that saw
it): the rows split into `folds` folds once (seeded); for each, the probe's L2 penalty is chosen by cross-validation
on the other folds (scores.cross_validated_penalty) and the probe fitted there (scores.probe_correct) scores the
held-out fold. Each row is then scored exactly once: its correctness, whose mean is the accuracy and whose standard
error over rows gives a t interval. The chance level is the majority label's share of the rows (what a probe that
ignores its input scores)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.inference.resampling import t_quantile
from reprsim.io.datasets import load_split, read_meta
from reprsim.io.store import open_store, pooled_rows
from reprsim.stages.grounding import scores

COLUMNS = ["model", "layer", "accuracy", "ci_low", "ci_high", "chance", "n", "folds", "weight_decays"]


def held_out_correct(X: np.ndarray, y: np.ndarray, n_classes: int, folds: int = 5, seed: int = 0,
                     max_iter: int = 200) -> tuple[np.ndarray, list[float]]:
    """Each row's correctness under the probe fitted without its fold (the penalty chosen on that probe's rows
    alone), and the penalty each fold chose."""
    parts = np.array_split(np.random.default_rng(seed).permutation(len(X)), folds)
    correct, chosen = np.zeros(len(X), dtype=bool), []
    for part in parts:
        fit = np.setdiff1d(np.arange(len(X)), part)
        penalty = scores.cross_validated_penalty(X[fit], y[fit], n_classes, folds=folds, seed=seed,
                                                 max_iter=max_iter)["weight_decay"]
        chosen.append(penalty)
        correct[part] = scores.probe_correct(X[fit], y[fit], X[part], y[part], n_classes, seed=seed,
                                             weight_decay=penalty, max_iter=max_iter)
    return correct, chosen


def competence_table(store_path: str | Path, dataset_dir: str | Path, representation: str, split: str,
                     confidence: float = 0.95, folds: int = 5, seed: int = 0) -> pd.DataFrame:
    """The probe's held-out accuracy on every layer of a model but the embeddings, with its interval over rows and
    the chance level (:data:`COLUMNS`)."""
    store = open_store(store_path)
    stack = pooled_rows(store, representation, split).astype(np.float64)
    labels = load_split(dataset_dir, split)["label"].to_numpy()[:stack.shape[1]]
    n_classes = int(read_meta(dataset_dir)["n_labels"])
    if len(labels) != stack.shape[1]:
        raise ValueError(f"{store_path}: {stack.shape[1]} rows of split {split!r} but {len(labels)} labels in "
                         f"{dataset_dir}")
    chance = float(np.bincount(labels.astype(int), minlength=n_classes).max() / len(labels))
    rows = []
    for layer in range(1, len(stack)):
        correct, chosen = held_out_correct(stack[layer], labels, n_classes, folds=folds, seed=seed)
        # each row scored once, by a probe that never saw it: the t interval of a mean over rows
        half = float(t_quantile(len(correct), confidence)) * correct.std(ddof=1) / np.sqrt(len(correct))
        low, high = float(correct.mean() - half), float(correct.mean() + half)
        rows.append({"model": store.attrs["model"], "layer": layer, "accuracy": float(correct.mean()),
                     "ci_low": low, "ci_high": high, "chance": chance, "n": len(correct), "folds": folds,
                     "weight_decays": ", ".join(f"{p:g}" for p in chosen)})
        print(f"{store.attrs['model']} layer {layer}: probe accuracy {correct.mean():.3f} [{low:.3f}, {high:.3f}] "
              f"(chance {chance:.3f}, n = {len(correct)})", flush=True)
    return pd.DataFrame(rows, columns=COLUMNS)


def best_layers(tables: pd.DataFrame) -> pd.DataFrame:
    """Each model's best-decoding layer (its competence: what is linearly decodable anywhere in it), one row per
    model, ties to the lower layer."""
    ordered = tables.sort_values(["model", "accuracy", "layer"], ascending=[True, False, True])
    return ordered.drop_duplicates("model").set_index("model")
