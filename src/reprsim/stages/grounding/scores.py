"""Scores of the "which measure to believe" tests: ReSi's (Klabunde et al. 2024/25) and Ding et al.'s (2021).

Pure functions on arrays a caller has already computed (a measure between layers or models, logits,
representations); no I/O. Definitions follow the two papers' public code (ReSi: github.com/mklabunde/resi
@ 24ab9e5: `monotonicity_experiment.py`, `measure_quality_metrics.py`,
`group_separation_experiment.py`, `measures/output_similarity.py`; Ding: github.com/js-d/sim_metric's
`pca_deletion`).
Orientation: every measure's values come with `higher_is_similar` (True for similarities such as CKA,
False for distances such as Procrustes); each function turns them the way its paper does.

Departures from the papers' code (each also said in its function's docstring):
- monotonicity: a pair of targets where either value is NaN leaves the conformity count (ReSi counts it
  as a non-violation, since NaN compares False).
- group_separation: a distance matrix whose largest value is negative is mapped with |max| in the
  denominator, so the map keeps the order (ReSi's (max − d)/max reverses it there; its distances are ≥ 0).
- jsd_bits / disagreement: a row with a NaN logit gives NaN (ReSi has no NaN handling for logits).
- delete_low_variance: the result stays in the original d-dim space with the mean added back (Ding keeps
  the d − k centred coordinates); see its docstring.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from reprsim.tables.grounding import RANKABLE

DING_GRID = (0, 100, 200, 300, 400, 500, 600, 650, 700, 725, 750, 758, 763, 767)
DING_WIDTH = 768
DISTANCE_FLOOR = 5e-5  # ReSi's max when every distance is 0


# --------------------------------------------------------------------------------------------------
# ReSi test 6: layer monotonicity


def _anchor_sides(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, n, n) bools over anchor i, targets j, k: k on the same side of i as j (k == j included), and that
    with j strictly nearer to i than k."""
    i, j, k = np.ogrid[:n, :n, :n]
    same_side = (j - i) * (k - i) > 0
    return same_side, same_side & (np.abs(j - i) < np.abs(k - i))


