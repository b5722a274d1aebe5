"""The deletion and layer tests' functional side (Ding et al. 2021, §4 and the layer experiment): a linear probe on
every layer of a model at k = 0 and on every deleted version of its deletion layers, fitted once per model (rule
deletion_probes) for every measure's tests. Reads activation stores and the dataset; imports no measure, so a
measure's edit reruns no probe."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.io.datasets import load_split, read_meta
from reprsim.io.store import open_store, pooled_rows
from reprsim.stages.grounding import scores


def layers(path: str | Path, representation: str, split: str) -> np.ndarray:
    """A model's pooled layers (L, n, d) on `split`, float64, read once per process (several tests read the same
    model; the array is read-only)."""
    return _read_layers(str(path), representation, split)


@functools.lru_cache(maxsize=None)
def _read_layers(path: str, representation: str, split: str) -> np.ndarray:
    rows = pooled_rows(open_store(path), representation, split).astype(np.float64)
    rows.flags.writeable = False
    return rows


# `setup` below is a reprsim.stages.grounding.measure_tests.Setup (its stores, dataset, splits, deletion layers, probe)


def labels(setup, split: str, rows: int) -> np.ndarray:
    return load_split(setup.dataset_dir, split)["label"].to_numpy()[:rows]


def deletion_cells(setup, model: str, train: bool = True):
    """Per layer of `grounding.deletion.layers`: (layer, the compared rows X, Ding's grid, the deleted versions
    per k: (test rows, train rows), or (test rows,) without `train`), the components fitted on the train rows (one
    decomposition per layer)."""
    test_layers = layers(setup.stores[model], setup.representation, setup.split)
    train_layers = layers(setup.stores[model], setup.representation, setup.train_split)
    for wanted in setup.deletion_layers:
        layer = len(test_layers) - 1 if wanted == "last" else int(wanted)
        X, X_train = test_layers[layer], train_layers[layer]
        grid = scores.deletion_grid(X.shape[1])
        yield layer, X, grid, scores.delete_low_variance(X_train, [X, X_train] if train else [X], grid)


def probe_table(setup, model: str, deleted: bool = True) -> pd.DataFrame:
    """The linear probe on every layer of `model` but the embeddings (Ding's layer test reads its accuracies) and,
    with `deleted`, on every deleted version of the deletion layers (rule deletion_probes, once per model: every
    measure's tests read it): layer, k, row of the compared split, correct, and the L2 penalty cross-validation
    chose on the train rows at k = 0 (scores.cross_validated_penalty; kept for every k of that layer, so the
    accuracy change is the deletion's alone) with its cross-validated accuracy."""
    n_classes = int(read_meta(setup.dataset_dir)["n_labels"])
    max_iter = int(setup.probe.get("max_iter", 200))
    test_layers = layers(setup.stores[model], setup.representation, setup.split)
    train_layers = layers(setup.stores[model], setup.representation, setup.train_split)
    y_test = labels(setup, setup.split, test_layers.shape[1])
    y_train = labels(setup, setup.train_split, train_layers.shape[1])
    chosen, frames = {}, []
    for layer in range(1, len(test_layers)):
        chosen[layer] = penalty = scores.cross_validated_penalty(train_layers[layer], y_train, n_classes,
                                                                 seed=setup.seed, max_iter=max_iter)
        correct = scores.probe_correct(train_layers[layer], y_train, test_layers[layer], y_test, n_classes,
                                       seed=setup.seed, weight_decay=penalty["weight_decay"], max_iter=max_iter)
        frames.append(_frame(layer, 0, correct, penalty))
    for layer, X, grid, versions in (deletion_cells(setup, model) if deleted else ()):
        probed = layer in chosen  # k = 0 is the undeleted layer, probed above unless it is the embeddings
        penalty = chosen[layer] if probed else scores.cross_validated_penalty(
            train_layers[layer], y_train, n_classes, seed=setup.seed, max_iter=max_iter)
        for k, (test, train) in list(zip(grid, versions))[1 if probed else 0:]:
            correct = scores.probe_correct(train, y_train, test, y_test, n_classes, seed=setup.seed,
                                           weight_decay=penalty["weight_decay"], max_iter=max_iter)
            frames.append(_frame(layer, k, correct, penalty))
    return pd.concat(frames, ignore_index=True)


def _frame(layer: int, k: int, correct: np.ndarray, penalty: dict) -> pd.DataFrame:
    return pd.DataFrame({"layer": layer, "k": k, "row": np.arange(len(correct)), "correct": correct,
                         "weight_decay": penalty["weight_decay"], "cv_accuracy": penalty["cv_accuracy"]})
