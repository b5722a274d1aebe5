"""Attention-level similarity (Wu et al. 2020, §3.4–3.5 and appendix A.4), per docs/numerics.md.

A model's attention in one layer, over a corpus, is a list with one entry per example
(sentence): an array (heads, t_i, t_i) whose row j is word j's attention distribution over
the t_i words of its own sentence (rows sum to 1; a causal model's zeros above the diagonal
are kept). Two sides A and B must hold the same examples in the same order, with the same
t_i per example (for models with different tokenisers: word-level maps, reprsim.words).

    head_similarity(A, B, measure) -> (H_a, H_b) array: every head of A against every head of B
        frobenius: ‖A_i[h] − B_i[h']‖_F per sentence, mean over sentences (distance)
        pearson:   Pearson ρ of row j of A_i[h] and row j of B_i[h'], mean over the words of
                   all sentences; rows constant on either side are left out (similarity)
        js:        Jensen–Shannon divergence (natural log) of row j of both, mean over the
                   words of all sentences (distance, in [0, ln 2])
    best_heads(S, measure)         -> for each head of A, the best head of B and its value
    attnsim(A, B, measure)         -> Result: mean over A's heads of the best value (max for
                                      pearson, min for frobenius and js); meta has the heads
    distributed(A)                 -> (Σ t_i², H): column h = head h's weights over every word
                                      pair (i, j, k) of every sentence
    distributed_similarity(A, B, measure, **params)
                                   -> reprsim.metrics.compute(measure, distributed(A),
                                      distributed(B), **params): svcca, pwcca or cka
                                      ("distributed attention similarity")

Identical maps give exactly JS 0, Frobenius 0 and Pearson 1 (to rounding, ≤ 1e-12). Wu et
al.'s released code gives Pearson ≈ 0.88 for identical maps; reprsim does not repeat that.

Chance level: every function takes the examples as a list, so a permutation null is the
same call with B's examples re-paired: sentence i of A against sentence π(i) of B, where π
permutes only among sentences of equal length t (maps of different sizes cannot be
compared word by word). That null is left to the caller (the workflow).

All arithmetic is float64 torch on the device of A's first map; results are numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from reprsim.metrics._inputs import as_float64, device_of

MEASURES: dict[str, str] = {"frobenius": "distance", "pearson": "similarity", "js": "distance"}
ROW_TOLERANCE = 1e-3  # |row sum − 1| allowed: float16-stored maps sum to 1 within ~5e-4
_CHUNK_ELEMENTS = 1 << 22  # the (heads_a chunk, H_b, t, t) temporaries of frobenius and js


def _measure(measure: str) -> str:
    if measure not in MEASURES:
        raise ValueError(f"unknown attention measure {measure!r}; available: {', '.join(MEASURES)}")
    return MEASURES[measure]


def _side(maps: Sequence, name: str, device: torch.device | None, tol: float,
          normalise: bool = True) -> list[torch.Tensor]:
    """One side's maps as float64 tensors, checked: (H, t, t), one H for all, rows distributions
    (non-negative, summing to 1 within tol); with normalise, each row divided by its float64 sum."""
    if isinstance(maps, (np.ndarray, torch.Tensor)) or not isinstance(maps, Sequence):
        raise ValueError(f"{name} must be a list with one (heads, t, t) array per example; "
                         f"got {type(maps).__name__} (wrap a single example as [maps])")
    if len(maps) == 0:
        raise ValueError(f"{name} is empty; attention similarity needs at least one example")
    out, heads = [], None
    device = device if device is not None else device_of(maps[0])
    for i, m in enumerate(maps):
        x = as_float64(m, device, f"{name}[{i}]")
        if x.ndim != 3 or x.shape[1] != x.shape[2] or x.shape[1] == 0:
            raise ValueError(f"{name}[{i}] must be (heads, t, t) with t ≥ 1; got shape {tuple(x.shape)}")
        if heads is None:
            heads = x.shape[0]
        elif x.shape[0] != heads:
            raise ValueError(f"{name}[{i}] has {x.shape[0]} heads but {name}[0] has {heads}; "
                             "one layer's maps must have the same heads in every example")
        if heads == 0:
            raise ValueError(f"{name}[{i}] has no heads")
        if (x < 0).any():
            raise ValueError(f"{name}[{i}] has negative weights (min {x.min().item():.3g}); "
                             "attention maps must be softmax outputs")
        sums = x.sum(dim=-1)
        worst = (sums - 1).abs().max().item()
        if worst > tol:
            raise ValueError(
                f"{name}[{i}]: every row must sum to 1 (one attention distribution per word); row sums "
                f"range from {sums.min().item():.6g} to {sums.max().item():.6g} (tolerance {tol:g}). Pass "
                "maps after softmax; with special tokens dropped, renormalise each row "
                "(reprsim.words.aggregate_attention does)")
        out.append(x / sums[..., None] if normalise else x)
    return out


def _pair(A: Sequence, B: Sequence, tol: float) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    a = _side(A, "A", None, tol)
    b = _side(B, "B", a[0].device, tol)
    if len(a) != len(b):
        raise ValueError(f"A and B must hold the same examples; got {len(a)} and {len(b)} examples")
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape[1] != y.shape[1]:
            raise ValueError(f"example {i} has t={x.shape[1]} words in A but t={y.shape[1]} in B; both "
                             "sides must be maps over the same words (word-level maps for different tokenisers)")
    return a, b


def _chunks(heads_a: int, heads_b: int, t: int):
    size = max(1, _CHUNK_ELEMENTS // (heads_b * t * t))
    for start in range(0, heads_a, size):
        yield slice(start, min(start + size, heads_a))


def _frobenius(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(H_a, H_b): ‖x[h] − y[h']‖_F (exact differences, so identical maps give exactly 0)."""
    out = torch.empty(x.shape[0], y.shape[0], dtype=torch.float64, device=x.device)
    for s in _chunks(x.shape[0], y.shape[0], x.shape[1]):
        diff = x[s, None] - y[None]
        out[s] = diff.square().sum(dim=(-2, -1)).sqrt()
    return out


