"""Least-squares linear aligner g(x) = xW + b, fit on train rows, ridge selected on validation rows."""

from __future__ import annotations

import numbers
import time
from collections.abc import Sequence

import numpy as np


def relative_error(Y: np.ndarray, Y_hat: np.ndarray) -> float:
    """δ = ||Y − Ŷ||_F / ||Y||_F (docs/numerics.md, Aligners)."""
    Y = np.asarray(Y, dtype=np.float64)
    norm = np.linalg.norm(Y)
    if norm == 0:
        raise ValueError("target representation is all zeros; relative error is undefined")
    return float(np.linalg.norm(Y - np.asarray(Y_hat, dtype=np.float64)) / norm)


def mean_l2(Y: np.ndarray, Y_hat: np.ndarray) -> float:
    """Mean over examples of ||y_i − ŷ_i||_2."""
    diff = np.asarray(Y, dtype=np.float64) - np.asarray(Y_hat, dtype=np.float64)
    return float(np.linalg.norm(diff, axis=1).mean())


class LinearAligner:
    """Affine least-squares map g(x) = xW + b with a relative ridge penalty.

    The penalty is λ·||W||_F² with λ = ridge · ||Xc||_F² / d_x (ridge relative to the
    average feature's sum of squares, so one grid serves every layer and model).
    ridge=0: ordinary least squares (minimum-norm solution when Xc is rank deficient);
    ridge→∞: W→0, g(x) = mean of Y. Given several ridge values, `fit` keeps the one
    with the lowest relative error on the validation rows (which it then requires).

    Directions of Xc whose singular value is below s_max · max(n, d) · eps(dtype of X)
    are dropped, with eps that of the dtype X arrived in: in activations stored as
    float32 such directions are rounding noise, and a map fit on them explodes on
    new inputs (numpy's lstsq uses the same cut-off with float64's eps).
    """

    def __init__(self, ridge: float | Sequence[float] = 0.0):
        values = list(np.atleast_1d(ridge))
        if not values or not all(isinstance(r, numbers.Real) and not isinstance(r, bool) and r >= 0 for r in values):
            raise ValueError(f"ridge must be one or more numbers ≥ 0; got {ridge!r}")
        self.grid = [float(r) for r in values]
        self.ridge_: float | None = None
        self.rank_: int | None = None
        self.validation_errors_: dict[float, float] = {}
        self.weight: np.ndarray | None = None
        self.bias: np.ndarray | None = None
        self.meta: dict = {}

    def fit(self, X: np.ndarray, Y: np.ndarray, X_val: np.ndarray | None = None,
            Y_val: np.ndarray | None = None) -> LinearAligner:
        started = time.perf_counter()
        X, Y = np.asarray(X), np.asarray(Y, dtype=np.float64)
        eps = np.finfo(X.dtype if np.issubdtype(X.dtype, np.floating) else np.float64).eps
        X = X.astype(np.float64)
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X and Y must have the same rows; got {X.shape[0]} and {Y.shape[0]}")
        if len(self.grid) > 1 and (X_val is None or Y_val is None):
            raise ValueError("several ridge values need validation rows (X_val, Y_val) to choose between them")
        x_mean, y_mean = X.mean(axis=0), Y.mean(axis=0)
        Xc, Yc = X - x_mean, Y - y_mean
        U, s, Vt = np.linalg.svd(Xc, full_matrices=False)
        projected = U.T @ Yc
        scale = float(np.sum(s**2)) / X.shape[1]
        kept = s > (s[0] if s.size else 0.0) * max(X.shape) * eps
        self.rank_ = int(kept.sum())

        def solve(ridge: float) -> np.ndarray:
            safe = np.where(kept, s, 1.0)
            factors = np.where(kept, safe / (safe**2 + ridge * scale), 0.0)
            return Vt.T @ (factors[:, None] * projected)

        best = None
        for ridge in self.grid:
            weight = solve(ridge)
            if len(self.grid) == 1:
                best = (ridge, weight)
                break
            error = relative_error(Y_val, (np.asarray(X_val, dtype=np.float64) - x_mean) @ weight + y_mean)
            self.validation_errors_[ridge] = error
            if best is None or error < self.validation_errors_[best[0]]:
                best = (ridge, weight)
        self.ridge_, self.weight = best
        self.bias = y_mean - x_mean @ self.weight
        self.meta = {"ridge": self.ridge_, "rank": self.rank_,
                     "validation_errors": {str(r): e for r, e in self.validation_errors_.items()},
                     "seconds": time.perf_counter() - started}
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        if self.weight is None:
            raise RuntimeError("call fit before transform")
        return np.asarray(X, dtype=np.float64) @ self.weight + self.bias

    def inverse(self, Y: np.ndarray) -> np.ndarray:
        """x = (y − b) W⁻¹: defined only when W is square and invertible (d_x = d_y = rank)."""
        if self.weight is None:
            raise RuntimeError("call fit before inverse")
        if self.weight.shape[0] != self.weight.shape[1] or self.rank_ < self.weight.shape[0]:
            raise ValueError(f"the linear map {self.weight.shape[0]} -> {self.weight.shape[1]} of rank {self.rank_} "
                             "is not invertible")
        return np.linalg.solve(self.weight.T, (np.asarray(Y, dtype=np.float64) - self.bias).T).T

    def score(self, X: np.ndarray, Y: np.ndarray) -> float:
        """Relative Frobenius error of the map on (X, Y); lower is better."""
        return relative_error(Y, self.transform(X))