def monotonicity(values: np.ndarray, higher_is_similar: bool) -> dict:
    """ReSi test 6 (layer monotonicity) on an (L, L) matrix values[i, j] = measure(layer i of A, layer j of B).

    "correlation": NaN-mean over anchors i and both directions (targets j > i, then j < i) of Spearman ρ
    (average ranks) between values[i, j] and |i − j|, times −1 for similarities (+1 ideal); a side with fewer
    than two targets, a constant side or a NaN value gives NaN, which is skipped (as ReSi). "conformity":
    1 − violations / total over anchors and same-side target pairs (j strictly nearer than k); a violation
    is values[i, j] < values[i, k] (similarity) or > (distance); ties are not violations (as ReSi). A pair
    with a NaN value is left out of the total (departure: ReSi counts it as conforming). "anchors": how
    many anchor-direction correlations were finite. The diagonal is never used.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[0] != values.shape[1]:
        raise ValueError(f"monotonicity needs a square (L, L) matrix; got shape {values.shape}")
    n = values.shape[0]
    same_side, nearer = _anchor_sides(n)
    target = values[:, :, None]  # values[i, j]
    other = values[:, None, :]  # values[i, k]

    # Spearman per (anchor, side) from ranks within the side: rank of values[i, j] among its side's targets is
    # 1 + #{k: v_k < v_j} + (#{k: v_k == v_j} − 1)/2; the layer distance |i − j| ranks as itself (1 … count).
    rank = 0.5 + (same_side * ((other < target) + 0.5 * (other == target))).sum(axis=2)
    i, j = np.indices((n, n))
    gap = np.abs(i - j).astype(float)
    corrs = []
    for side in (j > i, j < i):
        count = side.sum(axis=1)
        middle = (count + 1) / 2
        r = np.where(side, rank - middle[:, None], 0.0)
        g = np.where(side, gap - middle[:, None], 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = (r * g).sum(axis=1) / np.sqrt((r * r).sum(axis=1) * (g * g).sum(axis=1))
        has_nan = (side & np.isnan(values)).any(axis=1)
        corrs.append(np.where((count >= 2) & ~has_nan, np.clip(rho, -1.0, 1.0), np.nan))
    corrs = np.concatenate(corrs) * (-1.0 if higher_is_similar else 1.0)
    finite = np.isfinite(corrs)

    counted = nearer & ~np.isnan(target) & ~np.isnan(other)
    violated = (target < other) if higher_is_similar else (target > other)
    total = int(counted.sum())
    return {
        "correlation": float(corrs[finite].mean()) if finite.any() else float("nan"),
        "conformity": 1.0 - int((violated & counted).sum()) / total if total else float("nan"),
        "anchors": int(finite.sum()),
    }


# --------------------------------------------------------------------------------------------------
# ReSi tests 3-5: group separation


def average_precision(scores: np.ndarray, positive: np.ndarray) -> float:
    """Average precision as sklearn's `average_precision_score(positive, scores)` (ReSi's AUPRC).

    Step-wise: Σ_t (R_t − R_{t−1}) P_t over thresholds t at the distinct score values, highest first;
    tied items enter together. NaN scores are dropped with their labels; no items left: NaN; no
    positives: 0.0 (what sklearn returns, with a warning).
    """
    scores = np.asarray(scores, dtype=float).ravel()
    positive = np.asarray(positive).astype(bool).ravel()
    if scores.shape != positive.shape:
        raise ValueError(f"scores and positive differ in length: {scores.shape} vs {positive.shape}")
    keep = ~np.isnan(scores)
    scores, positive = scores[keep], positive[keep]
    if scores.size == 0:
        return float("nan")
    n_pos = int(positive.sum())
    if n_pos == 0:
        return 0.0
    order = np.argsort(-scores, kind="mergesort")
    scores, positive = scores[order], positive[order]
    ends = np.r_[np.flatnonzero(np.diff(scores)), scores.size - 1]  # last index of each tied block
    tps = np.cumsum(positive)[ends]
    precision = tps / (ends + 1)
    recall_step = np.diff(np.r_[0, tps]) / n_pos
    return float(np.sum(recall_step * precision))


def group_separation(values: np.ndarray, groups: list, higher_is_similar: bool) -> dict:
    """ReSi's group-separation score (tests 3-5, B.7a) on an (M, M) matrix values[a, b] = measure(a, b).

    Per group g with ≥ 2 members and ≥ 1 non-member: positives values[a, b], a < b both in g (one
    orientation); negatives values[a, b], a in g, b not in g; NaNs dropped. Distances become
    similarities s = (max − d)/max over that group's positives ∪ negatives (max 0 → 5e-5, as ReSi;
    departure: a negative max divides by |max|, so the map keeps the order). Returns "auprc" (mean per-group
    AP; NaN if any group's positives or negatives are empty, as ReSi), "chance" (mean per-group positive
    share, NaN where auprc is), "conformity" (1 − mean share of (pos, neg) combinations with
    s_pos ≤ s_neg, ties counting as violations, as ReSi; NaN where auprc is), "d_prime" (pooled over all
    groups' s: (mean pos − mean neg) / sqrt((var pos + var neg)/2), ddof = 1; NaN with < 2 values a side or
    zero variance; not in ReSi), "groups" (groups scored), "positives", "negatives" (totals after NaNs).
    """
    values = np.asarray(values, dtype=float)
    groups = list(groups)
    if values.ndim != 2 or values.shape[0] != values.shape[1] or values.shape[0] != len(groups):
        raise ValueError(f"group_separation needs an (M, M) matrix and M group ids; got {values.shape}, "
                         f"{len(groups)} ids")
    ids = list(dict.fromkeys(groups))
    membership = np.array([[g == h for h in groups] for g in ids], dtype=bool).reshape(len(ids), len(groups))
    aps, chances, violation_rates, pooled_pos, pooled_neg = [], [], [], [], []
    empty = False
    scored = 0
    for inside in membership:
        members, others = np.flatnonzero(inside), np.flatnonzero(~inside)
        if len(members) < 2 or len(others) == 0:
            continue
        scored += 1
        a, b = np.triu_indices(len(members), k=1)
        pos = values[members[a], members[b]]
        neg = values[np.ix_(members, others)].ravel()
        pos, neg = pos[~np.isnan(pos)], neg[~np.isnan(neg)]
        if not higher_is_similar and pos.size + neg.size:
            top = np.r_[pos, neg].max()
            scale = abs(top) if top != 0 else DISTANCE_FLOOR
            pos, neg = (top - pos) / scale, (top - neg) / scale
        pooled_pos.append(pos)
        pooled_neg.append(neg)
        if pos.size == 0 or neg.size == 0:
            empty = True
            continue
        aps.append(average_precision(np.r_[pos, neg], np.r_[np.ones(pos.size, bool), np.zeros(neg.size, bool)]))
        chances.append(pos.size / (pos.size + neg.size))
        violation_rates.append(float(np.mean(pos[:, None] <= neg[None, :])))

    pos_all = np.concatenate(pooled_pos) if pooled_pos else np.empty(0)
    neg_all = np.concatenate(pooled_neg) if pooled_neg else np.empty(0)
    d_prime = float("nan")
    if pos_all.size >= 2 and neg_all.size >= 2 and (np.ptp(pos_all) > 0 or np.ptp(neg_all) > 0):
        pooled_var = (np.var(pos_all, ddof=1) + np.var(neg_all, ddof=1)) / 2
        if pooled_var > 0:
            d_prime = float((pos_all.mean() - neg_all.mean()) / np.sqrt(pooled_var))
    undefined = empty or scored == 0
    return {
        "auprc": float("nan") if undefined else float(np.mean(aps)),
        "chance": float("nan") if undefined else float(np.mean(chances)),
        "conformity": float("nan") if undefined else 1.0 - float(np.mean(violation_rates)),
        "d_prime": d_prime,
        "groups": scored,
        "positives": int(pos_all.size),
        "negatives": int(neg_all.size),
    }


def random_auprcs(groups: list, draws: int = 2000, seed: int = 0) -> np.ndarray:
    """The AUPRCs a measure scores by chance on this design: :func:`group_separation`'s auprc over `draws`
    matrices of independent uniform values (random rankings of every pair), the group test's item-level null
    (reprsim.stages.grounding.nulls). Its mean is the chance level, not ReSi's (the share of within-group pairs,
    which a constant measure scores): average precision over a few positives is biased upwards, so a random
    measure scores more (about 0.22 against 0.17 for 3 groups of 5, 0.35 against 0.29 for 2 groups of 5) and the
    share would call it better than chance."""
    rng = np.random.default_rng(seed)
    size = len(groups)
    return np.array([group_separation(rng.random((size, size)), groups, True)["auprc"] for _ in range(draws)])


def random_auprc(groups: list, draws: int = 2000, seed: int = 0) -> float:
    """The mean of :func:`random_auprcs`: the AUPRC a random ranking scores on this design (the chance level)."""
    return float(np.mean(random_auprcs(groups, draws, seed)))


# --------------------------------------------------------------------------------------------------
# Ding's specificity: is the same-depth layer of another seed the closest?


def same_depth_hits(values: np.ndarray, higher_is_similar: bool) -> np.ndarray:
    """Per layer i of A (rows of the (L, L) matrix values[i, j] = measure(A_i, B_j)): 1 where B's layer i is the
    closest of B's layers to A_i, 1/t where it ties with t − 1 others for closest, 0 otherwise, NaN where the row
    has a NaN (Ding et al.'s specificity, after Kornblith et al.: seeds that differ only in their seed should have
    same-depth layers closest). Chance for a random ranking: 1/L."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[0] != values.shape[1]:
        raise ValueError(f"same_depth_hits needs a square (L, L) matrix; got shape {values.shape}")
    oriented = values if higher_is_similar else -values
    best = np.nanmax(np.where(np.isnan(oriented), -np.inf, oriented), axis=1)
    closest = oriented >= best[:, None] - 1e-12 * np.maximum(1.0, np.abs(best[:, None]))
    hits = np.diag(closest) / closest.sum(axis=1)
    hits = hits.astype(float)
    hits[np.isnan(values).any(axis=1)] = np.nan
    return hits


