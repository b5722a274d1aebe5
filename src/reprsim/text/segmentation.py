"""Words defined by the data: one segmentation of every example's text into word character spans,
recorded with the prepared dataset (the data stage) and used by every tokenizer (reprsim.text.words).
Pure Python, so that the data stage needs no deep-learning packages."""

from __future__ import annotations

import re

# One word is, in this order of preference:
#   1. a run of word characters (Unicode letters, digits, underscore), with internal apostrophes
#      joining runs: "it's", "don't", "o'clock", "1990's", "n't" are one word each;
#   2. an English clitic standing alone, as Penn-Treebank-style text writes it ("it 's", "we 've"):
#      an apostrophe followed by s, t, d, m, re, ve or ll and a word boundary, case-insensitive;
#   3. a run of other non-space characters (punctuation and symbols): ".", "--", "...", "?!", ")'".
# Whitespace separates words and belongs to none, so every non-space character is in exactly one
# word. Hyphens split ("well-known" -> well - known), as do decimal points and thousands separators
# ("3.5" -> 3 . 5), because WordPiece and byte-level BPE both split there too.
# Why these choices: the map from tokens to words only needs every tokenizer's tokens to stay inside
# one word (a token may split a word, but must not merge two). WordPiece splits at every
# punctuation character and byte-level BPE (GPT-2's pre-tokenizer) at every change between letters,
# digits and other characters, except that it keeps the clitics 's 't 're 've 'm 'll 'd as one
# piece and a run of punctuation ("--", ".\"") as one piece: hence rules 1-3 (splitting "it's" into
# it ' s, or "--" into - -, would give a BPE token spanning two words).
WORD_PATTERN = re.compile(r"\w+(?:['’]\w+)*|['’](?:s|t|d|m|re|ve|ll)\b|[^\w\s]+", re.IGNORECASE)


def segment_words(text: str) -> list[tuple[int, int]]:
    """The words of `text` as character spans ``(start, end)``, in order (rule: ``WORD_PATTERN``)."""
    return [m.span() for m in WORD_PATTERN.finditer(text)]


def segment_pair(text: str, text_pair: str | None = None) -> list[tuple[int, int, int]]:
    """The words of a sentence pair as ``(sequence, start, end)``: the words of `text` (sequence 0),
    then those of `text_pair` (sequence 1), each span into its own text, as tokenizers report offsets
    per sequence. With no `text_pair`, the words of `text` with sequence 0."""
    words = [(0, s, e) for s, e in segment_words(text)]
    if text_pair is not None:
        words += [(1, s, e) for s, e in segment_words(text_pair)]
    return words
