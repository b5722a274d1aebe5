"""Intervals for statistics that do not come from pair replicates: over independent units (seed
pairs, fine-tuned models) and for accuracies (binomial counts without replicates)."""

from __future__ import annotations

import math

import numpy as np
from scipy import special  # not scipy.stats: its import alone (0.5 s) would be most of the findings job's start-up

MIN_UNITS = 3  # from this many units on (e.g. seed pairs), they are the unit of the interval


def t_interval(values, confidence: float) -> tuple[float, float, float]:
    """(mean, low, high): Student's t interval of the mean of independent unit values (k ≥ 2)."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or len(values) < 2 or not np.isfinite(values).all():
        raise ValueError(f"a t interval needs at least 2 finite unit values; got {values.tolist()}")
    mean, k = float(values.mean()), len(values)
    half = float(special.stdtrit(k - 1, (1 + confidence) / 2) * values.std(ddof=1) / math.sqrt(k))  # t quantile
    return mean, mean - half, mean + half


def wilson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n (no continuity correction): Newcombe (1998), method 3,
    as scipy.stats.binomtest(k, n).proportion_ci(confidence, method="wilson") computes it."""
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"a binomial interval needs 0 ≤ k ≤ n and n ≥ 1; got k={k}, n={n}")
    p, z = k / n, float(special.ndtri(0.5 + 0.5 * confidence))
    denominator = 2 * (n + z ** 2)
    centre, delta = (2 * n * p + z ** 2) / denominator, z / denominator * math.sqrt(4 * n * p * (1 - p) + z ** 2)
    return (0.0 if k == 0 else centre - delta), (1.0 if k == n else centre + delta)


def newcombe(k1: int, n1: int, k2: int, n2: int, confidence: float) -> tuple[float, float, float]:
    """(p1 − p2, low, high): Newcombe's hybrid score interval (1998, method 10) from the two Wilson intervals.

    It assumes independent proportions; for two accuracies on the same examples it is conservative
    (wider than needed) because their positive correlation is ignored.
    """
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = wilson(k1, n1, confidence), wilson(k2, n2, confidence)
    difference = p1 - p2
    return (difference, difference - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2),
            difference + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


def correct_count(accuracy: float, n: int) -> int:
    """The number of correct examples behind an accuracy on n examples (it was computed as k/n)."""
    k = round(accuracy * n)
    if not math.isclose(k / n, accuracy, abs_tol=1e-9):
        raise ValueError(f"accuracy {accuracy} is not a count over n={n} examples")
    return int(k)