# --------------------------------------------------------------------------------------------------
# ReSi tests 1-2 and Ding: rank correlation with a functional distance


def rank_correlation(dissimilarity: np.ndarray, functional: np.ndarray) -> float:
    """Spearman ρ (scipy, average ranks) between a representational and a functional distance (ReSi tests 1-2,
    Ding): positive is good when both are distances. Pairs with a NaN on either side are dropped; fewer than
    3 pairs left or a constant side: NaN.
    """
    x = np.asarray(dissimilarity, dtype=float).ravel()
    y = np.asarray(functional, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"dissimilarity and functional differ in length: {x.shape} vs {y.shape}")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    from scipy import stats  # here, not at the top: the probes' and the ranking's jobs import this module and never
    # call it, and scipy.stats alone takes 0.5 s to import
    return float(stats.spearmanr(x, y)[0])


# --------------------------------------------------------------------------------------------------
# ReSi test 2: output-based functional distances


def _two_logit_matrices(logits_a, logits_b) -> tuple[np.ndarray, np.ndarray]:
    """Both logit arrays as float (n, c) arrays of the same shape."""
    a, b = np.asarray(logits_a, dtype=float), np.asarray(logits_b, dtype=float)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"logits must be two (n, classes) arrays of one shape; got {a.shape} and {b.shape}")
    return a, b