def _js_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(H_a, H_b) sums over the rows j of JS(x[h, j], y[h', j]); 0·log 0 = 0; natural log."""
    out = torch.empty(x.shape[0], y.shape[0], dtype=torch.float64, device=x.device)
    for s in _chunks(x.shape[0], y.shape[0], x.shape[1]):
        p, q = x[s, None], y[None]
        m = (p + q) / 2  # p == q gives m == p exactly, so log(p / m) == 0 exactly
        kl_p = torch.where(p > 0, p * torch.log(p / m), 0.0).sum(dim=-1)
        kl_q = torch.where(q > 0, q * torch.log(q / m), 0.0).sum(dim=-1)
        out[s] = (0.5 * (kl_p + kl_q)).clamp_min(0.0).sum(dim=-1)
    return out


def _pearson_rows(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(H_a, H_b) sums of ρ over rows non-constant on both sides, and the numbers of such rows."""
    live_x = x.amax(dim=-1) > x.amin(dim=-1)  # (H_a, t): a constant row has every entry equal
    live_y = y.amax(dim=-1) > y.amin(dim=-1)
    xc = x - x.mean(dim=-1, keepdim=True)
    yc = y - y.mean(dim=-1, keepdim=True)
    # unit rows (the 1/t normaliser cancels); constant rows are masked below, never divided by 0
    xn = xc / torch.where(live_x, xc.square().sum(dim=-1).sqrt(), 1.0)[..., None]
    yn = yc / torch.where(live_y, yc.square().sum(dim=-1).sqrt(), 1.0)[..., None]
    rho = torch.einsum("hjk,gjk->hgj", xn, yn).clamp(-1.0, 1.0)
    live = live_x[:, None, :] & live_y[None, :, :]
    return torch.where(live, rho, 0.0).sum(dim=-1), live.sum(dim=-1)


def _scores(A, B, measure: str, tol: float) -> tuple[np.ndarray, dict]:
    _measure(measure)
    a, b = _pair(A, B, tol)
    heads_a, heads_b = a[0].shape[0], b[0].shape[0]
    total = torch.zeros(heads_a, heads_b, dtype=torch.float64, device=a[0].device)
    count = torch.zeros(heads_a, heads_b, dtype=torch.int64, device=a[0].device)
    words = sum(x.shape[1] for x in a)
    for x, y in zip(a, b):
        if measure == "frobenius":
            total += _frobenius(x, y)
        elif measure == "js":
            total += _js_rows(x, y)
        else:
            rho_sum, live = _pearson_rows(x, y)
            total += rho_sum
            count += live
    if measure == "frobenius":
        values = total / len(a)
    elif measure == "js":
        values = total / words
    else:
        values = torch.where(count > 0, total / count.clamp_min(1), torch.nan)
    info = {"measure": measure, "kind": MEASURES[measure], "examples": len(a), "words": int(words),
            "heads_a": heads_a, "heads_b": heads_b}
    if measure == "pearson":
        info["rows_left_out_min"] = int(words - count.max().item())
        info["rows_left_out_max"] = int(words - count.min().item())
    return values.cpu().numpy(), info


def head_similarity(A: Sequence, B: Sequence, measure: str, *, tol: float = ROW_TOLERANCE) -> np.ndarray:
    """(H_a, H_b) float64: `measure` between every head h of A and every head h' of B.

    A, B: lists with one (heads, t_i, t_i) map per example, same examples and t_i on both sides,
    rows summing to 1 within `tol` (ValueError naming the example otherwise). Each row is then
    divided by its float64 sum, so float16-stored maps are exact distributions (as scipy's
    jensenshannon does); identical inputs stay identical.
    - frobenius: mean over sentences i of ‖A_i[h] − B_i[h']‖_F (a distance; 0 for identical maps).
    - pearson: mean over all words j of all sentences of ρ(A_i[h][j, :], B_i[h'][j, :]) over the
      t_i keys (zeros of causal maps included); rows constant on either side (all entries equal:
      a one-word sentence, a uniform row) are left out; NaN where no row is left. 1 for identical
      maps (Wu et al.'s released code gives ≈ 0.88 there; reprsim does not repeat that).
    - js: mean over all words of ½KL(p‖m) + ½KL(q‖m), m = (p + q)/2, natural log, 0·log 0 = 0
      (a divergence in [0, ln 2]; 0 for identical maps).
    Vectorised over heads and words; sentences are looped (their t_i differ). For a permutation
    null, call it with B's sentences re-paired among sentences of equal length.
    """
    return _scores(A, B, measure, tol)[0]


def best_heads(S: np.ndarray, measure: str) -> tuple[np.ndarray, np.ndarray]:
    """For each head h of A (row of S = head_similarity(...)), the best head of B and its value:
    max over h' for pearson, min for frobenius and js. Undefined (NaN) entries are skipped; a row
    with none defined gives NaN and index −1. Returns (values (H_a,), indices (H_a,))."""
    kind = _measure(measure)
    S = np.asarray(S, dtype=np.float64)
    if S.ndim != 2 or 0 in S.shape:
        raise ValueError(f"S must be a non-empty (H_a, H_b) head-similarity matrix; got shape {S.shape}")
    defined = ~np.isnan(S)
    fill = -np.inf if kind == "similarity" else np.inf
    filled = np.where(defined, S, fill)
    index = filled.argmax(axis=1) if kind == "similarity" else filled.argmin(axis=1)
    values = filled[np.arange(S.shape[0]), index]
    none = ~defined.any(axis=1)
    return np.where(none, np.nan, values), np.where(none, -1, index)


def attnsim(A: Sequence, B: Sequence, measure: str, *, tol: float = ROW_TOLERANCE):
    """Wu et al.'s attnsim of layer A to layer B: the mean over A's heads of the best head of B
    (max for pearson, min for frobenius and js; see head_similarity). Asymmetric: the best match
    is taken for each head of A.

    Returns reprsim.metrics.Result(value, meta): meta has measure, kind, examples, words,
    heads_a, heads_b, best_head (index in B per head of A), best_value, head_similarity (the
    (H_a, H_b) matrix), and nan_reason when the value is NaN (pearson with a head of A whose rows
    are all constant against every head of B)."""
    from reprsim.metrics.api import Result

    S, info = _scores(A, B, measure, tol)
    values, index = best_heads(S, measure)
    meta = {**info, "direction": "a->b", "best_head": index, "best_value": values, "head_similarity": S}
    if np.isnan(values).any():
        missing = np.flatnonzero(np.isnan(values)).tolist()
        meta["nan_reason"] = (f"heads {missing} of A have no row that is non-constant on both sides against "
                              "any head of B; Pearson correlation is undefined there")
        return Result(float("nan"), meta)
    return Result(float(values.mean()), meta)


def distributed(A: Sequence, *, tol: float = ROW_TOLERANCE) -> np.ndarray:
    """(Σ t_i², H) float64: column h is head h's weight for every word pair (j, k) of every sentence,
    sentence by sentence, row-major within a sentence (row j·t_i + k of sentence i's block is
    A_i[h, j, k]). Wu et al.'s attention representation for distributed similarity (§3.5). Rows are
    checked as in head_similarity but the weights are returned as given (not renormalised)."""
    maps = _side(A, "A", None, tol, normalise=False)
    heads = maps[0].shape[0]
    return torch.cat([x.reshape(heads, -1).T for x in maps]).cpu().numpy()


def distributed_similarity(A: Sequence, B: Sequence, measure: str = "cka", *, tol: float = ROW_TOLERANCE,
                           **params):
    """Distributed attention similarity (Wu et al. §3.5): reprsim.metrics.compute(measure,
    distributed(A), distributed(B), **params), rows = the word pairs of all sentences, columns =
    heads. Wu et al. use svcca, pwcca and cka; any reprsim.metrics measure is accepted and its
    parameters and degenerate cases are its own (docs/numerics.md §3–4). Returns its Result."""
    from reprsim.metrics.api import compute

    _pair(A, B, tol)  # same examples and words on both sides
    return compute(measure, distributed(A, tol=tol), distributed(B, tol=tol), **params)
