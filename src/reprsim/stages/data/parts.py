"""Disjoint parts of a train split (datasets.NAME.part): the data factor of a universality study.

Models pretrained or fine-tuned on different parts of one dataset saw no common text, yet are scored and
compared on the same held-out rows: only train is divided, validation and test stay whole.

A row goes to a part by a seeded hash of its text, never by its position, so that a text repeated in the
file (or a reordered file) cannot land in two parts. Rows are first grouped so that no text is in two
groups: a group is every row connected through a shared text, where a text is either side of a pair, stripped
of surrounding whitespace (for single-sentence tasks a group is one distinct text). The groups are ranked by
a seeded hash of their smallest text and the ranking is cut into `of` contiguous blocks of near-equal rows:
a part's row count differs from train's rows / of by less than one group's rows.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd

from reprsim.stages.data.validate import DatasetError, Origin, count


def part_errors(key: str, spec: dict) -> list[str]:
    """What the schema cannot say about a dataset spec's part (`key`: datasets.NAME): index below of,
    and no shortcut, whose one seeded pass starts on train (add_shortcut), so the held-out splits' tokens, and
    with `rate: majority` the rate, would differ between parts."""
    part = spec.get("part")
    if not part:
        return []
    of, index, problems = part.get("of"), part.get("index"), []
    if isinstance(of, int) and isinstance(index, int) and not 0 <= index < of:
        problems.append(f"key '{key}.part.index' is {index}; must be below {key}.part.of = {of} "
                        f"(parts are numbered 0 to {of - 1})")
    if spec.get("shortcut"):
        problems.append(f"key '{key}.part' cannot be combined with {key}.shortcut: the shortcut's tokens "
                        "are drawn in one pass that starts on train, so each part would get other validation and "
                        "test texts; leave one of them out")
    return problems


def check_part(name: str, spec: dict) -> None:
    """Refuse an impossible part before any file is read."""
    problems = part_errors(f"datasets.{name}", spec)
    if problems:
        raise DatasetError(f"dataset {name!r}: {'; '.join(problems)}")


def _normalised(value: Any) -> str | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return str(value).strip()


def _groups(texts: list[str], pairs: list[str | None]) -> list[str]:
    """Each row's group, named by its smallest text: rows sharing a text (either side of a pair) are one group
    (union-find over texts; the smaller root wins a union, so the name does not depend on row order)."""
    parent: dict[str, str] = {}

    def root(text: str) -> str:
        parent.setdefault(text, text)
        while parent[text] != text:
            parent[text] = parent[parent[text]]
            text = parent[text]
        return text

    for text, pair in zip(texts, pairs):
        if pair is not None:
            a, b = root(text), root(pair)
            parent[max(a, b)] = min(a, b)
    return [root(text) for text in texts]


def part_rows(frame: pd.DataFrame, of: int, index: int, seed: int) -> np.ndarray:
    """Positions (ascending) of the rows of `frame` (columns text, text_pair) in part `index` of `of`."""
    texts = [_normalised(t) or "" for t in frame["text"]]
    pairs = [_normalised(p) for p in frame["text_pair"]] if "text_pair" in frame else [None] * len(frame)
    names, group = np.unique(np.asarray(_groups(texts, pairs), dtype=object), return_inverse=True)
    if len(names) == 0:
        return np.arange(0)
    hashes = [hashlib.sha256(f"{seed}\0{name}".encode()).digest() for name in names]
    order = sorted(range(len(names)), key=lambda g: (hashes[g], names[g]))
    rows = np.bincount(group, minlength=len(names))
    # a group goes to the part its first row falls in when the ranked rows are cut into `of` equal spans
    before = np.concatenate([[0], np.cumsum(rows[order])[:-1]])
    assigned = np.empty(len(names), dtype=np.int64)
    assigned[order] = np.minimum(before * of // len(group), of - 1)
    return np.flatnonzero(assigned[group] == index)


def take_part(train: pd.DataFrame, part: dict, origin: Origin) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Part `part["index"]` of `part["of"]` of the train split, in its original row order, and meta's record."""
    of, index, seed = int(part["of"]), int(part["index"]), int(part.get("seed", 0))
    kept = train.iloc[part_rows(train, of, index, seed)]
    if kept.empty:   # more parts than groups of texts
        raise DatasetError(f"{origin}: part {index} of {of} (datasets.{origin.dataset}.part) has no rows: the "
                           f"{count(len(train), 'row')} of train hold too few distinct texts for {of} parts. Lower "
                           f"datasets.{origin.dataset}.part.of")
    record = {"of": of, "index": index, "seed": seed, "rows_before": len(train), "rows_after": len(kept),
              "split": "train", "assignment": "seeded hash of the stripped texts, groups sharing a text kept whole"}
    return kept, record