def jsd_bits(logits_a: np.ndarray, logits_b: np.ndarray) -> np.ndarray:
    """Per-row Jensen–Shannon divergence in bits between the softmaxes of two models' logits, clipped to
    [0, 1] (ReSi's JSD, B.2, before its mean over rows). Computed from log-softmaxes (0·log 0 = 0); a row
    with a NaN logit gives NaN (ReSi's mean over rows is a NaN-mean).
    """
    from scipy import special  # as stats above

    a, b = _two_logit_matrices(logits_a, logits_b)
    with np.errstate(invalid="ignore"):
        log_p, log_q = special.log_softmax(a, axis=1), special.log_softmax(b, axis=1)
        log_m = np.logaddexp(log_p, log_q) - np.log(2.0)
        p, q = np.exp(log_p), np.exp(log_q)
        left = np.where(p > 0, p * (log_p - log_m), 0.0).sum(axis=1)
        right = np.where(q > 0, q * (log_q - log_m), 0.0).sum(axis=1)
    jsd = np.clip((left + right) / (2.0 * np.log(2.0)), 0.0, 1.0)
    jsd[np.isnan(a).any(axis=1) | np.isnan(b).any(axis=1)] = np.nan
    return jsd


def disagreement(logits_a: np.ndarray, logits_b: np.ndarray) -> np.ndarray:
    """Per-row 0/1 (float): the two models' argmax classes differ (ReSi's Disagreement, B.2, before its mean).
    Argmax ties go to the first class (numpy, as ReSi); a row with a NaN logit gives NaN.
    """
    a, b = _two_logit_matrices(logits_a, logits_b)
    differs = (a.argmax(axis=1) != b.argmax(axis=1)).astype(float)
    differs[np.isnan(a).any(axis=1) | np.isnan(b).any(axis=1)] = np.nan
    return differs


# --------------------------------------------------------------------------------------------------
# Ding experiment 2: principal-component deletion


def deletion_grid(d: int) -> list[int]:
    """Ding et al.'s numbers of deleted PCs (A.3) for width 768, scaled to width d: round(k·d/768) (half up),
    capped at d − 1, deduplicated and sorted; always ends at d − 1. deletion_grid(768) is Ding's grid.
    """
    if d < 1:
        raise ValueError(f"width must be ≥ 1; got {d}")
    scaled = {min(int(np.floor(k * d / DING_WIDTH + 0.5)), d - 1) for k in DING_GRID}
    return sorted(scaled | {d - 1})


