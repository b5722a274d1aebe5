"""reprsim.metrics.attention against direct loop transcriptions of Wu et al.'s definitions (docs/numerics.md)."""

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon
from scipy.stats import pearsonr

import reprsim.metrics.attention as attention
import rounding
from reprsim.metrics import compute
from reprsim.metrics.attention import (
    attnsim,
    best_heads,
    combine_terms,
    distributed,
    distributed_similarity,
    head_similarity,
    head_terms,
    prepare,
)

LENGTHS = (1, 3, 5, 8, 2)


def softmax_maps(rng, heads, lengths=LENGTHS, causal=False, scale=2.0):
    """One (heads, t, t) row-stochastic map per sentence: softmax of random logits; causal maps
    keep keys ≤ query (zeros above the diagonal) and renormalise each row."""
    maps = []
    for t in lengths:
        logits = rng.normal(scale=scale, size=(heads, t, t))
        weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
        if causal:
            weights = weights * np.tril(np.ones((t, t)))
        maps.append(weights / weights.sum(axis=-1, keepdims=True))
    return maps


# ---- loop transcriptions of the definitions ---------------------------------------------------

def loop_frobenius(A, B):
    S = np.zeros((A[0].shape[0], B[0].shape[0]))
    for h in range(S.shape[0]):
        for g in range(S.shape[1]):
            S[h, g] = np.mean([np.linalg.norm(a[h] - b[g], "fro") for a, b in zip(A, B)])
    return S


def loop_js(A, B):
    S = np.zeros((A[0].shape[0], B[0].shape[0]))
    for h in range(S.shape[0]):
        for g in range(S.shape[1]):
            per_word = [jensenshannon(a[h, j], b[g, j]) ** 2  # natural base: divergence = distance²
                        for a, b in zip(A, B) for j in range(a.shape[1])]
            S[h, g] = np.mean(per_word)
    return S


def loop_pearson(A, B):
    S = np.zeros((A[0].shape[0], B[0].shape[0]))
    for h in range(S.shape[0]):
        for g in range(S.shape[1]):
            per_word = []
            for a, b in zip(A, B):
                for j in range(a.shape[1]):
                    p, q = a[h, j], b[g, j]
                    if np.ptp(p) == 0 or np.ptp(q) == 0:
                        continue  # constant distribution: correlation undefined, left out
                    per_word.append(pearsonr(p, q)[0])
            S[h, g] = np.mean(per_word) if per_word else np.nan
    return S


LOOPS = {"frobenius": loop_frobenius, "js": loop_js, "pearson": loop_pearson}


def terms_tolerance(measure, lengths):
    """(rtol, atol) between two computations of the same head terms in other batches (other shapes, other kernel
    blocking), or of the similarities combined from them (tests/rounding.py): a sentence's term is a sum of t² products;
    frobenius takes ‖x‖² + ‖y‖² − 2⟨x, y⟩ from the product only where that is above 1e-3 of ‖x‖² + ‖y‖² (the
    differences exactly below), so its root is off by at most 1e3·γ relatively; pearson's terms are sums of t rows'
    ρ (|ρ| ≤ 1), js's of t rows whose entropy terms add up to at most 2·ln(2t)."""
    t = max(lengths)
    if measure == "frobenius":
        return 2 * rounding.products(t * t, condition=1e3), 0.0
    return 0.0, 2 * rounding.products(t * t, scale=t if measure == "pearson" else 2 * t * math.log(2 * t))


# ---- each measure against its loop ------------------------------------------------------------

