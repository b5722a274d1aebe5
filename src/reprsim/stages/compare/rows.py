"""Which rows a comparison rests on: the split's examples, the same in both stores; at word level the words of
sentences drawn once per split (:func:`chosen_words`) that both models reached; and a digest of them, by which a
model's terms store (rule model_terms) is matched to a pair job's rows."""

from __future__ import annotations

import hashlib

import numpy as np

from reprsim.io.store import split_examples, word_rows


def check_same_rows(store_a, store_b, split: str, names: tuple[str, str]) -> None:
    rows = [store["examples/row"][:][split_examples(store, split)] for store in (store_a, store_b)]
    if not np.array_equal(rows[0], rows[1]):
        raise ValueError(
            f"{names[0]} and {names[1]} were extracted on different {split!r} rows "
            f"({len(rows[0])} vs {len(rows[1])}); re-extract both with the same settings"
        )


def chosen_words(store, split: str, max_words: int | None, seed: int) -> np.ndarray:
    """The examples of `split` whose words a word-level comparison uses: whole sentences drawn in a seeded
    order until `max_words` words (all with None), sorted. They depend on the split's word counts and the seed
    only, so every model's rows (and every pair's) come from the same sentences."""
    examples = split_examples(store, split)
    order = np.random.default_rng(seed).permutation(len(examples))
    if max_words is not None:
        counts = store["examples/n_words"][:][examples]
        enough = np.searchsorted(np.cumsum(counts[order]), max_words) + 1
        order = order[:enough]
    return examples[np.sort(order)]


def model_word_rows(store, chosen: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One model's word rows (layers, words, d) of the `chosen` examples, the example each word belongs to, and
    which words a token of this model reached (a word cut off by truncation has NaN rows)."""
    X, owner = word_rows(store, chosen)
    return X, owner, np.isfinite(X).all(axis=(0, 2))


def word_matrices(store_a, store_b, split: str, max_words: int | None, seed: int,
                  names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray, dict, str]:
    """Both stores' word rows (layers, words, d) for the words of `split`: the :func:`chosen_words` sentences,
    then only the words both models reached; the rows' meta and :func:`rows_digest`. The two stores' word lists
    must agree, example by example: they come from the dataset's segmentation, not the tokenizers."""
    examples = split_examples(store_a, split)
    counts = [store["examples/n_words"][:][examples] for store in (store_a, store_b)]
    if not np.array_equal(*counts):
        raise ValueError(f"{names[0]} and {names[1]} record different words for the {split!r} examples; "
                         "were they extracted from the same prepared dataset?")
    chosen = chosen_words(store_a, split, max_words, seed)
    (X, owner, reached_x), (Y, _, reached_y) = model_word_rows(store_a, chosen), model_word_rows(store_b, chosen)
    reached = reached_x & reached_y
    meta = {"sentences": len(chosen), "sentences_in_split": len(examples), "words": int(reached.sum()),
            "words_without_token": int((~reached).sum()), "max_words": max_words, "seed": seed,
            "word_pooling": [store.attrs.get("word_pooling") for store in (store_a, store_b)],
            "sentences_used": int(len(np.unique(owner[reached])))}
    return X[:, reached], Y[:, reached], meta, rows_digest(chosen, reached)


def split_rows_digest(store, split: str) -> str:
    """:func:`rows_digest` of a split's pooled rows by their rows in the dataset split (examples/row), not their
    positions in the store: a store holding other splits before this one (or none, as a brought model's may)
    rests on the same rows when its split rows are the same."""
    return rows_digest(store["examples/row"][:][split_examples(store, split)])


def rows_digest(examples: np.ndarray, reached: np.ndarray | None = None) -> str:
    """What a comparison's rows are, as a digest: the examples (store row positions) and, at word level, which
    of their words are kept. A model's terms store is used by a pair job only when both digests agree."""
    digest = hashlib.sha256(np.ascontiguousarray(examples, dtype=np.int64).tobytes())
    if reached is not None:
        digest.update(np.packbits(np.asarray(reached, dtype=bool)).tobytes())
    return digest.hexdigest()
