"""Training shared by the torch aligners (INN, MLP): standardised coordinates, a start at the
least-squares map, Adam with warm-up and cosine decay, early stopping on the validation rows,
a progress bar on stderr.

The loss is the squared error in Y's original units (each standardised output weighted by its
variance), so the quantity minimised, the one early stopping watches and the reported δ agree.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from reprsim.aligners.linear import LinearAligner
from reprsim.io.device import DEVICES, resolve_device

START_RIDGES = (0.0, 1e-3, 1e-2, 1e-1, 1.0)
MIN_SINGULAR_VALUE = 1e-3


@dataclass(frozen=True)
class TrainingConfig:
    """lr: peak learning rate (warm-up over the first 10% of steps, cosine decay to 0 at `epochs`);
    epochs: the most run; batch_size: rows per step (n rows make ceil(n / batch_size) equal batches);
    patience: epochs without a lower validation loss before stopping (0: never stop early), the best
    epoch's weights are kept; weight_decay: Adam's L2 penalty; device: cpu, cuda or auto;
    threads: torch's CPU threads while training (None: leave torch's setting, which the workflow's
    scripts set to the rule's threads). Set 1 when other processes share the cores: a small network
    with two threads on a busy 2-core machine ran up to 20 times slower per step."""

    lr: float = 3e-3
    epochs: int = 300
    batch_size: int = 512
    patience: int = 40
    weight_decay: float = 0.0
    seed: int = 0
    device: str = "cpu"
    threads: int | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        for name, minimum in (("epochs", 1), ("batch_size", 1), ("patience", 0), ("seed", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ValueError(f"{name} must be an integer ≥ {minimum}; got {value!r}")
        if not isinstance(self.lr, (int, float)) or not self.lr > 0:
            raise ValueError(f"lr must be a number > 0; got {self.lr!r}")
        if not isinstance(self.weight_decay, (int, float)) or self.weight_decay < 0:
            raise ValueError(f"weight_decay must be a number ≥ 0; got {self.weight_decay!r}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ValueError(f"threads must be a positive integer or None; got {self.threads!r}")
        if not isinstance(self.progress, bool):
            raise ValueError(f"progress must be true or false; got {self.progress!r}")
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {self.device!r}")


def input_dtype(X) -> np.dtype:
    """The floating dtype activations arrived in (float64 for anything else): it sets the rank cut-off."""
    dtype = np.asarray(X).dtype
    return dtype if np.issubdtype(dtype, np.floating) else np.dtype(np.float64)


def float64_pair(X, Y) -> tuple[np.dtype, np.ndarray, np.ndarray]:
    """The dtype X arrived in (see :func:`input_dtype`) and X, Y as float64, checked to share rows."""
    dtype = input_dtype(X)
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y must have the same rows; got {X.shape[0]} and {Y.shape[0]}")
    return dtype, X, Y


def least_squares_start(inputs: np.ndarray, targets: np.ndarray, val_inputs: np.ndarray | None,
                        val_targets: np.ndarray | None) -> np.ndarray:
    """The least-squares map between standardised spaces, where the torch aligners start: LinearAligner
    (rank cut by the inputs' dtype, ridge chosen on validation rows when given), with its singular values
    raised to at least MIN_SINGULAR_VALUE × the largest when it is square, so that it is invertible."""
    ridges = START_RIDGES if val_inputs is not None else 0.0
    weight = LinearAligner(ridge=ridges).fit(inputs, targets, val_inputs, val_targets).weight
    if weight.shape[0] != weight.shape[1]:
        return weight
    U, s, Vt = np.linalg.svd(weight)
    return (U * np.maximum(s, MIN_SINGULAR_VALUE * s[0])) @ Vt


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op CPU threads set to `threads` inside, restored after."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Torch's global generators set to `seed` inside, restored after (initialisation is reproducible
    without changing the caller's random state)."""
    with torch.random.fork_rng(devices=range(torch.cuda.device_count()) if torch.cuda.is_available() else []):
        torch.manual_seed(seed)
        yield


def as_tensor(Z: np.ndarray, device: torch.device | str) -> torch.Tensor:
    return torch.as_tensor(np.asarray(Z, dtype=np.float32), device=device)


def predict(model: nn.Module, inputs: torch.Tensor, batch_size: int = 8192) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([model(chunk) for chunk in inputs.split(batch_size)])


def warmup_cosine(total_steps: int, warmup_fraction: float = 0.1):
    """Learning-rate factor per step: linear warm-up from 1/25 to 1 (Adam's early steps on a model that
    starts at the least-squares map must not knock it off), then cosine decay to 0 (a small final
    step size is what makes a smooth map fit precisely)."""
    warmup = max(1, round(warmup_fraction * total_steps))

    def factor(step: int) -> float:
        if step < warmup:
            return 0.04 + 0.96 * step / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total_steps - warmup))))

    return factor