@pytest.mark.parametrize("measure", sorted(LOOPS))
@pytest.mark.parametrize("causal", [False, True])
def test_head_similarity_matches_loop(measure, causal):
    rng = np.random.default_rng(hash((measure, causal)) % 2**32)
    A = softmax_maps(rng, 3, causal=causal)
    B = softmax_maps(rng, 4, causal=causal)
    S = head_similarity(A, B, measure)
    assert S.shape == (3, 4) and S.dtype == np.float64
    np.testing.assert_allclose(S, LOOPS[measure](A, B), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("measure", sorted(LOOPS))
def test_causal_against_bidirectional_matches_loop(measure):
    rng = np.random.default_rng(7)
    A = softmax_maps(rng, 2, causal=True)
    B = softmax_maps(rng, 3, causal=False)
    np.testing.assert_allclose(head_similarity(A, B, measure), LOOPS[measure](A, B), rtol=1e-10, atol=1e-12)


def test_js_bounds_and_zero_weights():
    rng = np.random.default_rng(3)
    A, B = softmax_maps(rng, 2, causal=True), softmax_maps(rng, 2, causal=True)
    S = head_similarity(A, B, "js")
    assert np.all(S >= 0) and np.all(S <= np.log(2))
    # disjoint supports: JS = ln 2 exactly per word
    one_hot_a = [np.eye(2)[None]]
    one_hot_b = [np.eye(2)[::-1][None].copy()]
    assert head_similarity(one_hot_a, one_hot_b, "js")[0, 0] == pytest.approx(np.log(2), abs=1e-15)


def test_pearson_leaves_out_constant_rows():
    rng = np.random.default_rng(4)
    A = softmax_maps(rng, 2, lengths=(1, 4, 6))  # the one-word sentence's row [1] is constant
    B = softmax_maps(rng, 2, lengths=(1, 4, 6))
    A[1][0, 2] = 1 / 4  # a uniform row of head 0 of A
    B[2][1, 5] = 1 / 6  # a uniform row of head 1 of B
    np.testing.assert_allclose(head_similarity(A, B, "pearson"), loop_pearson(A, B), rtol=1e-10, atol=1e-12)
    result = attnsim(A, B, "pearson")
    assert result.meta["rows_left_out_min"] == 1  # the one-word sentence only (head 1 vs head 0)
    assert result.meta["rows_left_out_max"] == 3  # it, A's uniform row and B's uniform row


def test_causal_first_row_is_kept_over_all_keys():
    # A causal map's first row [1, 0, ..., 0] is a distribution over all t words, not constant:
    # Pearson compares it (ρ = 1 between two causal heads there); only rows with every entry equal
    # are left out.
    rng = np.random.default_rng(5)
    A, B = softmax_maps(rng, 1, lengths=(4,), causal=True), softmax_maps(rng, 1, lengths=(4,), causal=True)
    per_row = [pearsonr(A[0][0, j], B[0][0, j])[0] for j in range(4)]
    assert per_row[0] == pytest.approx(1.0)
    assert head_similarity(A, B, "pearson")[0, 0] == pytest.approx(np.mean(per_row), abs=1e-12)


def test_pearson_all_rows_constant_is_nan_with_reason():
    A = [np.full((2, 3, 3), 1 / 3)]
    B = softmax_maps(np.random.default_rng(6), 2, lengths=(3,))
    assert np.isnan(head_similarity(A, B, "pearson")).all()
    result = attnsim(A, B, "pearson")
    assert np.isnan(result.value) and "undefined" in result.meta["nan_reason"]
    assert list(result.meta["best_head"]) == [-1, -1]


def test_identical_maps():
    rng = np.random.default_rng(8)
    for causal in (False, True):
        A = softmax_maps(rng, 3, causal=causal)
        B = [a.copy() for a in A]
        assert np.all(np.diag(head_similarity(A, B, "js")) == 0.0)
        assert np.all(np.diag(head_similarity(A, B, "frobenius")) == 0.0)
        np.testing.assert_allclose(np.diag(head_similarity(A, B, "pearson")), 1.0, atol=1e-12)
        assert attnsim(A, B, "js").value == 0.0
        assert attnsim(A, B, "frobenius").value == 0.0
        assert attnsim(A, B, "pearson").value == pytest.approx(1.0, abs=1e-12)
        assert list(attnsim(A, B, "js").meta["best_head"]) == [0, 1, 2]


def test_float16_and_torch_inputs():
    rng = np.random.default_rng(9)
    A, B = softmax_maps(rng, 2), softmax_maps(rng, 2)
    A16 = [a.astype(np.float16) for a in A]  # stored maps: rows sum to 1 only within ~1e-3
    S = head_similarity(A16, [torch.tensor(b) for b in B], "js")
    np.testing.assert_allclose(S, loop_js([a.astype(np.float64) for a in A16], B), rtol=1e-10, atol=1e-12)


# ---- per-sentence terms: subsets and re-pairings from one computation ---------------------------

MIXED = (1, 3, 5, 8, 2, 5, 3, 8, 4, 5, 12, 3)


@pytest.mark.parametrize("measure", sorted(LOOPS))
def test_head_terms_combine_over_a_subset_equals_head_similarity(measure):
    rng = np.random.default_rng(20)
    A = softmax_maps(rng, 3, lengths=MIXED, causal=True)
    B = softmax_maps(rng, 4, lengths=MIXED)
    totals, counts = head_terms(A, B, measure)
    assert totals.shape == counts.shape == (len(MIXED), 3, 4) and totals.dtype == np.float64
    if measure == "frobenius":
        assert np.all(counts == 1)
    elif measure == "js":
        np.testing.assert_array_equal(counts, np.broadcast_to(np.array(MIXED)[:, None, None], counts.shape))
    np.testing.assert_allclose(combine_terms(totals, counts, measure), head_similarity(A, B, measure),
                               rtol=1e-12, atol=1e-14)
    rtol, atol = terms_tolerance(measure, MIXED)  # the subset is stacked in smaller batches
    for _ in range(3):
        subset = np.sort(rng.choice(len(MIXED), size=5, replace=False))
        expected = head_similarity([A[i] for i in subset], [B[i] for i in subset], measure)
        np.testing.assert_allclose(combine_terms(totals[subset], counts[subset], measure), expected,
                                   rtol=rtol, atol=atol)
        np.testing.assert_allclose(expected, LOOPS[measure]([A[i] for i in subset], [B[i] for i in subset]),
                                   rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("measure", sorted(LOOPS))
def test_head_terms_pairs_re_pair_equal_lengths(measure):
    rng = np.random.default_rng(21)
    A = softmax_maps(rng, 2, lengths=MIXED, causal=True)
    B = softmax_maps(rng, 3, lengths=MIXED, causal=True)
    # a permutation within equal lengths: 5s at 2, 5, 9; 3s at 1, 6, 11; 8s at 3, 7
    perm = np.arange(len(MIXED))
    perm[[2, 5, 9]] = [5, 9, 2]
    perm[[1, 6, 11]] = [11, 1, 6]
    perm[[3, 7]] = [7, 3]
    pairs = np.column_stack([np.arange(len(MIXED)), perm])
    totals, counts = head_terms(prepare(A), prepare(B, name="B"), measure, pairs=pairs)
    want_totals, want_counts = head_terms(A, [B[j] for j in perm], measure)
    np.testing.assert_allclose(totals, want_totals, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(counts, want_counts)
    with pytest.raises(ValueError, match=r"pairs A\[0\] \(t=1\) with B\[1\] \(t=3\)"):
        head_terms(A, B, measure, pairs=[[0, 1]])
    with pytest.raises(ValueError, match="must index"):
        head_terms(A, B, measure, pairs=[[0, len(MIXED)]])


@pytest.mark.parametrize("measure", sorted(LOOPS))
def test_small_blocks_match_loop(measure, monkeypatch):
    # blocks smaller than one pair's (H_a, H_b, t, t) grid split the heads of A too
    monkeypatch.setattr(attention, "_CHUNK_ELEMENTS", 40)
    rng = np.random.default_rng(22)
    A = softmax_maps(rng, 3, lengths=MIXED, causal=True)
    B = softmax_maps(rng, 2, lengths=MIXED)
    np.testing.assert_allclose(head_similarity(A, B, measure), LOOPS[measure](A, B), rtol=1e-10, atol=1e-12)


def test_identical_maps_batched_exact():
    # many sentences of one length go through one stacked computation; near-identical heads
    # take frobenius's exact path
    rng = np.random.default_rng(23)
    A = softmax_maps(rng, 4, lengths=(7,) * 9 + (3,) * 4, causal=True)
    near = [a.copy() for a in A]
    near[0][1, 2, 0] += 1e-6
    near[0][1, 2] /= near[0][1, 2].sum()
    for measure in ("js", "frobenius"):
        totals, _ = head_terms(A, [a.copy() for a in A], measure)
        assert np.all(np.diagonal(totals, axis1=1, axis2=2) == 0.0)
        np.testing.assert_allclose(head_similarity(A, near, measure), LOOPS[measure](A, near), rtol=1e-10, atol=1e-15)
    assert head_similarity(A, near, "frobenius")[1, 1] > 0
    np.testing.assert_allclose(np.diag(head_similarity(A, A, "pearson")), 1.0, atol=1e-12)


# ---- best-head reductions ---------------------------------------------------------------------

@pytest.mark.parametrize("measure", sorted(LOOPS))
def test_attnsim_best_head_matches_loop(measure):
    rng = np.random.default_rng(10)
    A, B = softmax_maps(rng, 4, causal=True), softmax_maps(rng, 3)
    S = LOOPS[measure](A, B)
    best, index = [], []
    for h in range(S.shape[0]):
        candidates = [S[h, g] for g in range(S.shape[1])]
        pick = max if measure == "pearson" else min
        value = pick(candidates)
        best.append(value)
        index.append(candidates.index(value))
    result = attnsim(A, B, measure)
    assert result.value == pytest.approx(np.mean(best), rel=1e-10)
    assert list(result.meta["best_head"]) == index
    np.testing.assert_allclose(result.meta["best_value"], best, rtol=1e-10)
    assert result.meta["kind"] == ("similarity" if measure == "pearson" else "distance")


def test_best_heads_skips_undefined_entries():
    S = np.array([[np.nan, 0.2, 0.5], [0.1, np.nan, np.nan], [np.nan, np.nan, np.nan]])
    values, index = best_heads(S, "pearson")
    np.testing.assert_array_equal(index, [2, 0, -1])
    np.testing.assert_array_equal(values[:2], [0.5, 0.1])
    assert np.isnan(values[2])
    values, index = best_heads(S, "js")
    np.testing.assert_array_equal(index, [1, 0, -1])


# ---- distributed attention similarity ---------------------------------------------------------

def test_distributed_shape_and_columns_match_loop():
    rng = np.random.default_rng(11)
    A = softmax_maps(rng, 3, causal=True)
    D = distributed(A)
    assert D.shape == (sum(t * t for t in LENGTHS), 3) and D.dtype == np.float64
    expected = np.zeros_like(D)
    for h in range(3):
        row = 0
        for a in A:
            t = a.shape[1]
            for j in range(t):
                for k in range(t):
                    expected[row, h] = a[h, j, k]
                    row += 1
    np.testing.assert_array_equal(D, expected)


def test_distributed_similarity_uses_metrics():
    rng = np.random.default_rng(12)
    A, B = softmax_maps(rng, 4, lengths=(6, 7, 5, 8)), softmax_maps(rng, 3, lengths=(6, 7, 5, 8))
    assert distributed_similarity(A, A, "cka").value == pytest.approx(1.0, abs=1e-12)
    for measure in ("cka", "svcca", "pwcca"):
        got = distributed_similarity(A, B, measure)
        want = compute(measure, distributed(A), distributed(B))
        assert got.value == pytest.approx(want.value, abs=1e-12)
    with pytest.raises(ValueError, match="no parameter"):
        distributed_similarity(A, B, "cka", bogus=1)


# ---- checks -----------------------------------------------------------------------------------

def test_errors_name_the_problem():
    rng = np.random.default_rng(13)
    A, B = softmax_maps(rng, 2), softmax_maps(rng, 2)
    with pytest.raises(ValueError, match="same examples; got 5 and 4"):
        head_similarity(A, B[:4], "js")
    with pytest.raises(ValueError, match="example 2 has t=5 words in A but t=4 in B"):
        head_similarity(A, B[:2] + softmax_maps(rng, 2, lengths=(4, 8, 2)), "js")
    bad = [a.copy() for a in A]
    bad[3][1, 2] *= 1.1
    with pytest.raises(ValueError, match=r"A\[3\]: every row must sum to 1"):
        head_similarity(bad, B, "pearson")
    with pytest.raises(ValueError, match=r"B\[3\]: every row must sum to 1"):
        attnsim(A, bad, "pearson")
    with pytest.raises(ValueError, match=r"A\[3\]: every row must sum to 1"):
        distributed(bad)
    with pytest.raises(ValueError, match=r"A\[1\] has 3 heads"):
        head_similarity([A[0], np.concatenate([A[1], A[1][:1]])] + A[2:], B, "js")
    with pytest.raises(ValueError, match="negative"):
        head_similarity([-A[0]] + A[1:], B, "js")
    with pytest.raises(ValueError, match="unknown attention measure"):
        head_similarity(A, B, "cosine")
    with pytest.raises(ValueError, match="list with one"):
        head_similarity(A[0], B[0], "js")
    with pytest.raises(ValueError, match="empty"):
        head_similarity([], [], "js")
    with pytest.raises(ValueError, match=r"\(heads, t, t\)"):
        head_similarity([np.ones((2, 3, 4)) / 4], [np.ones((2, 3, 4)) / 4], "js")
    nan = [a.copy() for a in A]
    nan[0][0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        head_similarity(nan, B, "js")