def delete_low_variance(fit_rows: np.ndarray, rows: list[np.ndarray], grid: list[int]) -> list[list[np.ndarray]]:
    """Delete the k lowest-variance principal components (Ding et al. A.3) fitted on `fit_rows` (n, d) from
    each (m, d) array of `rows`, for every k of `grid`: per k, the deleted arrays in the order of `rows`. Centre
    on fit_rows' mean, SVD of the centred fit rows (once for the whole grid), keep the top d − k right singular
    vectors V: X_c V Vᵀ + mean, in the original d-dim space. Ding keeps the d − k centred
    coordinates X_c V (times d/(d − k)); that differs only by the mean, an isometric embedding (a rotation
    within the kept subspace) and a scale, to which Ding's measures are invariant after their centring and
    Frobenius normalisation: CKA and Procrustes exactly, CCA's correlations given a rank cut (reprsim's CCA
    has one); PWCCA's weights depend on its first argument's neuron basis, the undeleted side in Ding's
    design. A measure not invariant to that sees a fixed width d. With n ≤ d the fit rows' null directions
    are kept in an arbitrary order. k = 0 gives copies of the inputs. Computed in float64, returned in
    each input's float dtype.
    """
    fit = np.asarray(fit_rows)
    if fit.ndim != 2:
        raise ValueError(f"fit_rows must be (n, d); got shape {fit.shape}")
    d = fit.shape[1]
    for k in grid:
        if not 0 <= k < d:
            raise ValueError(f"k must be in [0, {d - 1}] for width {d}; got {k}")
    arrays = [np.asarray(x) for x in rows]
    for x in arrays:
        if x.ndim != 2 or x.shape[1] != d:
            raise ValueError(f"every array of rows must be (m, {d}); got shape {x.shape}")
    fit64 = fit.astype(np.float64)
    mean = fit64.mean(axis=0)
    vt = np.linalg.svd(fit64 - mean, full_matrices=fit.shape[0] < d)[2] if any(grid) else None
    centred = [x.astype(np.float64) - mean for x in arrays]
    dtypes = [x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64 for x in arrays]
    deleted = []
    for k in grid:
        if k == 0:
            deleted.append([x.copy() for x in arrays])
            continue
        keep = vt[: d - k].T  # (d, d − k)
        deleted.append([((c @ keep) @ keep.T + mean).astype(dtype) for c, dtype in zip(centred, dtypes)])
    return deleted


# --------------------------------------------------------------------------------------------------
# Linear probe (functional score of Ding's experiments 1-2; Ding's own recipe is not public)


def probe_correct(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray,
                  n_classes: int, seed: int = 0, weight_decay: float = 1e-3, max_iter: int = 200) -> np.ndarray:
    """Linear probe (reprsim's recipe; Ding's is not public): multinomial logistic regression in float64 on
    features standardised on the train rows (zero-variance columns become 0), mean cross-entropy +
    weight_decay·‖W‖² (bias not penalised), full-batch LBFGS (strong Wolfe) for at most max_iter iterations
    from zero weights under torch.manual_seed(seed) (global RNG state restored afterwards), on one torch
    thread (the thread count restored afterwards). Returns the boolean per-test-row correctness.
    """
    import torch

    train_x, test_x = np.asarray(train_x, dtype=np.float64), np.asarray(test_x, dtype=np.float64)
    train_y, test_y = np.asarray(train_y).astype(np.int64).ravel(), np.asarray(test_y).astype(np.int64).ravel()
    if train_x.ndim != 2 or test_x.ndim != 2 or train_x.shape[1] != test_x.shape[1]:
        raise ValueError(f"train_x and test_x must be (n, d) of one width; got {train_x.shape}, {test_x.shape}")
    if len(train_y) != len(train_x) or len(test_y) != len(test_x):
        raise ValueError("one label per row is needed")
    for y in (train_y, test_y):
        if y.size and (y.min() < 0 or y.max() >= n_classes):
            raise ValueError(f"labels must lie in [0, {n_classes - 1}]")
    mean = train_x.mean(axis=0)
    std = train_x.std(axis=0)
    std[std == 0] = 1.0  # a constant column centres to 0 and stays there
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a problem this small gains nothing from threads and stalls when CPUs are shared
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            x = torch.from_numpy((train_x - mean) / std)
            y = torch.from_numpy(train_y)
            weight = torch.zeros(x.shape[1], n_classes, dtype=torch.float64, requires_grad=True)
            bias = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)
            optimiser = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe",
                                          tolerance_grad=1e-9, tolerance_change=1e-12, history_size=20)

            def closure():
                optimiser.zero_grad()
                loss = torch.nn.functional.cross_entropy(x @ weight + bias, y) + weight_decay * (weight ** 2).sum()
                loss.backward()
                return loss

            optimiser.step(closure)
            with torch.no_grad():
                predicted = (torch.from_numpy((test_x - mean) / std) @ weight + bias).argmax(dim=1).numpy()
    finally:
        torch.set_num_threads(threads)
    return predicted == test_y


