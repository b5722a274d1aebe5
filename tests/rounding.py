"""Tolerances that follow from the computation, not from what one CPU printed.

A BLAS or LAPACK kernel may sum in any order, block, or fuse multiply-adds; which kernel runs depends on the CPU
(MKL picks by instruction set, MKL_ENABLE_INSTRUCTIONS caps it, MKL_CBWR pins a branch), on the thread count and
on the shapes. What holds for every order is the classical bound on a sum of m products (Higham, Accuracy and
Stability of Numerical Algorithms, 2nd ed., §3.1):

    |fl(Σ xᵢyᵢ) − Σ xᵢyᵢ| ≤ γ_m Σ |xᵢyᵢ|,   γ_m = m·u / (1 − m·u),   u = ε/2 (the unit roundoff).

A tolerance built from it holds on every kernel. An exact comparison holds only where every partial sum is exact
(integers below 2^53), or where one code path computes the same inputs twice in one process (a determinism test).
Backward-stable decompositions (QR, SVD, symmetric eigenproblems) perturb the matrix by p(m)·u·‖A‖ with p(m) a
modest polynomial; m·u stands for it below, and a forward error is that times the problem's condition number.
"""

from __future__ import annotations

import math

import numpy as np


def unit_roundoff(dtype=np.float64) -> float:
    return float(np.finfo(dtype).eps) / 2


def gamma(m: int, dtype=np.float64) -> float:
    """γ_m: the relative error bound of a sum of m products, in any summation order."""
    u = unit_roundoff(dtype)
    assert m * u < 1, "too many terms for the bound"
    return m * u / (1 - m * u)


def products(m: int, scale: float = 1.0, condition: float = 1.0, dtype=np.float64) -> float:
    """A value computed from sums of m products whose magnitudes add up to `scale`, through a problem of the given
    condition number (1 for products alone; κ of the data where it is whitened, solved or decomposed)."""
    return condition * gamma(m, dtype) * scale


def root_of_cancellation(m: int, scale: float = 1.0, dtype=np.float64) -> float:
    """√q where the true q is 0 and q = a + b − 2c, each term a sum of m products of magnitude `scale` (a distance
    between identical inputs: GULP, Procrustes). Each term is off by γ_m·scale, so q by at most 4·γ_m·scale and its
    root by √(4·γ_m·scale). The same holds for arccos(1 − δ) ≈ √(2δ) with δ ≤ 2γ_m (the shape metric's angle)."""
    return math.sqrt(4 * gamma(m, dtype) * scale)


# measures whose value on identical inputs is the root of a difference that cancels there: GULP's √(a + b − 2c) of
# traces of size rank ≤ d; the angles' arccos(c / √(ab)) of cosines of size 1
ROOTS_OF_CANCELLATION = {"gulp", "procrustes", "shape_metric"}


def root_at_identity(name: str, n: int, d: int) -> float | None:
    """The rounding a root-of-cancellation measure keeps on identical n × d inputs; None for the other measures."""
    if name not in ROOTS_OF_CANCELLATION:
        return None
    return root_of_cancellation(n * d, scale=d if name == "gulp" else 1.0)
