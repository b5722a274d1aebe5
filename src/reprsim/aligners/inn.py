"""Invertible aligner of Ren et al. (2023, §3.4): stacked RealNVP affine coupling layers (Dinh et al. 2016).

Each coupling keeps one part of its input and moves the other, y₂ = x₂·exp(s(x₁)) + t(x₁)
(Ren et al. Eq. 12–13), so it is invertible in closed form whatever the networks s and t are;
swapping the halves between couplings lets every coordinate be moved and condition the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import torch
from torch import nn

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


class AffineCoupling(nn.Module):
    """moved' = moved·exp(s(kept)) + t(kept); s is soft-clamped to (−scale_bound, scale_bound) by a
    scaled tanh, so no layer can blow a coordinate up or squash it to nothing. The conditioner's last
    layer starts at zero: an untrained coupling is the identity."""

    def __init__(self, n_kept: int, n_moved: int, hidden: int, depth: int, scale_bound: float):
        super().__init__()
        self.scale_bound = scale_bound
        layers, width = [], n_kept
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.Tanh()]
            width = hidden
        last = nn.Linear(width, 2 * n_moved)
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
        self.conditioner = nn.Sequential(*layers, last)

    def scale_and_shift(self, kept: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_scale, shift = self.conditioner(kept).chunk(2, dim=1)
        return self.scale_bound * torch.tanh(log_scale / self.scale_bound), shift

    def forward(self, kept: torch.Tensor, moved: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The moved part's new value and log |det J| per row."""
        log_scale, shift = self.scale_and_shift(kept)
        return moved * torch.exp(log_scale) + shift, log_scale.sum(dim=1)

    def inverse(self, kept: torch.Tensor, moved: torch.Tensor) -> torch.Tensor:
        log_scale, shift = self.scale_and_shift(kept)
        return (moved - shift) * torch.exp(-log_scale)


class InvertibleLinear(nn.Module):
    """y = x·W with W = P·L·(U + diag(sign·exp(log_scale))) (Glow's LU form, Kingma & Dhariwal 2018):
    invertible for any parameter values, log |det W| = Σ log_scale. Initialised from a given W."""

    def __init__(self, weight: np.ndarray):
        super().__init__()
        P, L, U = scipy.linalg.lu(weight)
        pivots = np.diag(U)
        # P·Z = Z[rows]: P has one 1 per row, so the gather gives exactly the dense product's values (and
        # gradients) without its d³ multiply-adds
        self.register_buffer("rows", torch.as_tensor(P.argmax(axis=1), dtype=torch.int64))
        self.register_buffer("sign", torch.as_tensor(np.where(pivots < 0, -1.0, 1.0), dtype=torch.float32))
        self.lower = nn.Parameter(torch.as_tensor(np.tril(L, -1), dtype=torch.float32))
        self.upper = nn.Parameter(torch.as_tensor(np.triu(U, 1), dtype=torch.float32))
        self.log_scale = nn.Parameter(torch.as_tensor(np.log(np.abs(pivots)), dtype=torch.float32))

    def factors(self) -> tuple[torch.Tensor, torch.Tensor]:
        eye = torch.eye(len(self.log_scale), device=self.log_scale.device)
        lower = torch.tril(self.lower, -1) + eye
        upper = torch.triu(self.upper, 1) + torch.diag(self.sign * torch.exp(self.log_scale))
        return lower, upper

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lower, upper = self.factors()
        return x @ (lower[self.rows] @ upper), self.log_scale.sum().expand(len(x))

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        # x·P·L·U = y  ⇔  Uᵀ·Lᵀ·Pᵀ·xᵀ = yᵀ
        lower, upper = self.factors()
        z = torch.linalg.solve_triangular(upper.T, y.T, upper=False)
        z = torch.linalg.solve_triangular(lower.T, z, upper=True, unitriangular=True)
        return z[self.rows].T


