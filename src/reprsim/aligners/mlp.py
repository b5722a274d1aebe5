"""Non-bijective MLP aligner: the sanity bound of Ren et al. (2023, Table 4, "Non-Bij. NN").

It drops the invertibility constraint and nothing else: same standardisation, training and early
stopping as the INN, and by default about the INN's number of parameters, so the gap between the
two is the price of bijectivity.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn

from reprsim.aligners.inn import CouplingArchitecture
from reprsim.aligners.linear import relative_error
from reprsim.aligners.training import (
    TrainingConfig,
    as_tensor,
    float64_pair,
    least_squares_start,
    predict,
    seeded,
    train,
)
from reprsim.nets.standardise import Standardiser


class ResidualMLP(nn.Module):
    """y = x·W + b + MLP(x); the linear part starts at the least-squares map, the MLP's last layer at zero."""

    def __init__(self, d_in: int, d_out: int, hidden: int, depth: int, linear: np.ndarray):
        super().__init__()
        self.linear = nn.Linear(d_in, d_out)
        with torch.no_grad():
            self.linear.weight.copy_(as_tensor(linear.T, "cpu"))
            self.linear.bias.zero_()
        layers, width = [], d_in
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.Tanh()]
            width = hidden
        last = nn.Linear(width, d_out)
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
        self.residual = nn.Sequential(*layers, last)

    def parameter_groups(self, lr: float) -> list[dict]:
        """The MLP at `lr`, the dense linear part at lr/d (see RealNVP.parameter_groups)."""
        return [{"params": list(self.residual.parameters()), "lr": lr},
                {"params": list(self.linear.parameters()), "lr": lr / max(self.linear.weight.shape)}]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.residual(x)


def parameter_count(d_in: int, d_out: int, hidden, depth: int):
    """Weights and biases of ResidualMLP (hidden may be an array of widths)."""
    return (d_in + 1) * d_out + (d_in + 1) * hidden + (depth - 1) * (hidden + 1) * hidden + (hidden + 1) * d_out


def matching_width(target: int, d_in: int, d_out: int, depth: int) -> int:
    """The hidden width whose parameter count is closest to `target`."""
    widths = np.arange(1, 8193)
    return int(widths[np.argmin(np.abs(parameter_count(d_in, d_out, widths, depth) - target))])


class MLPAligner:
    """g = (standardise Y)⁻¹ ∘ [x·W + b + MLP(x)] ∘ standardise X, least squares, early stopping on
    validation. hidden=None: the width that gives the default INN's parameter count for these sizes."""

    def __init__(self, hidden: int | None = None, depth: int = 2, training: TrainingConfig | None = None):
        if hidden is not None and (not isinstance(hidden, int) or isinstance(hidden, bool) or hidden < 1):
            raise ValueError(f"hidden must be a positive integer or None; got {hidden!r}")
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise ValueError(f"depth must be a positive integer; got {depth!r}")
        self.hidden, self.depth = hidden, depth
        self.training = training or TrainingConfig()
        self.meta: dict = {}

    def fit(self, X: np.ndarray, Y: np.ndarray, X_val: np.ndarray | None = None,
            Y_val: np.ndarray | None = None) -> MLPAligner:
        started = time.perf_counter()
        dtype, X, Y = float64_pair(X, Y)
        self.x_scaler, self.y_scaler = Standardiser(X), Standardiser(Y)
        inputs, targets = self.x_scaler.forward(X), self.y_scaler.forward(Y)
        budget = CouplingArchitecture().parameter_count(min(X.shape[1], Y.shape[1]))
        hidden = self.hidden or matching_width(budget, X.shape[1], Y.shape[1], self.depth)
        validation = ((self.x_scaler.forward(np.asarray(X_val, dtype=np.float64)),
                       self.y_scaler.forward(np.asarray(Y_val, dtype=np.float64)))
                      if X_val is not None and Y_val is not None else (None, None))
        linear = least_squares_start(inputs.astype(dtype), targets, *validation)
        with seeded(self.training.seed):
            self.model = ResidualMLP(X.shape[1], Y.shape[1], hidden, self.depth, linear)
            history = train(self.model, inputs, targets, *validation, self.y_scaler.std, self.training, "mlp")
        self.model.cpu()
        self.meta = {**history, "hidden": hidden, "parameters": sum(p.numel() for p in self.model.parameters())}
        self.meta["val_error"] = self.score(X_val, Y_val) if validation[0] is not None else None
        self.meta["seconds"] = time.perf_counter() - started
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        if not self.meta:
            raise RuntimeError("call fit before transform")
        inputs = as_tensor(self.x_scaler.forward(np.asarray(X, dtype=np.float64)), "cpu")
        return self.y_scaler.inverse(predict(self.model, inputs).double().numpy())

    def score(self, X: np.ndarray, Y: np.ndarray) -> float:
        return relative_error(Y, self.transform(X))
