"""Training loops the workflow shares (fine-tuning, pretraining, stitching maps): seeded batches of row
indices, epoch after epoch, and the optimiser steps with their log and progress bar."""

from __future__ import annotations

import time
from typing import Callable, Iterable, Iterator

import numpy as np
import torch

from reprsim.io.logs import progress

GROUPING_WINDOW = 50  # batches per window whose examples are sorted by length (as transformers' Trainer)


def epoch_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                  group_by_length: bool) -> list[np.ndarray]:
    """One epoch's batches of row indices: a seeded shuffle cut into full batches (the remainder
    is left out). With `group_by_length`, each window of GROUPING_WINDOW batches is sorted by
    token length before cutting and the batches are then shuffled, so a batch holds similar
    lengths (little padding) while every epoch still visits the rows in a new random grouping."""
    permutation = rng.permutation(len(lengths))
    n_batches = len(permutation) // batch_size
    permutation = permutation[:n_batches * batch_size]
    if group_by_length:
        window = GROUPING_WINDOW * batch_size
        permutation = np.concatenate([
            chunk[np.argsort(-lengths[chunk], kind="stable")]
            for chunk in np.split(permutation, range(window, len(permutation), window))
        ]) if len(permutation) else permutation
    batches = np.split(permutation, n_batches) if n_batches else []
    if group_by_length:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def endless_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                    group_by_length: bool) -> Iterator[np.ndarray]:
    """Batches of :func:`epoch_batches`, epoch after epoch, each epoch drawn from `rng` when the last is used up."""
    if len(lengths) < batch_size:
        raise ValueError(f"{len(lengths)} rows cannot fill a batch of {batch_size}")
    while True:
        yield from epoch_batches(lengths, batch_size, rng, group_by_length)


def train_steps(loss_of: Callable[[object], torch.Tensor], batches: Iterator, optimizer, schedule, steps: int,
                desc: str, clip: tuple[Iterable[torch.nn.Parameter], float] | None = None,
                after_step: Callable[[int, list[dict]], None] | None = None) -> tuple[list[dict], float]:
    """`steps` optimiser steps, each on the loss `loss_of` gives for the next of `batches`; `clip` = (parameters,
    max norm) clips their gradient first; `after_step(step, log)`, when given, is called after each step (the
    gradients cleared), e.g. to save a checkpoint. A progress bar shows the loss. Returns the log (step, loss,
    learning_rate per step) and the seconds taken."""
    clipped = (list(clip[0]), float(clip[1])) if clip is not None else None  # a generator would serve one step only
    log = []
    started = time.perf_counter()
    bar = progress(range(1, steps + 1), unit="step", desc=desc)
    for step in bar:
        loss = loss_of(next(batches))
        loss.backward()
        if clipped is not None:
            torch.nn.utils.clip_grad_norm_(*clipped)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        log.append({"step": step, "loss": loss.item(), "learning_rate": schedule.get_last_lr()[0]})
        bar.set_postfix(loss=f"{log[-1]['loss']:.4f}")
        if after_step is not None:
            after_step(step, log)
    bar.close()
    return log, time.perf_counter() - started
