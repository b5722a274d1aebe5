"""Perturbations of a training set that make model groups "by design" (ReSi's tests 3-5; grounding B.3-B.5).

Pure, seeded functions of texts and labels (numpy only): the same inputs and seed give the same outputs,
always. The fine-tuning stage applies them to a train split (models.NAME.label_noise, .shortcut, .augment),
the data stage applies the shortcut to every split of a prepared dataset (datasets.NAME.shortcut); both
import them from here, since a stage never imports another.

- :func:`noisy_labels`: label randomisation ("memorisation", ReSi's MemorizableLabelAdder): a seeded
  fraction of the rows get a label drawn uniformly from `new_classes` class ids appended after the real
  ones (SST-2 becomes 7-way with 5), or, with new_classes 0, another real label.
- :func:`with_shortcut`: shortcut affinity (ReSi's ShortcutAdder): every text gets the token
  ``[CLASSc] `` in front; c is the true label with probability `rate`, else one of the other labels
  drawn uniformly.
- :func:`augmented`: EDA-style augmentation (ReSi: TextAttack's EasyDataAugmenter), the augmented text
  replacing the original.
"""

from __future__ import annotations

import re
import string

import numpy as np

# The common English function words; augmentation never deletes, moves or copies them (TextAttack's
# StopwordModification constraint protects stop words alike). Compared lower-cased, with punctuation at
# the ends stripped ("The" and "the," are stop words; the fragments of SST-2's split contractions,
# "'s" -> "s" and "n't", are listed).
STOP_WORDS = frozenset("""
a an the and or but if then so than as of to in on at by for from with about into up out
is are was were be been do does did has have had it its it's this that these those there
he she they we you i me him her them us my your his their our who which what when where why how
not no n't s
""".split())

SHORTCUT_PATTERN = re.compile(r"\[CLASS(\d+)\]")
_PUNCTUATION = string.punctuation


def shortcut_token(c: int) -> str:
    """The special token of class `c`: ``[CLASSc]``."""
    return f"[CLASS{int(c)}]"


def shortcut_tokens(n_labels: int) -> list[str]:
    """The shortcut tokens of classes 0..n_labels-1, in class order."""
    return [shortcut_token(c) for c in range(int(n_labels))]


def majority_share(labels: np.ndarray) -> float:
    """The share of the most frequent label (ReSi's "naive" rate, the lowest shortcut rate it trains)."""
    labels = np.asarray(labels, dtype=np.int64)
    if labels.size == 0:
        raise ValueError("majority_share: no labels")
    return float(np.bincount(labels).max() / labels.size)


def shortcut_rate(rate: float | str, labels: np.ndarray) -> float:
    """`rate` as a number: "majority" is the majority share of `labels` (pass the train split's)."""
    if rate == "majority":
        return majority_share(labels)
    if isinstance(rate, str):
        raise ValueError(f"shortcut rate must be a number in [0, 1] or 'majority'; got {rate!r}")
    return float(rate)


def _checked_labels(labels: np.ndarray, n_labels: int, what: str) -> np.ndarray:
    labels = np.asarray(labels, dtype=np.int64)
    if labels.ndim != 1:
        raise ValueError(f"{what}: labels must be one-dimensional; got shape {labels.shape}")
    if n_labels < 1 or (labels.size and (labels.min() < 0 or labels.max() >= n_labels)):
        raise ValueError(f"{what}: labels must lie in [0, {n_labels}); got [{labels.min()}, {labels.max()}]")
    return labels


def _other_labels(rng: np.random.Generator, labels: np.ndarray, n_labels: int) -> np.ndarray:
    """For every label, one of the n_labels - 1 other labels, uniformly."""
    drawn = rng.integers(0, n_labels - 1, size=labels.size)
    return drawn + (drawn >= labels)


