"""Item-level nulls of the grounding tests and the pass decision that uses them (docs/numerics.md §13a).

A grounding score rests on few items (model pairs, layers, deletion steps), and which items a configuration has is
the dominant uncertainty; the half-sample interval covers the rows only. So each score is also set against what it
gives when its items' correspondence is broken: the functional side permuted over the items (rank correlations;
ReSi's pairing permutation for prediction), the layer labels permuted (monotonicity, Ding's specificity), random
rankings of the pairs (AUPRC). A pass needs both: the item-level p-value at most 1 − confidence, and the row
interval above the chance level. A test whose null cannot reach that p-value even for a perfect score, or with
fewer than `min_items` items, says "too few items" instead of ranking. Pure functions; no I/O."""

from __future__ import annotations

import itertools
import math

import numpy as np

from reprsim.tables.grounding import CANNOT_RANK, DESCRIPTIVE, FAIL, PASS, TOO_FEW, UNDEFINED  # noqa: F401



def permutations(m: int, draws: int, seed: int) -> tuple[np.ndarray, bool]:
    """(P, m) permutations of m items and whether they are all m! of them (identity first): every permutation where
    m! ≤ draws + 1, else `draws` uniform ones (seeded)."""
    if math.factorial(m) <= draws + 1:
        return np.array(list(itertools.permutations(range(m))), dtype=int).reshape(-1, m), True
    rng = np.random.default_rng(seed)
    return np.stack([rng.permutation(m) for _ in range(draws)]), False


def p_value(observed: float, null: np.ndarray, exact: bool) -> float:
    """One-sided p (higher is better) of `observed` against the null's values: the share of the null at or above
    it where the null is every permutation (the identity among them), else (1 + count) / (1 + draws). NaN draws are
    left out; NaN where the observed score is NaN or no draw is finite."""
    null = np.asarray(null, dtype=float)
    null = null[np.isfinite(null)]
    if not np.isfinite(observed) or null.size == 0:
        return float("nan")
    at_least = int(np.sum(null >= observed - 1e-12))  # float noise: a permutation equal to the identity counts
    return at_least / null.size if exact else (1 + at_least) / (1 + null.size)


def smallest_p(items: int, draws: int, invariant: int = 1) -> float:
    """The smallest p a permutation null over `items` items allows: `invariant` of the items! orderings leave the
    score as it is (the identity; for layer distances |i − j| also the reversal), so where every ordering is drawn
    no score gets below invariant / items!, and `draws` simulated ones give at least 1 / (1 + draws)."""
    orderings = math.factorial(items)
    return invariant / orderings if orderings <= draws + 1 else max(invariant / orderings, 1 / (1 + draws))


def summary(observed: float, null: np.ndarray, exact: bool, best: float = 1.0, confidence: float = 0.95,
            min_p: float | None = None) -> dict:
    """The null's columns of a result: its mean, its `confidence` quantile, the p of the score and the smallest p
    any score could reach (`min_p` where given, a permutation null's; else the p of `best`, the test's maximum,
    against a null that does not depend on the measure, such as random rankings), with how many draws and whether
    exact."""
    values = np.asarray(null, dtype=float)
    finite = values[np.isfinite(values)]
    return {"null_mean": float(finite.mean()) if finite.size else float("nan"),
            "null_quantile": float(np.quantile(finite, confidence)) if finite.size else float("nan"),
            "p_value": p_value(observed, finite, exact),
            "min_p": float(min_p) if min_p is not None else p_value(best, finite, exact),
            "null_draws": int(finite.size), "null_exact": bool(exact)}


def decide(score: float, ci_low: float, chance: float, p: float, min_p: float, items: int, min_items: int,
           confidence: float = 0.95) -> str:
    """pass: the item-level p ≤ 1 − confidence and the row interval's lower end above chance; too few items: fewer
    than `min_items`, or a null that no score can clear (its smallest p above 1 − confidence); undefined: no
    score; else fail."""
    alpha = 1.0 - confidence
    if items < min_items or not np.isfinite(min_p) or min_p > alpha:
        return TOO_FEW
    if not np.isfinite(score):
        return UNDEFINED
    return PASS if (np.isfinite(p) and p <= alpha and np.isfinite(ci_low) and ci_low > chance) else FAIL
