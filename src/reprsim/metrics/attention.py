"""Attention-level similarity (Wu et al. 2020, §3.4–3.5 and appendix A.4), per docs/numerics.md.

A model's attention in one layer, over a corpus, is a list with one entry per example
(sentence): an array (heads, t_i, t_i) whose row j is word j's attention distribution over
the t_i words of its own sentence (rows sum to 1; a causal model's zeros above the diagonal
are kept). Two sides A and B must hold the same examples in the same order, with the same
t_i per example (for models with different tokenisers: word-level maps, reprsim.text.words).

    head_similarity(A, B, measure) -> (H_a, H_b) array: every head of A against every head of B
        frobenius: ‖A_i[h] − B_i[h']‖_F per sentence, mean over sentences (distance)
        pearson:   Pearson ρ of row j of A_i[h] and row j of B_i[h'], mean over the words of
                   all sentences; rows constant on either side are left out (similarity)
        js:        Jensen–Shannon divergence (natural log) of row j of both, mean over the
                   words of all sentences (distance, in [0, ln 2])
    head_terms(A, B, measure)      -> per-sentence (totals, counts), (n, H_a, H_b) each: the
                                      head similarity of any subset S of the sentences is
    combine_terms(totals[S], counts[S], measure)   (intervals from one computation)
    prepare(A)                     -> A checked and stacked once, for many comparisons
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
compared word by word). head_terms(A, B, measure, pairs=...) computes any set of such
pairings in one call; the pair job (reprsim.stages.compare.attention) draws them.

Sentences of equal length are stacked, (n_t, H, t, t), and computed a length at a time:
pearson and frobenius as batched products (frobenius takes near-identical heads' differences
exactly), js as one logarithm per element of the (pair, head, head, word, word) grid, in
blocks of at most _CHUNK_ELEMENTS. All arithmetic is float64, in torch on the device of A's
first map (the js grid in numpy when that is the CPU); results are numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from reprsim.measure_registry import ATTENTION_BY_CONFIG_NAME, ATTENTION_ROW_TOLERANCE
from reprsim.metrics._inputs import device_of

# the head-level measures and their kinds, from their registry entries (attn_pearson, attn_js, attn_frobenius; the
# registry declares their properties and tests/unit/test_attention_registry.py checks them)
MEASURES: dict[str, str] = {name: spec.kind for name, spec in ATTENTION_BY_CONFIG_NAME.items() if spec.head_level}
ROW_TOLERANCE = ATTENTION_ROW_TOLERANCE  # |row sum − 1| allowed: float16-stored maps sum to 1 within ~5e-4
_CHUNK_ELEMENTS = 1 << 22  # elements of js's (pairs, H_a, H_b, t·t) temporaries per block


def _measure(measure: str) -> str:
    if measure not in MEASURES:
        raise ValueError(f"unknown attention measure {measure!r}; available: {', '.join(MEASURES)}")
    return MEASURES[measure]


class PreparedMaps:
    """One side's maps, checked and row-normalised (see prepare), as float64 tensors grouped by
    sentence length: `groups[t]` is (n_t, H, t, t) and example i is `groups[lengths[i]][slots[i]]`.
    What the measures need of each group (centred rows, row entropies) is computed once and kept,
    so one prepared side serves every measure and every layer it is compared with."""

    def __init__(self, heads: int, lengths: np.ndarray, slots: np.ndarray, groups: dict, device):
        self.heads, self.lengths, self.slots, self.groups, self.device = heads, lengths, slots, groups, device
        self.cache: dict = {}

    def __len__(self) -> int:
        return len(self.lengths)

    def example(self, i: int) -> torch.Tensor:
        return self.groups[int(self.lengths[i])][int(self.slots[i])]

    def prepared(self, key: str, t: int, make) -> tuple:
        if (key, t) not in self.cache:
            self.cache[(key, t)] = make(self.groups[t])
        return self.cache[(key, t)]


def _shape(m) -> tuple:
    return tuple(m.shape) if isinstance(m, torch.Tensor) else np.shape(m)


def _stack(entries: list, device: torch.device) -> torch.Tensor:
    """Entries of one length as one float64 (n_t, H, t, t) tensor on `device`."""
    if all(not isinstance(m, torch.Tensor) for m in entries):
        return torch.from_numpy(np.stack([np.asarray(m, dtype=np.float64) for m in entries])).to(device)
    return torch.stack([m.detach().to(device=device, dtype=torch.float64) if isinstance(m, torch.Tensor)
                        else torch.as_tensor(np.asarray(m, dtype=np.float64), device=device) for m in entries])


def _side(maps: Sequence, name: str, device: torch.device | None, tol: float,
          normalise: bool = True) -> PreparedMaps:
    """One side's maps as float64 tensors, checked: (H, t, t), one H for all, finite, rows
    distributions (non-negative, summing to 1 within tol); with normalise, each row divided by its
    float64 sum. Shapes are checked example by example, values one length group at a time; an error
    names the first example (in order) that fails."""
    if isinstance(maps, PreparedMaps):
        if not normalise:
            raise ValueError(f"{name}: prepared maps are row-normalised; pass the maps themselves")
        if device is not None and maps.device != device:
            raise ValueError(f"{name} was prepared on {maps.device}, but the other side is on {device}")
        return maps
    if isinstance(maps, (np.ndarray, torch.Tensor)) or not isinstance(maps, Sequence):
        raise ValueError(f"{name} must be a list with one (heads, t, t) array per example; "
                         f"got {type(maps).__name__} (wrap a single example as [maps])")
    if len(maps) == 0:
        raise ValueError(f"{name} is empty; attention similarity needs at least one example")
    device = device if device is not None else device_of(maps[0])
    heads = None
    lengths = np.empty(len(maps), dtype=np.int64)
    for i, m in enumerate(maps):
        shape = _shape(m)
        if len(shape) != 3 or shape[1] != shape[2] or shape[1] == 0:
            raise ValueError(f"{name}[{i}] must be (heads, t, t) with t ≥ 1; got shape {tuple(shape)}")
        if heads is None:
            heads = shape[0]
        elif shape[0] != heads:
            raise ValueError(f"{name}[{i}] has {shape[0]} heads but {name}[0] has {heads}; "
                             "one layer's maps must have the same heads in every example")
        if heads == 0:
            raise ValueError(f"{name}[{i}] has no heads")
        lengths[i] = shape[1]
    slots = np.empty(len(maps), dtype=np.int64)
    groups, sums, problems = {}, {}, []
    for t in np.unique(lengths).tolist():
        members = np.flatnonzero(lengths == t)
        slots[members] = np.arange(len(members))
        x = _stack([maps[i] for i in members], device)
        row_sums = x.sum(dim=-1)
        finite = torch.isfinite(row_sums).flatten(1).all(dim=1)  # a NaN or Inf makes its row's sum one
        negative = x.flatten(1).amin(dim=1) < 0
        off = ((row_sums - 1).abs().flatten(1).amax(dim=1) > tol) | ~finite
        for flag, kind in ((~finite, 0), (negative, 1), (off, 2)):
            bad = torch.nonzero(flag).flatten().cpu().numpy()
            if len(bad):
                problems.append((int(members[bad[0]]), kind, t, int(bad[0])))
        groups[t], sums[t] = x, row_sums
    if problems:
        i, kind, t, slot = min(problems)
        x, s = groups[t][slot], sums[t][slot]
        if kind == 0:
            raise ValueError(f"{name}[{i}] contains NaN or Inf; similarity is undefined")
        if kind == 1:
            raise ValueError(f"{name}[{i}] has negative weights (min {x.min().item():.3g}); "
                             "attention maps must be softmax outputs")
        raise ValueError(
            f"{name}[{i}]: every row must sum to 1 (one attention distribution per word); row sums "
            f"range from {s.min().item():.6g} to {s.max().item():.6g} (tolerance {tol:g}). Pass "
            "maps after softmax; with special tokens dropped, renormalise each row "
            "(reprsim.text.words.aggregate_attention does)")
    if normalise:
        groups = {t: x / sums[t][..., None] for t, x in groups.items()}
    return PreparedMaps(heads, lengths, slots, groups, device)


def prepare(maps: Sequence, *, tol: float = ROW_TOLERANCE, name: str = "A") -> PreparedMaps:
    """One side's maps checked (as head_similarity checks them; errors name `name`[i]), each row
    divided by its float64 sum, and stacked by length. head_terms, head_similarity and attnsim
    accept the result in place of the list (their own `tol` then no longer applies): a caller
    comparing one layer with many (every layer pair, a permutation null) checks and converts each
    layer once."""
    return _side(maps, name, None, tol)


def _pair(A: Sequence, B: Sequence, tol: float) -> tuple[PreparedMaps, PreparedMaps]:
    a = _side(A, "A", None, tol)
    b = _side(B, "B", a.device, tol)
    if len(a) != len(b):
        raise ValueError(f"A and B must hold the same examples; got {len(a)} and {len(b)} examples")
    differ = np.flatnonzero(a.lengths != b.lengths)
    if len(differ):
        i = int(differ[0])
        raise ValueError(f"example {i} has t={a.lengths[i]} words in A but t={b.lengths[i]} in B; both "
                         "sides must be maps over the same words (word-level maps for different tokenisers)")
    return a, b


# ---- per-pair terms, one length group at a time ------------------------------------------------------

def _blocks(pairs: int, heads_a: int, per_head: int):
    """(pair slice, head-of-A slice) blocks whose (pairs, heads_a, ...) temporaries of `per_head`
    elements per (pair, head of A) stay within _CHUNK_ELEMENTS."""
    heads_per = max(1, _CHUNK_ELEMENTS // per_head)
    if heads_per >= heads_a:
        size = max(1, _CHUNK_ELEMENTS // (per_head * heads_a))
        for start in range(0, pairs, size):
            yield slice(start, min(start + size, pairs)), slice(None)
    else:
        for p in range(pairs):
            for start in range(0, heads_a, heads_per):
                yield slice(p, p + 1), slice(start, min(start + heads_per, heads_a))


def _frobenius_terms(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(P, H_a, H_b): ‖x[p, h] − y[p, h']‖_F for pairs of maps x (P, H_a, t, t), y (P, H_b, t, t).

    ‖x − y‖² = ‖x‖² + ‖y‖² − 2⟨x, y⟩ from one batched product; where that is below 1e-3 of
    ‖x‖² + ‖y‖² (near-identical heads, where its rounding would matter) the differences are taken
    exactly, so identical maps give exactly 0."""
    fx, fy = x.flatten(2), y.flatten(2)
    nx, ny = fx.square().sum(dim=-1), fy.square().sum(dim=-1)
    scale = nx[:, :, None] + ny[:, None, :]
    squared = scale - 2 * torch.bmm(fx, fy.transpose(1, 2))
    close = torch.nonzero(squared <= 1e-3 * scale)
    step = max(1, _CHUNK_ELEMENTS // fx.shape[-1])
    for start in range(0, len(close), step):
        p, h, g = close[start:start + step].unbind(dim=1)
        squared[p, h, g] = (fx[p, h] - fy[p, g]).square().sum(dim=-1)
    return squared.clamp_min(0.0).sqrt()


_TINY = float(np.finfo(np.float64).tiny)
_LN2 = float(np.log(2.0))


def _js_side(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x with exact zeros raised to the smallest normal float (so no term needs the 0·log 0 case;
    what that changes in any sum is below 1e-300), and each row's Σ_k p log p and Σ_k p."""
    raised = torch.where(x > 0, x, _TINY)
    return raised, (raised * raised.log()).sum(dim=-1), raised.sum(dim=-1)


def _js_terms(x, y, hx, hy, sx, sy) -> torch.Tensor:
    """(P, H_a, H_b) sums over the rows j of JS(x[p, h, j], y[p, h', j]), natural log.

    With s = p + q (so m = s/2), JS = ½ Σ p log p + ½ Σ q log q − ½ Σ s log s + ½ ln 2 (Σ p + Σ q):
    the per-row terms (hx, hy: Σ p log p; sx, sy: Σ p, from _js_side) are the sides' own, and the
    (pair, head, head, word, word) grid needs one sum, one logarithm and one product-sum per
    element, in blocks of at most _CHUNK_ELEMENTS. Rows equal on both sides are set to exactly 0 (as
    p·log(p/m) gives). On the CPU the grid is numpy's (vectorised log, no thread start-up per
    operation)."""
    own = 0.5 * (hx[:, :, None] + hy[:, None] + _LN2 * (sx[:, :, None] + sy[:, None]))  # (P, H_a, H_b, t)
    if x.device.type == "cpu":
        return torch.from_numpy(_js_numpy(x.numpy(), y.numpy(), own.numpy()))
    P, heads_a, t = x.shape[0], x.shape[1], x.shape[2]
    out = torch.empty(P, heads_a, y.shape[1], dtype=torch.float64, device=x.device)
    for ps, hs in _blocks(P, heads_a, y.shape[1] * t * t):
        p, q = x[ps, hs, None], y[ps, None]
        s = p + q
        rows = own[ps, hs] - 0.5 * (s * s.log()).sum(dim=-1)
        rows.clamp_min_(0.0)
        c, h, g, j = torch.nonzero(rows <= 1e-12).unbind(dim=1)  # rounding leaves ~1e-16 where p == q
        same = (p[c, h, 0, j] == q[c, 0, g, j]).all(dim=-1)
        rows[c[same], h[same], g[same], j[same]] = 0.0
        out[ps, hs] = rows.sum(dim=-1)
    return out


def _js_numpy(x: np.ndarray, y: np.ndarray, own: np.ndarray) -> np.ndarray:
    P, heads_a, t = x.shape[0], x.shape[1], x.shape[2]
    heads_b = y.shape[1]
    out = np.empty((P, heads_a, heads_b))
    flat_x, flat_y = x.reshape(P, heads_a, 1, t * t), y.reshape(P, 1, heads_b, t * t)
    size = min(max(_CHUNK_ELEMENTS, heads_b * t * t), P * heads_a * heads_b * t * t)
    s_buffer, log_buffer = np.empty(size), np.empty(size)  # reused: no page faults per block
    for ps, hs in _blocks(P, heads_a, heads_b * t * t):
        p, q = flat_x[ps, hs], flat_y[ps]
        shape = (p.shape[0], p.shape[1], heads_b, t * t)
        s = s_buffer[:int(np.prod(shape))].reshape(shape)
        log_s = log_buffer[:s.size].reshape(shape)
        np.add(p, q, out=s)
        np.log(s, out=log_s)
        rows = own[ps, hs] - 0.5 * np.einsum("ik,ik->i", s.reshape(-1, t), log_s.reshape(-1, t)).reshape(*shape[:3], t)
        np.maximum(rows, 0.0, out=rows)
        c, h, g, j = np.nonzero(rows <= 1e-12)  # rounding leaves ~1e-16 where p == q
        if len(c):
            same = (x[ps, hs][c, h, j] == y[ps][c, g, j]).all(axis=-1)
            rows[c[same], h[same], g[same], j[same]] = 0.0
        out[ps, hs] = rows.sum(axis=-1)
    return out


def _centred_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows centred and scaled to unit norm, zero where the row is constant (all entries equal);
    and the (n, H, t) mask of non-constant rows."""
    live = x.amax(dim=-1) > x.amin(dim=-1)
    xc = x - x.mean(dim=-1, keepdim=True)
    # the 1/t normaliser cancels; constant rows are zeroed, never divided by 0
    norm = torch.where(live, xc.square().sum(dim=-1).sqrt(), 1.0)
    return torch.where(live[..., None], xc / norm[..., None], 0.0), live.to(torch.float64)


def _pearson_terms(xn, live_x, yn, live_y) -> tuple[torch.Tensor, torch.Tensor]:
    """(P, H_a, H_b) sums of ρ over the rows non-constant on both sides, and their numbers:
    Σ_j Σ_k x̂[h, j, k] ŷ[h', j, k] with constant rows zeroed is one batched product."""
    totals = torch.bmm(xn.flatten(2), yn.flatten(2).transpose(1, 2))
    counts = torch.bmm(live_x, live_y.transpose(1, 2)).round().to(torch.int64)
    return totals, counts


def _gathers(lengths: np.ndarray, heads: int):
    """(t, positions) of the pairs of each length, in runs whose gathered (pairs, heads, t, t) copies
    stay within 2·_CHUNK_ELEMENTS (a null with many re-pairings is computed in several runs)."""
    for t in np.unique(lengths).tolist():
        rows = np.flatnonzero(lengths == t)
        step = max(1, 2 * _CHUNK_ELEMENTS // (heads * t * t))
        for start in range(0, len(rows), step):
            yield t, rows[start:start + step]


def _terms(a: PreparedMaps, b: PreparedMaps, measure: str, pairs: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(P, H_a, H_b) totals and counts for the pairs (A's example, B's example), one length at a time."""
    totals = torch.zeros(len(pairs), a.heads, b.heads, dtype=torch.float64, device=a.device)
    counts = torch.ones(len(pairs), a.heads, b.heads, dtype=torch.int64, device=a.device)
    lengths = a.lengths[pairs[:, 0]]
    for t, rows in _gathers(lengths, max(a.heads, b.heads)):
        ia = torch.as_tensor(a.slots[pairs[rows, 0]], device=a.device)
        ib = torch.as_tensor(b.slots[pairs[rows, 1]], device=a.device)
        where = torch.as_tensor(rows, device=a.device)
        if measure == "frobenius":
            totals[where] = _frobenius_terms(a.groups[t][ia], b.groups[t][ib])
        elif measure == "js":
            xr, hx, sx = a.prepared("js", t, _js_side)
            yr, hy, sy = b.prepared("js", t, _js_side)
            totals[where] = _js_terms(xr[ia], yr[ib], hx[ia], hy[ib], sx[ia], sy[ib])
            counts[where] = t
        else:
            xn, live_x = a.prepared("pearson", t, _centred_rows)
            yn, live_y = b.prepared("pearson", t, _centred_rows)
            totals[where], counts[where] = _pearson_terms(xn[ia], live_x[ia], yn[ib], live_y[ib])
    return totals, counts


def head_terms(A: Sequence, B: Sequence, measure: str, *, tol: float = ROW_TOLERANCE,
               pairs=None) -> tuple[np.ndarray, np.ndarray]:
    """Per-example terms of head_similarity: `totals` (P, H_a, H_b) float64 and `counts`
    (P, H_a, H_b) int64, such that head_similarity over any subset S of the examples is
    combine_terms(totals[S], counts[S], measure):

    - frobenius: totals[i] = ‖A_i[h] − B_i[h']‖_F, counts = 1 (the mean over sentences);
    - js: totals[i] = Σ_j JS(A_i[h][j], B_i[h'][j]), counts = t_i (the mean over words);
    - pearson: totals[i] = Σ_j ρ over the rows j non-constant on both sides, counts = their number.

    By default P = len(A) and example i of A is paired with example i of B (same checks as
    head_similarity). `pairs` (P, 2) integer array: row (i, j) pairs A's example i with B's
    example j instead (t_i must equal t_j; A and B may then differ in length) — the permutation
    null's re-pairings computed in one call. Examples of equal length are stacked and computed
    together; float64 throughout; identical maps give exactly JS 0 and Frobenius 0."""
    _measure(measure)
    if pairs is None:
        a, b = _pair(A, B, tol)
        pairs = np.repeat(np.arange(len(a))[:, None], 2, axis=1)
    else:
        a = _side(A, "A", None, tol)
        b = _side(B, "B", a.device, tol)
        pairs = np.asarray(pairs)
        if pairs.ndim != 2 or pairs.shape[1] != 2 or not np.issubdtype(pairs.dtype, np.integer):
            raise ValueError(f"pairs must be a (P, 2) integer array of (A's example, B's example); got {pairs.shape}")
        if ((pairs < 0) | (pairs >= [len(a), len(b)])).any():
            raise ValueError(f"pairs must index A's {len(a)} and B's {len(b)} examples")
        differ = np.flatnonzero(a.lengths[pairs[:, 0]] != b.lengths[pairs[:, 1]])
        if len(differ):
            i, j = pairs[differ[0]]
            raise ValueError(f"pair {differ[0]} pairs A[{i}] (t={a.lengths[i]}) with B[{j}] (t={b.lengths[j]}); "
                             "only examples of equal length can be compared word by word")
    totals, counts = _terms(a, b, measure, pairs)
    return totals.cpu().numpy(), counts.cpu().numpy()


def combine_terms(totals, counts, measure: str) -> np.ndarray:
    """(H_a, H_b) head similarity from the head_terms of a subset of examples: totals.sum(0) /
    counts.sum(0) (for frobenius counts are 1: the mean over sentences); NaN where the count is 0
    (pearson: no row non-constant on both sides). Pearson is clipped to [−1, 1] (rounding)."""
    _measure(measure)
    totals, counts = np.asarray(totals, dtype=np.float64), np.asarray(counts)
    if totals.ndim != 3 or totals.shape != counts.shape:
        raise ValueError(f"totals and counts must both be (examples, H_a, H_b); got {totals.shape} and {counts.shape}")
    return _combine(totals.sum(axis=0), counts.sum(axis=0), measure)


def _combine(total, count, measure: str) -> np.ndarray:
    """totals / counts summed over examples (any leading shape) -> head similarity, NaN where count is 0."""
    total, count = np.asarray(total, dtype=np.float64), np.asarray(count, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan)
    return np.clip(values, -1.0, 1.0) if measure == "pearson" else values


def _scores(A, B, measure: str, tol: float) -> tuple[np.ndarray, dict]:
    _measure(measure)
    a, b = _pair(A, B, tol)
    pairs = np.repeat(np.arange(len(a))[:, None], 2, axis=1)
    totals, counts = (v.cpu().numpy() for v in _terms(a, b, measure, pairs))
    count = counts.sum(axis=0)
    values = _combine(totals.sum(axis=0), count, measure)
    words = int(a.lengths.sum())
    info = {"measure": measure, "kind": MEASURES[measure], "examples": len(a), "words": words,
            "heads_a": a.heads, "heads_b": b.heads}
    if measure == "pearson":
        info["rows_left_out_min"] = int(words - count.max())
        info["rows_left_out_max"] = int(words - count.min())
    return values, info


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
    Sentences of equal length are stacked and computed together (head_terms; combine_terms gives
    the value on any subset of sentences from the same terms). For a permutation null, pair B's
    sentences anew among sentences of equal length (head_terms' `pairs`).
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
    return torch.cat([maps.example(i).reshape(maps.heads, -1).T for i in range(len(maps))]).cpu().numpy()


def distributed_similarity(A: Sequence, B: Sequence, measure: str = "cka", *, tol: float = ROW_TOLERANCE,
                           **params):
    """Distributed attention similarity (Wu et al. §3.5): reprsim.metrics.compute(measure,
    distributed(A), distributed(B), **params), rows = the word pairs of all sentences, columns =
    heads. Wu et al. use svcca, pwcca and cka; any reprsim.metrics measure is accepted and its
    parameters and degenerate cases are its own (docs/numerics.md §3–4). Returns its Result."""
    from reprsim.metrics.api import compute

    _pair(A, B, tol)  # same examples and words on both sides
    return compute(measure, distributed(A, tol=tol), distributed(B, tol=tol), **params)