def train(model: nn.Module, inputs: np.ndarray, targets: np.ndarray, val_inputs: np.ndarray | None,
          val_targets: np.ndarray | None, target_scale: np.ndarray, config: TrainingConfig, label: str) -> dict:
    """Fit `model` (standardised inputs → standardised targets, each target weighted by its variance
    `target_scale`², so the loss is the squared error in original units) in place. With validation rows,
    keep the weights of the epoch with the lowest validation loss, the untrained model included; without,
    keep the last epoch's. `model.parameter_groups(lr)` gives the optimiser's groups. Returns what
    happened, for the aligner's meta."""
    device = resolve_device(config.device)
    model.to(device)
    x, y = as_tensor(inputs, device), as_tensor(targets, device)
    weights = as_tensor(target_scale**2 / np.mean(target_scale**2), device)
    validate = val_inputs is not None and val_targets is not None
    if validate:
        x_val, y_val = as_tensor(val_inputs, device), as_tensor(val_targets, device)

    def loss_of(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return (((prediction - target) ** 2) * weights).mean()

    def validation_loss() -> float:
        model.eval()
        return float(loss_of(predict(model, x_val), y_val))

    steps = math.ceil(len(x) / config.batch_size)
    optimiser = torch.optim.Adam(model.parameter_groups(config.lr), weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, warmup_cosine(config.epochs * steps))
    shuffler = torch.Generator().manual_seed(config.seed)
    started = time.perf_counter()
    with torch_threads(config.threads):
        best = {"loss": validation_loss(), "epoch": 0, "state": copy.deepcopy(model.state_dict())} if validate \
            else {"loss": None, "epoch": None, "state": None}
        bar = tqdm(range(config.epochs), desc=label, file=sys.stderr, disable=not config.progress, leave=False)
        for epoch in bar:
            model.train()
            total = 0.0
            # `steps` batches of equal size (± 1): no stray tiny batch with a full step's weight
            for batch in torch.randperm(len(x), generator=shuffler).to(device).tensor_split(steps):
                loss = loss_of(model(x[batch]), y[batch])
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                optimiser.step()
                schedule.step()
                total += loss.item() * len(batch)
            postfix = {"train_loss": total / len(x)}
            if validate:
                postfix["val_loss"] = val_loss = validation_loss()
                if val_loss < best["loss"]:
                    best = {"loss": val_loss, "epoch": epoch + 1, "state": copy.deepcopy(model.state_dict())}
            bar.set_postfix(postfix)
            if validate and config.patience and epoch + 1 - best["epoch"] >= config.patience:
                break
        bar.close()
    if validate:
        model.load_state_dict(best["state"])
    model.eval()
    return {"epochs_run": epoch + 1, "best_epoch": best["epoch"] if validate else epoch + 1,
            "last_train_loss": postfix["train_loss"], "best_val_loss": best["loss"],
            "train_seconds": time.perf_counter() - started, "device": str(device)}
