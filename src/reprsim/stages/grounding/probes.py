"""The deletion test's functional side (Ding et al. 2021, §4): a linear probe on every deleted version of a
model's layer, fitted once per model (rule deletion_probes) for every measure's deletion test. Reads activation
stores and the dataset; imports no measure, so a measure's edit reruns no probe."""

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


def probe_table(setup, model: str) -> pd.DataFrame:
    """The linear probe on every deleted version of `model`'s layers (rule deletion_probes, once per model: every
    measure's deletion test reads it): layer, k, row of the compared split, correct."""
    n_classes = int(read_meta(setup.dataset_dir)["n_labels"])
    probe = {"weight_decay": 1e-3, "max_iter": 200, **setup.probe}
    frames = []
    for layer, X, grid, deleted in deletion_cells(setup, model):
        y_test = labels(setup, setup.split, len(X))
        y_train = labels(setup, setup.train_split, len(deleted[0][1]))
        for k, (test, train) in zip(grid, deleted):
            correct = scores.probe_correct(train, y_train, test, y_test, n_classes, seed=setup.seed, **probe)
            frames.append(pd.DataFrame({"layer": layer, "k": k, "row": np.arange(len(X)), "correct": correct}))
    return pd.concat(frames, ignore_index=True)
