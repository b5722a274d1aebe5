"""Row resampling for confidence intervals: half-samples without replacement, t interval from their spread.

Why not the textbook bootstrap (rows drawn with replacement): a resample repeats rows, and a
repeated input is represented identically by both models, so every similarity measure reads
higher on it (on the default's MiniLM pair the percentile interval left out the estimate in
42–49 of 49 layer pairs). Half-samples have no repeats. For a statistic that is smooth in the
rows, the spread of the m-row values θ*_m around their mean is (1/m − 1/n)σ², which is the
n-row estimate's own spread σ²/n when m = n/2 (finite-population correction); `scale`
corrects the remaining factor for other m. The interval is the estimate plus or minus a t
quantile of the replicates' standard deviation:

    θ̂ ± t_{R−1, (1+c)/2} · s · sd(θ*),  s = sqrt(m / (n − m)),

with R the finite replicates. Why not their percentiles (this module's method until issue 51): the 2.5th and
97.5th percentiles of 30 draws span 1.73σ on average, not 1.96σ (about 92 % coverage), and each end wobbles by
0.39σ; the standard deviation of the same 30 draws, with the t quantile for its R − 1 degrees of freedom, gives
the nominal coverage for normal replicates at any R (docs/numerics.md §9.2; the coverage study:
benchmarks/interval_coverage.py).

What the interval covers: the estimate's expectation at n rows, E θ̂_n. Where the estimator is biased (biased
CKA and the CCA family grow as the rows get fewer relative to the dimensions), E θ̂_n is not the population
value; `bias_corrected=True` moves the interval by the half-samples' own estimate of the bias, which for a bias
of order 1/n is (mean θ* − θ̂)·m/(n − m) (:func:`bias`), so that it covers the population value. Which
intervals do so is said where they are made (the pair tables' `ci_low`, `ci_high` cover E θ̂_n; a measure's
bias-corrected interval is `ci_low_bc`, `ci_high_bc`).

Every pair job of one split draws the same subsets (same n, same seed), so replicate r of one
model pair and replicate r of another rest on the same rows: a statistic that combines pairs
(a difference between layers, between models) is computed per replicate and gets its interval
the same way (:func:`interval`).
"""

from __future__ import annotations

import warnings

import numpy as np

METHOD = "half-sample (m = n/2 rows without replacement), t interval from the replicates' spread"
FRACTION = 0.5


def subsample_size(n: int, fraction: float = FRACTION) -> int:
    if n < 4:
        raise ValueError(f"resampling needs at least 4 rows; got n={n}")
    return min(n - 1, max(2, int(n * fraction)))


def half_samples(n: int, resamples: int, seed: int = 0, fraction: float = FRACTION) -> np.ndarray:
    """(resamples, m) row indices, each row a sorted subset of range(n) drawn without replacement."""
    if resamples < 1:
        raise ValueError(f"resamples must be ≥ 1; got {resamples}")
    m = subsample_size(n, fraction)
    rng = np.random.default_rng(seed)
    return np.sort(np.stack([rng.choice(n, size=m, replace=False) for _ in range(resamples)]), axis=1)


def scale(n: int, m: int) -> float:
    """Spread factor from m-row replicates to the n-row estimate: sqrt(m / (n − m)) (1 at m = n/2)."""
    return float(np.sqrt(m / (n - m)))