PROBE_PENALTIES = (1e-2, 1e-1, 1.0, 10.0)  # the L2 penalties cross-validation chooses from (1e-3 overfits here)


def cross_validated_penalty(train_x: np.ndarray, train_y: np.ndarray, n_classes: int,
                            penalties=PROBE_PENALTIES, folds: int = 5, seed: int = 0, max_iter: int = 200) -> dict:
    """The probe's L2 penalty chosen by `folds`-fold cross-validation on the train rows (folds drawn once, seeded):
    {"weight_decay": the penalty with the best mean held-out accuracy (the smaller on ties), "cv_accuracy": that
    accuracy, "per_penalty": every penalty's}. A fixed penalty let a probe on 1,200 standardised 384-wide rows
    overfit, so deleting components relieved it and the accuracy rose with deletion (issue 39)."""
    train_x, train_y = np.asarray(train_x, dtype=np.float64), np.asarray(train_y).ravel()
    parts = np.array_split(np.random.default_rng(seed).permutation(len(train_x)), folds)
    per_penalty = {}
    for penalty in penalties:
        held_out = []
        for part in parts:
            fit = np.setdiff1d(np.arange(len(train_x)), part)
            held_out.append(probe_correct(train_x[fit], train_y[fit], train_x[part], train_y[part], n_classes,
                                          seed=seed, weight_decay=penalty, max_iter=max_iter).mean())
        per_penalty[float(penalty)] = float(np.mean(held_out))
    best = max(per_penalty, key=lambda p: (per_penalty[p], -p))
    return {"weight_decay": best, "cv_accuracy": per_penalty[best], "per_penalty": per_penalty}


def accuracy_change(correct: np.ndarray) -> dict:
    """Whether deleting components costs a probe accuracy: `correct` (K, n) per-row correctness at each k of the
    grid (k = 0 first). "accuracy" per k, "change" per k (signed, against k = 0), "drop" (k = 0 minus the last k)
    and its paired standard error over rows, "falls": the drop exceeds twice that error and accuracy and k are
    negatively rank-correlated (Ding deletes where this holds: pretrained intermediate layers)."""
    correct = np.asarray(correct, dtype=float)
    accuracy = correct.mean(axis=1)
    difference = correct[0] - correct[-1]
    error = float(difference.std(ddof=1) / np.sqrt(len(difference))) if len(difference) > 1 else float("nan")
    trend = rank_correlation(np.arange(len(accuracy)), accuracy) if len(accuracy) >= 3 else float("nan")
    drop = float(accuracy[0] - accuracy[-1])
    return {"accuracy": [round(float(a), 4) for a in accuracy],
            "change": [round(float(a - accuracy[0]), 4) for a in accuracy], "drop": round(drop, 4),
            "drop_se": round(error, 4), "trend": round(float(trend), 4),
            "falls": bool(np.isfinite(error) and drop > 2 * error and np.isfinite(trend) and trend < 0)}


# --------------------------------------------------------------------------------------------------
# Ranks across measures (imports no measure: the table's job reruns only when a score changes)


def ranked(table: pd.DataFrame) -> pd.DataFrame:
    """All measures' tables with each measure's rank within its (test, variant): 1 = best, "min" ties (ReSi). Only
    rows a test can decide are ranked (decision pass or fail): descriptive rows, tests that cannot rank here and
    tests with too few items get no rank."""
    table = table.copy()
    decided = table["decision"].isin(RANKABLE) if "decision" in table else pd.Series(True, table.index)
    table["rank"] = table["score"].where(decided).groupby([table["test"], table["variant"]]).rank(
        ascending=False, method="min")
    return table