class RealNVP(nn.Module):
    """An invertible linear map (optional), then `layers` affine couplings that alternate halves: the
    first moves the second half given the first, the next the first half given the second, and so
    on (the fixed permutation between couplings is the swap of the halves, Dinh et al. 2016)."""

    def __init__(self, dim: int, layers: int, hidden: int, depth: int, scale_bound: float,
                 linear: np.ndarray | None):
        super().__init__()
        if dim < 2:
            raise ValueError(f"an affine coupling needs at least 2 dimensions; got {dim}")
        self.split = dim // 2
        self.linear = InvertibleLinear(linear) if linear is not None else None
        halves = (self.split, dim - self.split)
        self.couplings = nn.ModuleList(
            AffineCoupling(halves[i % 2], halves[1 - i % 2], hidden, depth, scale_bound) for i in range(layers))

    def parameter_groups(self, lr: float) -> list[dict]:
        """The couplings at `lr`; the dense linear map at lr/d, since Adam moves each of its d² entries
        by about lr per step, which changes the map itself by up to lr·d."""
        groups = [{"params": list(self.couplings.parameters()), "lr": lr}]
        if self.linear is not None:
            groups.append({"params": list(self.linear.parameters()), "lr": lr / len(self.linear.log_scale)})
        return groups

    def forward_with_log_det(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_det = torch.zeros(len(x), device=x.device)
        if self.linear is not None:
            x, log_det = self.linear(x)
        first, second = x[:, : self.split], x[:, self.split:]
        for i, coupling in enumerate(self.couplings):
            if i % 2 == 0:
                second, term = coupling(first, second)
            else:
                first, term = coupling(second, first)
            log_det = log_det + term
        return torch.cat([first, second], dim=1), log_det

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_with_log_det(x)[0]

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        first, second = y[:, : self.split], y[:, self.split:]
        for i in reversed(range(len(self.couplings))):
            if i % 2 == 0:
                second = self.couplings[i].inverse(first, second)
            else:
                first = self.couplings[i].inverse(second, first)
        x = torch.cat([first, second], dim=1)
        return self.linear.inverse(x) if self.linear is not None else x


class PrincipalSubspace:
    """Top-k principal directions of train rows: z = (v − mean)·V, back v ≈ mean + z·Vᵀ."""

    def __init__(self, Z: np.ndarray, k: int):
        if Z.shape[0] <= k:
            raise ValueError(f"PCA to the common dimension {k} needs more than {k} train rows; got {Z.shape[0]}")
        self.mean = Z.mean(axis=0)
        self.basis = np.linalg.svd(Z - self.mean, full_matrices=False)[2][:k].T

    def forward(self, Z: np.ndarray) -> np.ndarray:
        return (Z - self.mean) @ self.basis

    def inverse(self, Z: np.ndarray) -> np.ndarray:
        return self.mean + Z @ self.basis.T


@dataclass(frozen=True)
class CouplingArchitecture:
    """layers: affine couplings; hidden, depth: width and number of hidden layers of each coupling's
    conditioner network; scale_bound: the largest |log-scale| a coupling may apply."""

    hidden: int = 128
    layers: int = 8
    depth: int = 2
    scale_bound: float = 2.0
    linear_start: bool = True

    def __post_init__(self) -> None:
        for name in ("hidden", "layers", "depth"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        if not isinstance(self.scale_bound, (int, float)) or isinstance(self.scale_bound, bool) or self.scale_bound <= 0:
            raise ValueError(f"scale_bound must be a number > 0; got {self.scale_bound!r}")

    def parameter_count(self, dim: int) -> int:
        halves = (dim // 2, dim - dim // 2)
        count = dim * dim if self.linear_start else 0  # L below, U above and on the diagonal
        for layer in range(self.layers):
            kept, moved = halves[layer % 2], halves[1 - layer % 2]
            count += (kept + 1) * self.hidden + (self.depth - 1) * (self.hidden + 1) * self.hidden
            count += (self.hidden + 1) * 2 * moved
        return count


class InvertibleAligner:
    """g = (standardise Y)⁻¹ ∘ RealNVP ∘ standardise X, fit by least squares (Ren et al. Eq. 14) with
    early stopping on the validation rows.

    The flow starts at the least-squares map (an invertible linear layer, then couplings that start as
    the identity; `linear_start=False` drops the linear layer), so training begins at the linear
    aligner's error and can only keep a better state on validation rows. When d_x ≠ d_y the wider
    side is first projected onto its top min(d_x, d_y) principal directions (fit on train rows;
    `reduced_dim`, `reduced_side` record it): g is then a bijection between X and that subspace of Y
    (or between that subspace of X and Y).
    """

    def __init__(self, architecture: CouplingArchitecture | None = None, training: TrainingConfig | None = None):
        self.architecture = architecture or CouplingArchitecture()
        self.training = training or TrainingConfig()
        self.reduced_dim: int | None = None
        self.reduced_side: str | None = None
        self.meta: dict = {}

    def fit(self, X: np.ndarray, Y: np.ndarray, X_val: np.ndarray | None = None,
            Y_val: np.ndarray | None = None) -> InvertibleAligner:
        started = time.perf_counter()
        dtype, X, Y = float64_pair(X, Y)
        d_x, d_y = X.shape[1], Y.shape[1]
        self.x_pca = PrincipalSubspace(X, d_y) if d_x > d_y else None
        self.y_pca = PrincipalSubspace(Y, d_x) if d_y > d_x else None
        if d_x != d_y:
            self.reduced_dim, self.reduced_side = min(d_x, d_y), "x" if d_x > d_y else "y"
        self.x_scaler = Standardiser(self.x_pca.forward(X) if self.x_pca else X)
        self.y_scaler = Standardiser(self.y_pca.forward(Y) if self.y_pca else Y)
        inputs, targets = self._inputs(X), self._targets(Y)
        validation = (self._inputs(X_val), self._targets(Y_val)) if X_val is not None and Y_val is not None \
            else (None, None)
        arch = self.architecture
        linear = least_squares_start(inputs.astype(dtype), targets, *validation) if arch.linear_start else None
        with seeded(self.training.seed):
            self.model = RealNVP(inputs.shape[1], arch.layers, arch.hidden, arch.depth, arch.scale_bound, linear)
            history = train(self.model, inputs, targets, *validation, self.y_scaler.std, self.training, "inn")
        self.meta = {**history, "reduced_dim": self.reduced_dim, "reduced_side": self.reduced_side,
                     "parameters": arch.parameter_count(inputs.shape[1])}
        self.meta["val_error"] = self.score(X_val, Y_val) if validation[0] is not None else None
        self.meta["seconds"] = time.perf_counter() - started
        return self

    def _inputs(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        return self.x_scaler.forward(self.x_pca.forward(X) if self.x_pca else X)

    def _targets(self, Y: np.ndarray) -> np.ndarray:
        Y = np.asarray(Y, dtype=np.float64)
        return self.y_scaler.forward(self.y_pca.forward(Y) if self.y_pca else Y)

    def _flow(self) -> RealNVP:
        if not self.meta:
            raise RuntimeError("call fit first")
        return self.model.cpu()

    def transform(self, X: np.ndarray) -> np.ndarray:
        out = self.y_scaler.inverse(predict(self._flow(), as_tensor(self._inputs(X), "cpu")).double().numpy())
        return self.y_pca.inverse(out) if self.y_pca else out

    def inverse(self, Y: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = self._flow().inverse(as_tensor(self._targets(Y), "cpu")).double().numpy()
        out = self.x_scaler.inverse(out)
        return self.x_pca.inverse(out) if self.x_pca else out

    def log_det_jacobian(self, X: np.ndarray) -> np.ndarray:
        """log |det ∂g/∂x| per row, between the spaces the flow maps (after PCA when d_x ≠ d_y): the
        flow's own term plus the standardisations' Σ log σ_y − Σ log σ_x."""
        with torch.no_grad():
            _, log_det = self._flow().forward_with_log_det(as_tensor(self._inputs(X), "cpu"))
        return log_det.double().numpy() + np.log(self.y_scaler.std).sum() - np.log(self.x_scaler.std).sum()

    def score(self, X: np.ndarray, Y: np.ndarray) -> float:
        return relative_error(Y, self.transform(X))