def t_quantile(count, confidence: float):
    """The two-sided t quantile for `count` finite replicates (count − 1 degrees of freedom); NaN below 2."""
    # imported here: every job imports this module, most never make an interval (scipy.stats costs 1 s to import)
    from scipy.special import stdtrit

    count = np.asarray(count, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(count >= 2, stdtrit(np.maximum(count - 1, 1), (1 + confidence) / 2), np.nan)


def spread(replicates, n: int, m: int):
    """(standard error of the n-row estimate, finite replicates) from m-row replicates (axis 0), NaN-aware."""
    replicates = np.asarray(replicates, dtype=float)
    finite = np.isfinite(replicates).sum(axis=0)
    with warnings.catch_warnings():  # entries with fewer than 2 finite replicates warn; NaN is their answer
        warnings.simplefilter("ignore", RuntimeWarning)
        sd = np.nanstd(replicates, axis=0, ddof=1)
    return np.where(finite >= 2, sd * scale(n, m), np.nan), finite


def bias(estimate, replicates, n: int, m: int):
    """The half-samples' estimate of the n-row estimate's bias, for a bias of order 1/n: E θ*_m − E θ̂_n =
    b/m − b/n, so b/n = (mean θ* − θ̂)·m/(n − m)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return (np.nanmean(np.asarray(replicates, dtype=float), axis=0) - np.asarray(estimate, dtype=float)) \
            * m / (n - m)


def interval(estimate, replicates, n: int, m: int, confidence: float = 0.95, bias_corrected: bool = False):
    """t interval around `estimate` from subsample `replicates` (axis 0): θ̂ ± t_{R−1}·s·sd(θ*), moved by
    :func:`bias` when `bias_corrected`.

    `estimate` has the replicates' trailing shape; NaN replicates (a subsample where the
    statistic is undefined) are left out; an entry with fewer than 2 finite replicates, or
    a NaN estimate, gets NaN bounds.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    estimate = np.asarray(estimate, dtype=float)
    error, finite = spread(replicates, n, m)
    half = t_quantile(finite, confidence) * error
    centre = estimate - bias(estimate, replicates, n, m) if bias_corrected else estimate
    usable = np.isfinite(half) & np.isfinite(centre)
    low = np.where(usable, centre - half, np.nan)
    high = np.where(usable, centre + half, np.nan)
    return (float(low), float(high)) if low.ndim == 0 else (low, high)


def beyond_chance(kind, low, high, null_mean):
    """The interval excludes the chance level on the side of agreement: low > null_mean for a
    similarity, high < null_mean for a distance (NaN anywhere: False). Elementwise over arrays or
    table columns as well as for one value."""
    return np.where(np.asarray(kind) == "similarity", np.greater(low, null_mean), np.less(high, null_mean))


def fieller(numerator: float, denominator: float, covariance: np.ndarray, df: float, confidence: float = 0.95):
    """(low, high, g): Fieller's interval for the ratio numerator/denominator of two estimates whose 2 × 2
    `covariance` is estimated with `df` degrees of freedom: every ρ with (N − ρD)² ≤ t²·var(N − ρD). It is bounded
    only when the denominator is clearly away from 0, g = t²·var(D)/D² < 1; otherwise (NaN, NaN, g). Unlike the
    ratio's own replicates it stays honest as D nears 0: the interval widens and turns asymmetric."""
    t = float(t_quantile(df + 1, confidence)) if np.isfinite(df) and df >= 1 else np.nan
    (v_nn, v_nd), (_, v_dd) = np.asarray(covariance, dtype=float)
    if not (np.isfinite([numerator, denominator, v_nn, v_nd, v_dd, t]).all() and denominator != 0):
        return np.nan, np.nan, np.nan
    g = t * t * v_dd / denominator**2
    a = denominator**2 - t * t * v_dd
    b = numerator * denominator - t * t * v_nd
    c = numerator**2 - t * t * v_nn
    if a <= 0:
        return np.nan, np.nan, float(g)
    # with a > 0 and a positive semi-definite covariance the quadratic is ≤ 0 at ρ = N/D, so b² − ac ≥ 0: a negative
    # value is rounding (a placebo's N and D agree in every replicate, and the interval is the point N/D)
    root = np.sqrt(max(b * b - a * c, 0.0))
    return float((b - root) / a), float((b + root) / a), float(g)


def satterthwaite(numerator: float, denominator: float, parts, dfs) -> float:
    """Welch–Satterthwaite degrees of freedom of a ratio's variance made of independent `parts` (2 × 2
    covariances of numerator and denominator, each estimated with its `dfs`), through the ratio's linearisation."""
    gradient = np.array([1 / denominator, -numerator / denominator**2])
    variances = np.array([gradient @ part @ gradient for part in parts])
    dfs = np.asarray(dfs, dtype=float)
    if not np.isfinite(variances).all() or (dfs < 1).any():
        return np.nan
    return float(variances.sum() ** 2 / np.sum(variances**2 / dfs))
