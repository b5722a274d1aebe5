"""reprsim.design.perturbations: ReSi's label noise, shortcut and augmentation (grounding B.3-B.5), each property
asserted on its own."""

from __future__ import annotations

import numpy as np
import pytest

from reprsim.design.perturbations import (
    STOP_WORDS,
    augmented,
    majority_share,
    noisy_labels,
    shortcut_rate,
    shortcut_token,
    shortcut_tokens,
    with_shortcut,
)

LABELS = np.random.default_rng(1).integers(0, 3, size=1000)
WORDS = ("film plot acting music story cast script ending scene actor director camera "
         "wonderful dull clever boring moving bland funny awful").split()
STOPS = ("the a of and is was it to in with this that not").split()


def sentences(n: int, seed: int = 0) -> list[str]:
    """Texts of 6..20 words, about a third of them stop words, with punctuation now and then."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS)] + [rng.choice(STOPS) if rng.random() < 0.35 else rng.choice(WORDS)
                                       for _ in range(rng.integers(5, 20))]
        out.append(" ".join(words) + (" ." if rng.random() < 0.5 else ""))
    return out


def stop_sequence(text: str) -> list[str]:
    return [w for w in text.split() if w.lower() in STOP_WORDS or w == "."]


def content(text: str) -> list[str]:
    return [w for w in text.split() if w.lower() not in STOP_WORDS and w != "."]


# --------------------------------------------------------------------------- label noise
@pytest.mark.parametrize("fraction", [0.0, 0.25, 0.75, 1.0, 0.3333])
def test_noise_changes_exactly_round_fraction_n_rows(fraction):
    new, changed = noisy_labels(LABELS, 3, fraction, 5, seed=0)
    assert changed.sum() == round(fraction * len(LABELS))
    assert np.array_equal(new != LABELS, changed)          # every chosen row changes, no other does
    assert np.array_equal(new[~changed], LABELS[~changed])


def test_noise_labels_are_new_class_ids_drawn_uniformly():
    labels = np.zeros(20_000, dtype=np.int64)
    new, changed = noisy_labels(labels, 2, 1.0, 5, seed=3)
    assert changed.all()
    assert set(np.unique(new)) == {2, 3, 4, 5, 6}            # [n_labels, n_labels + new_classes)
    shares = np.bincount(new - 2) / len(new)
    assert np.abs(shares - 0.2).max() < 3 * np.sqrt(0.2 * 0.8 / len(new))


def test_no_new_classes_gives_another_real_label():
    new, changed = noisy_labels(LABELS, 3, 0.5, 0, seed=0)
    assert new.max() < 3 and (new[changed] != LABELS[changed]).all()
    # both other labels occur for each true label
    for label in range(3):
        assert set(new[changed & (LABELS == label)]) == set(range(3)) - {label}


def test_noise_is_reproducible_by_seed_and_differs_across_seeds():
    a, mask_a = noisy_labels(LABELS, 3, 0.5, 5, seed=7)
    b, mask_b = noisy_labels(LABELS, 3, 0.5, 5, seed=7)
    c, mask_c = noisy_labels(LABELS, 3, 0.5, 5, seed=8)
    assert np.array_equal(a, b) and np.array_equal(mask_a, mask_b)
    assert not np.array_equal(mask_a, mask_c)


def test_noise_refuses_bad_input():
    with pytest.raises(ValueError, match="fraction"):
        noisy_labels(LABELS, 3, 1.5, 5, 0)
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        noisy_labels(LABELS, 2, 0.5, 5, 0)


# --------------------------------------------------------------------------- shortcut
def test_shortcut_tokens():
    assert shortcut_token(3) == "[CLASS3]"
    assert shortcut_tokens(3) == ["[CLASS0]", "[CLASS1]", "[CLASS2]"]


@pytest.mark.parametrize("rate", [0.354, 0.558, 0.889])
def test_shortcut_correct_share_is_the_rate(rate):
    labels = np.random.default_rng(2).integers(0, 3, size=5000)
    texts, tokens = with_shortcut(["x"] * 5000, labels, 3, rate, seed=0)
    share = np.mean(tokens == labels)
    assert abs(share - rate) < 3 * np.sqrt(rate * (1 - rate) / 5000)
    # the wrong tokens are the other labels, uniformly
    wrong = tokens[tokens != labels] - labels[tokens != labels]
    assert abs(np.mean(wrong % 3 == 1) - 0.5) < 3 * np.sqrt(0.25 / wrong.size)


def test_shortcut_rate_one_always_and_rate_zero_never_true():
    texts, tokens = with_shortcut([f"text {i}" for i in range(1000)], LABELS, 3, 1.0, seed=4)
    assert np.array_equal(tokens, LABELS)
    assert texts == [f"[CLASS{c}] text {i}" for i, c in enumerate(LABELS)]
    _, tokens = with_shortcut(["t"] * 1000, LABELS, 3, 0.0, seed=4)
    assert not (tokens == LABELS).any() and tokens.min() >= 0 and tokens.max() < 3


def test_shortcut_is_reproducible_by_seed_and_differs_across_seeds():
    texts = [f"t{i}" for i in range(len(LABELS))]
    assert with_shortcut(texts, LABELS, 3, 0.5, 1)[0] == with_shortcut(texts, LABELS, 3, 0.5, 1)[0]
    assert with_shortcut(texts, LABELS, 3, 0.5, 1)[0] != with_shortcut(texts, LABELS, 3, 0.5, 2)[0]


def test_majority_share():
    assert majority_share(np.array([0, 1, 1, 1, 2])) == 0.6
    assert majority_share(np.array([4, 4])) == 1.0
    assert shortcut_rate("majority", np.array([0, 0, 0, 1])) == 0.75
    assert shortcut_rate(0.3, np.array([0, 1])) == 0.3
    with pytest.raises(ValueError, match="majority"):
        shortcut_rate("most", np.array([0, 1]))


# --------------------------------------------------------------------------- augmentation
@pytest.mark.parametrize("rate", [0.25, 0.5, 1.0])
def test_augmentation_changes_about_rate_of_the_content_words(rate):
    texts = sentences(600)
    out, changed = augmented(texts, rate, seed=0)
    n_content = np.array([len(content(t)) for t in texts])
    expected = np.maximum(1, np.round(rate * n_content))
    lengths = np.array([len(t.split()) for t in texts]) - np.array([len(t.split()) for t in out])
    deleted, inserted, swapped = lengths > 0, lengths < 0, lengths == 0
    # deletion and insertion: exactly max(1, round(rate × content words)); deletion keeps a word
    assert np.array_equal(lengths[deleted], changed[deleted])
    assert np.array_equal(-lengths[inserted], changed[inserted])
    assert (changed[inserted] == expected[inserted]).all()
    n_words = np.array([len(t.split()) for t in texts])
    assert (changed[deleted] == np.minimum(expected, n_words - 1)[deleted]).all()
    # swap: as many words moved (at least 2), each to a place another content word had
    assert (changed[swapped] == np.minimum(np.maximum(2, expected[swapped]), n_content[swapped])).all()
    # overall, about `rate` of the content words change; each operation is drawn about a third of the time
    assert abs(changed.sum() / n_content.sum() - rate) < 0.05
    for share in (deleted.mean(), inserted.mean(), swapped.mean()):
        assert abs(share - 1 / 3) < 0.08


def test_stop_words_are_never_deleted_or_moved():
    texts = sentences(400, seed=5)
    out, _ = augmented(texts, 1.0, seed=3)
    for before, after in zip(texts, out):
        assert stop_sequence(after) == stop_sequence(before)   # none deleted, none copied, order kept
        if len(after.split()) == len(before.split()):           # a swap: stop words keep their places
            assert [w in STOP_WORDS for w in after.split()] == [w in STOP_WORDS for w in before.split()]
        # a deletion keeps at least one word; words only come from the text itself
        assert after.split() and set(after.split()) <= set(before.split())


def test_augmentation_keeps_a_leading_shortcut_token_in_front():
    texts, _ = with_shortcut(sentences(300, seed=9), np.zeros(300, dtype=np.int64) + 1, 2, 1.0, seed=0)
    out, _ = augmented(texts, 1.0, seed=1)
    assert all(t.startswith("[CLASS1] ") and t.count("[CLASS1]") == 1 for t in out)


def test_augmentation_is_reproducible_by_seed_and_leaves_stop_word_texts_alone():
    texts = sentences(200, seed=2)
    assert augmented(texts, 0.5, 4)[0] == augmented(texts, 0.5, 4)[0]
    assert augmented(texts, 0.5, 4)[0] != augmented(texts, 0.5, 5)[0]
    out, changed = augmented(["the of and .", "it is", ""], 1.0, 0)
    assert out == ["the of and .", "it is", ""] and not changed.any()
    single, changed = augmented(["wonderful"], 1.0, 0)
    assert single == ["wonderful wonderful"] and changed[0] == 1   # only an insertion can apply
    with pytest.raises(ValueError, match="rate"):
        augmented(texts, 0.0, 0)
