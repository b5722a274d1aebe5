"""One pairwise job: every layer pair of two models' stores, as a tidy table.

Rows: dataset, representation, model_a, model_b, layer_a, layer_b, measure (the
config's label), kind (similarity or distance), direction (symmetric, a->b: layer_a's
side is X, b->a), split, n, params (JSON), value, n_permutations, null_mean, null_std,
null_p (the permutation null: the chance level and p), ci_low, ci_high, n_resamples (the
half-sample interval, reprsim.inference.resampling), beyond_chance (the interval excludes null_mean on
the side of agreement), warning ("" or why the value is unreliable at this n), meta (JSON).

Device and memory (similarity.device, similarity.max_memory_gb): both layer stacks are converted to
float64 on the job's device once, and every measure, null and interval runs there; the measures' n×n
work stays within the memory budget (reprsim.metrics.memory), which changes how they compute, not what.

This module reads the rows (and each model's terms store) and names them; the measures, nulls and intervals are
the pair engine's (reprsim.metrics.pair_engine.compare_stacks), which reprsim.compare also calls on arrays.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reprsim.io.device import resolve_device, slurm_allocated_no_gpu
from reprsim.io.store import open_store, pooled_rows
from reprsim.io.terms import read_terms
from reprsim.metrics.pair_engine import DEFAULT_INTERVALS, compare_stacks
from reprsim.stages.compare.rows import check_same_rows, split_rows_digest, word_matrices
from reprsim.stages.compare.terms import stored_sides


def pair_device(requested: str) -> torch.device:
    """The torch device of a pair job for similarity.device (cpu | auto | cuda; reprsim.io.device).

    In a SLURM job allocated no GPU, `cuda` is an error that says how to route pair jobs to a GPU:
    torch may still see a node's GPUs there, but they belong to other jobs."""
    if requested == "cuda" and slurm_allocated_no_gpu():
        raise RuntimeError("similarity.device is cuda but SLURM allocated this pair job no GPU; with "
                           "profiles/slurm set REPRSIM_SLURM_PAIRS_ON_GPU=1, which routes compare_pair to the "
                           "GPU partition with one GPU")
    return resolve_device(requested)


def compare_pair(
    store_a_path: str | Path,
    store_b_path: str | Path,
    *,
    representation: str,
    split: str,
    measures: dict[str, dict],
    chance: dict | None = None,
    intervals: dict | None = None,
    words: dict | None = None,
    device: str = "cpu",
    max_memory_gb: float | None = None,
    terms: tuple[str | Path | None, str | Path | None] = (None, None),
    read_terms=read_terms,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every configured measure for all layer pairs (asymmetric ones in both directions), with
    its permutation null and half-sample interval; and the long table of the replicates.

    `measures` maps a label to {measure, params, null_permutations, resamples}; `chance` is
    similarity.chance ({permutations, seed}: the permutation null), `intervals` similarity.intervals ({resamples,
    confidence, seed}). The row subsets depend only on n and the seed, so replicate r of every
    pair job of one split rests on the same rows (reprsim.inference.resampling). Maps between the two
    spaces are the align stage's business (:mod:`reprsim.stages.align`).

    `representation` "word" compares word rows (:func:`word_matrices`; `words` is similarity.word:
    {max_words, seed}); every row's meta then says which words.

    `terms` are the two models' terms stores (rule model_terms, :mod:`reprsim.stages.compare.terms`): what each
    measure needs of one model alone, prepared once per model; a store that does not rest on this job's rows
    (a word a token of the other model did not reach) is not used, and that model's terms are prepared here.

    `read_terms` reads a terms store (:func:`compare_block` passes one that reads each once).

    `device` is similarity.device (:func:`pair_device`): the layer stacks are converted to float64
    there once. `max_memory_gb` is similarity.max_memory_gb, the measures' working-memory budget
    beyond the stacks (reprsim.metrics.memory; None: its default).
    """
    store_a, store_b = open_store(store_a_path), open_store(store_b_path)
    model_a, model_b = store_a.attrs["model"], store_b.attrs["model"]
    check_same_rows(store_a, store_b, split, (model_a, model_b))
    word_meta = None
    if representation == "word":
        words = {"max_words": None, "seed": 0, **(words or {})}
        Xs, Ys, word_meta, digest = word_matrices(store_a, store_b, split, words["max_words"], int(words["seed"]),
                                                  (model_a, model_b))
        print(f"{model_a} vs {model_b}: {word_meta['words']} words of {word_meta['sentences']} sentences", flush=True)
    else:
        Xs, Ys = pooled_rows(store_a, representation, split), pooled_rows(store_b, representation, split)
        digest = split_rows_digest(store_a, split)
    target = pair_device(device)
    if target.type == "cpu" and "SLURM_JOB_ID" in os.environ and os.environ.get("CUDA_VISIBLE_DEVICES"):
        print(f"note: SLURM allocated this job a GPU, but similarity.device is {device!r}: it computes on the CPU",
              flush=True)
    seed = int({**DEFAULT_INTERVALS, **(intervals or {})}["seed"])

    def from_terms(side: int, kept: np.ndarray, indices: np.ndarray) -> dict:
        return stored_sides(terms[side], digest, kept, indices, seed, target, (model_a, model_b)[side],
                            read_terms)

    table, long = compare_stacks(Xs, Ys, names=(model_a, model_b), measures=measures, chance=chance,
                                 intervals=intervals, device=target, max_memory_gb=max_memory_gb,
                                 stored_sides=from_terms)
    table.insert(len(table.columns) - 1, "split", split)
    if word_meta is not None:
        table["meta"] = [json.dumps({**json.loads(m), "words": word_meta}, sort_keys=True) for m in table["meta"]]
    for frame in (table, long):
        frame.insert(0, "dataset", store_a.attrs["dataset"])
        frame.insert(1, "representation", representation)
    return table, long


def compare_block(pairs: list[tuple[str, str]], stores: dict[str, str | Path], terms: dict[str, str | Path],
                  **settings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`compare_pair` for each model pair of one pair of blocks (rule compare_pair,
    reprsim.workflow.pair_blocks), in the order given, each model's terms store read once: the pairs' tables and
    replicates one after the other, each pair's rows as its own job would write them."""
    loaded: dict[str, tuple] = {}

    def read_once(path: str | Path) -> tuple:
        if str(path) not in loaded:
            loaded[str(path)] = read_terms(path)
        return loaded[str(path)]

    tables, replicates = [], []
    for number, (a, b) in enumerate(pairs, 1):
        print(f"pair {number} of {len(pairs)}: {a} vs {b}", flush=True)
        table, long = compare_pair(stores[a], stores[b], terms=(terms.get(a), terms.get(b)), read_terms=read_once,
                                   **settings)
        tables.append(table)
        replicates.append(long)
    return pd.concat(tables, ignore_index=True), pd.concat(replicates, ignore_index=True)