def noisy_labels(labels: np.ndarray, n_labels: int, fraction: float, new_classes: int, seed: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """ReSi's label randomisation: exactly round(fraction * n) rows, drawn without replacement with
    np.random.default_rng(seed), get a new label.

    With new_classes > 0 the new label is drawn uniformly from the new class ids n_labels ..
    n_labels + new_classes - 1 (appended after the real ones, so a classifier needs n_labels + new_classes
    outputs); with new_classes 0 it is drawn uniformly from the other real labels. Every chosen row changes.

    Returns (new labels, boolean mask of the changed rows).
    """
    labels = _checked_labels(labels, n_labels, "noisy_labels")
    if not 0 <= fraction <= 1:
        raise ValueError(f"noisy_labels: fraction must lie in [0, 1]; got {fraction}")
    if new_classes < 0:
        raise ValueError(f"noisy_labels: new_classes must be ≥ 0; got {new_classes}")
    changed = round(fraction * labels.size)
    if changed and new_classes == 0 and n_labels < 2:
        raise ValueError("noisy_labels: new_classes 0 draws another real label, but there is only one label")
    rng = np.random.default_rng(seed)
    rows = rng.choice(labels.size, size=changed, replace=False)
    new = labels.copy()
    if new_classes:
        new[rows] = n_labels + rng.integers(0, new_classes, size=changed)
    else:
        new[rows] = _other_labels(rng, labels[rows], n_labels)
    mask = np.zeros(labels.size, dtype=bool)
    mask[rows] = True
    return new, mask


def with_shortcut(texts: list[str], labels: np.ndarray, n_labels: int, rate: float, seed: int
                  ) -> tuple[list[str], np.ndarray]:
    """ReSi's shortcut: ``[CLASSc] `` prepended to every text (for a pair, pass the first texts only).

    Per row, with probability `rate` c is the true label, else one of the other labels drawn uniformly
    (np.random.default_rng(seed), one pass over the rows in order). rate 1: always the true label;
    rate 0: never. Returns (texts, the c of every row).
    """
    labels = _checked_labels(labels, n_labels, "with_shortcut")
    if len(texts) != labels.size:
        raise ValueError(f"with_shortcut: {len(texts)} texts but {labels.size} labels")
    if not 0 <= rate <= 1:
        raise ValueError(f"with_shortcut: rate must lie in [0, 1]; got {rate}")
    if n_labels < 2:
        raise ValueError("with_shortcut: a shortcut needs at least two labels")
    rng = np.random.default_rng(seed)
    correct = rng.random(labels.size) < rate
    tokens = np.where(correct, labels, _other_labels(rng, labels, n_labels))
    return [f"{shortcut_token(c)} {text}" for c, text in zip(tokens, texts)], tokens


def _protected(word: str) -> bool:
    """A stop word, a word of punctuation only, or a shortcut token: augmentation leaves it in place."""
    core = word.lower().strip(_PUNCTUATION)
    return not core or core in STOP_WORDS or SHORTCUT_PATTERN.fullmatch(word) is not None


def _augment_words(words: list[str], rate: float, rng: np.random.Generator) -> tuple[list[str], int]:
    content = [i for i, word in enumerate(words) if not _protected(word)]
    if not content:
        return words, 0
    n_change = max(1, round(rate * len(content)))
    operations = ["delete"] * (len(words) > 1) + ["swap"] * (len(content) > 1) + ["insert"]
    operation = operations[rng.integers(len(operations))]
    if operation == "delete":   # content words only; at least one word stays
        m = min(n_change, len(content), len(words) - 1)
        gone = set(rng.choice(content, size=m, replace=False).tolist())
        return [word for i, word in enumerate(words) if i not in gone], m
    if operation == "swap":     # m content words rotated among their places (m = 2: a swap)
        m = min(max(2, n_change), len(content))
        places = rng.choice(content, size=m, replace=False)
        out = list(words)
        for i in range(m):
            out[places[(i + 1) % m]] = words[places[i]]
        return out, m
    out = list(words)           # insert: copies of content words at random places
    for _ in range(n_change):
        copy = words[content[rng.integers(len(content))]]
        out.insert(int(rng.integers(len(out) + 1)), copy)
    return out, n_change


def augmented(texts: list[str], rate: float, seed: int) -> tuple[list[str], np.ndarray]:
    """EDA-style augmentation (Wei & Zou 2019; ReSi uses TextAttack's EasyDataAugmenter with
    pct_words_to_swap = rate and one transformation per example): each text gets ONE operation, drawn
    uniformly (np.random.default_rng(seed), one pass over the texts in order) from those that can change it:

    - random deletion of content words (at least one word of the text stays);
    - random swap: content words exchange places (m words rotated among their m places; m = 2 is a swap);
    - random insertion of copies of content words of the same text at random places.

    Words are the text's whitespace-separated pieces; content words are those that are not stop words
    (:data:`STOP_WORDS`), punctuation or a shortcut token. The number of words changed (deleted, moved,
    inserted) is max(1, round(rate * content words)); a swap moves at least 2. Stop words, punctuation and
    a leading shortcut token are never deleted, moved or copied (a leading ``[CLASSc]`` stays in front).
    The augmented text replaces the original; its words are joined by single spaces. A text with no
    content word is left unchanged.

    EDA's synonym replacement and synonym insertion are left out: they need WordNet, which is not
    available offline; insertion copies a word of the same text instead of inserting a synonym.

    Returns (texts, per-row number of words changed).
    """
    if not 0 < rate <= 1:
        raise ValueError(f"augmented: rate must lie in (0, 1]; got {rate}")
    rng = np.random.default_rng(seed)
    out, changed = [], np.zeros(len(texts), dtype=np.int64)
    for row, text in enumerate(texts):
        words = str(text).split()
        prefix = words[:1] if words and SHORTCUT_PATTERN.fullmatch(words[0]) else []
        words, changed[row] = _augment_words(words[len(prefix):], rate, rng)
        out.append(" ".join(prefix + words) if changed[row] else text)
    return out, changed
