"""Words defined by the data, not the tokenizer: segmentation, token -> word maps, word-level
hidden states and attention maps (Wu et al. 2020, §3 and appendix A; Clark et al. 2019).

Every example's words come from one segmentation of its text (:func:`segment_words`, or
:func:`segment_pair` for sentence pairs), written as character spans. Any tokenizer that reports
character offsets (a Hugging Face *fast* tokenizer with ``return_offsets_mapping=True``, or a
``tokenizers.Encoding``) is mapped onto those words by :func:`token_words`, so two models with
different tokenizers see the same words in the same order. Special tokens map to word -1.

:func:`aggregate_hidden` turns token rows into word rows (last / first / mean sub-word) and
:func:`aggregate_attention` turns token attention maps into word attention maps (attention *to* a
word summed over its sub-words, *from* a word averaged over its sub-words, special tokens dropped,
rows renormalised). Definitions: docs/numerics.md, "Words".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from reprsim.text.segmentation import WORD_PATTERN, segment_pair, segment_words  # noqa: F401  (the words API)

HOW = ("last", "first", "mean")


def token_words(offsets, word_spans: Sequence, sequence_ids: Sequence | None = None) -> np.ndarray:
    """The data word of each token: an int64 array (t,), -1 for tokens in no word.

    `offsets` (t, 2): each token's character span, as a fast tokenizer returns it. `word_spans`:
    ``(start, end)`` spans (one text) or ``(sequence, start, end)`` (pairs, :func:`segment_pair`).
    `sequence_ids` (t,): the sequence of each token (0, 1 or None for special tokens, as
    ``encoding.sequence_ids()`` gives); without it every token is in sequence 0.

    A token belongs to the first word (in text order) its span overlaps; as whitespace is in no word
    this is the word holding the token's first non-space character (a byte-level BPE token " word"
    whose offsets include the space belongs to "word"). A token that overlaps no word (empty spans
    such as the (0, 0) of special tokens, pure whitespace) and a token whose sequence id is None get
    -1. A token spanning two words is given to the first; the second then may have no token, which
    :func:`aggregate_hidden` and :func:`aggregate_attention` report when given `n_words`.
    """
    off = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    spans = np.asarray(word_spans, dtype=np.int64)
    if spans.size == 0:
        return np.full(len(off), -1, dtype=np.int64)
    if spans.ndim != 2 or spans.shape[1] not in (2, 3):
        raise ValueError(f"word_spans must be (start, end) or (sequence, start, end) tuples, got shape {spans.shape}")
    if spans.shape[1] == 2:
        spans = np.column_stack([np.zeros(len(spans), dtype=np.int64), spans])
    if sequence_ids is None:
        seq = np.zeros(len(off), dtype=np.int64)
    else:
        if len(sequence_ids) != len(off):
            raise ValueError(f"{len(sequence_ids)} sequence ids for {len(off)} tokens")
        seq = np.array([-1 if s is None else int(s) for s in sequence_ids], dtype=np.int64)
    out = np.full(len(off), -1, dtype=np.int64)
    for sid in np.unique(spans[:, 0]):
        (word_index,) = np.nonzero(spans[:, 0] == sid)
        starts, ends = spans[word_index, 1], spans[word_index, 2]
        if np.any(starts[1:] < ends[:-1]) or np.any(ends <= starts):
            raise ValueError(f"word spans of sequence {sid} must be non-empty, ordered and disjoint")
        (tok,) = np.nonzero(seq == sid)
        s, e = off[tok, 0], off[tok, 1]
        first = np.searchsorted(ends, s, side="right")  # first word ending after the token starts
        ok = (e > s) & (first < len(ends))
        ok[ok] &= starts[first[ok]] < e[ok]  # ... and starting before it ends: they overlap
        out[tok[ok]] = word_index[first[ok]]
    return out


def _word_index(word_ids, n_words: int | None) -> tuple[np.ndarray, int]:
    """word_ids as int64 numpy, and W; raises naming the words without a token."""
    w = np.asarray(word_ids.cpu() if hasattr(word_ids, "cpu") else word_ids, dtype=np.int64).reshape(-1)
    if np.any(w < -1):
        raise ValueError("word ids must be >= 0, or -1 for tokens in no word")
    n = int(w.max()) + 1 if n_words is None and len(w) else (0 if n_words is None else int(n_words))
    if np.any(w >= n):
        raise ValueError(f"word id {int(w.max())} out of range for {n} words")
    counts = np.bincount(w[w >= 0], minlength=n)
    missing = np.nonzero(counts == 0)[0]
    if len(missing):
        raise ValueError(f"words without any token: {missing.tolist()} (of {n}); was the input truncated, "
                         "or did a token span two words?")
    return w, n


def aggregate_hidden(hidden, word_ids, how: str = "last", n_words: int | None = None):
    """Word vectors from token vectors: (W, d), or (layers, W, d) for hidden (layers, t, d).

    `hidden`: numpy array or torch tensor, tokens on the second-to-last axis; `word_ids` (t,): each
    token's word, -1 for tokens in no word (dropped). `how`: ``last`` (the word's last sub-word, Wu
    et al. 2020 after Liu et al. 2019), ``first`` or ``mean`` (mean over its sub-words, accumulated
    in float64). W = `n_words`, or max word id + 1; a word in range with no token raises ValueError.
    The result has `hidden`'s type and dtype (numpy -> numpy, torch -> torch on the same device).
    """
    if how not in HOW:
        raise ValueError(f"how must be one of {HOW}, got {how!r}")
    w, n = _word_index(word_ids, n_words)
    if hidden.shape[-2] != len(w):
        raise ValueError(f"hidden has {hidden.shape[-2]} tokens, word_ids {len(w)}")
    is_torch = not isinstance(hidden, np.ndarray) and hasattr(hidden, "index_select")
    pos = np.nonzero(w >= 0)[0]
    words = w[pos]
    if how in ("last", "first"):
        pick = np.full(n, -1 if how == "last" else len(w), dtype=np.int64)
        (np.maximum if how == "last" else np.minimum).at(pick, words, pos)
        if is_torch:
            import torch

            return hidden.index_select(-2, torch.as_tensor(pick, device=hidden.device))
        return np.take(hidden, pick, axis=-2)
    counts = np.bincount(words, minlength=n).astype(np.float64)
    if is_torch:
        import torch

        src = hidden.index_select(-2, torch.as_tensor(pos, device=hidden.device)).to(torch.float64)
        sums = torch.zeros(*hidden.shape[:-2], n, hidden.shape[-1], dtype=torch.float64, device=hidden.device)
        sums.index_add_(sums.dim() - 2, torch.as_tensor(words, device=hidden.device), src)
        return (sums / torch.as_tensor(counts, device=hidden.device)[:, None]).to(hidden.dtype)
    src = np.moveaxis(np.take(hidden, pos, axis=-2).astype(np.float64), -2, 0)  # (t', ..., d)
    sums = np.zeros((n,) + src.shape[1:], dtype=np.float64)
    np.add.at(sums, words, src)
    means = sums / counts.reshape((n,) + (1,) * (src.ndim - 1))
    return np.moveaxis(means, 0, -2).astype(hidden.dtype if np.issubdtype(hidden.dtype, np.floating) else np.float64)


def aggregate_attention(maps, word_ids, n_words: int | None = None, empty: str = "nan") -> np.ndarray:
    """Word attention maps (H, W, W), float64, from token maps `maps` (H, t, t) (numpy or torch).

    Rows of `maps` are query tokens, columns key tokens, each row a distribution over the example's
    tokens (causal maps with zeros above the diagonal work as they are). Attention *to* a word is
    the sum over its sub-words (columns), attention *from* a word the mean over its sub-words (rows)
    (Clark et al. 2019; Wu et al. 2020); tokens with word id -1 (special tokens) are dropped, as
    rows and as columns, and each word row is then divided by its sum, so it sums to 1 again.
    A word row with no mass left (all its attention was on special tokens) is NaN for
    ``empty="nan"`` (the default: there is no distribution to report; measures must leave such rows
    out) or uniform over the W words for ``empty="uniform"``.
    """
    if empty not in ("nan", "uniform"):
        raise ValueError(f"empty must be 'nan' or 'uniform', got {empty!r}")
    w, n = _word_index(word_ids, n_words)
    a = np.asarray(maps.detach().cpu().double() if hasattr(maps, "detach") else maps, dtype=np.float64)
    if a.ndim != 3 or a.shape[1:] != (len(w), len(w)):
        raise ValueError(f"maps must be (heads, {len(w)}, {len(w)}) for {len(w)} tokens, got {a.shape}")
    member = np.zeros((len(w), n))  # token x word membership
    pos = np.nonzero(w >= 0)[0]
    member[pos, w[pos]] = 1.0
    mean_rows = member.T / member.sum(axis=0)[:, None]  # (W, t): average over a word's sub-words
    out = mean_rows @ a @ member  # (H, W, W): rows averaged, columns summed
    total = out.sum(axis=-1, keepdims=True)
    zero = total == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        out = out / total
    if np.any(zero):
        out = np.where(zero, np.nan if empty == "nan" else 1.0 / n, out)
    return out

