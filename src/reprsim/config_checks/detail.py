"""Word rows and attention maps: the splits extraction stores them for, and what the jobs that read them need."""

from __future__ import annotations

from collections.abc import Iterator


def detail_splits(extraction: dict, similarity: dict) -> list[str]:
    """extraction.detail_splits, where null means the compared split (similarity.split, if extracted) when
    something reads word rows or attention maps (word in similarity.representations, similarity.attention,
    extraction.attention), else none: word rows take several times the pooled arrays' space."""
    chosen = extraction.get("detail_splits")
    if chosen is not None:
        return list(chosen)
    split = similarity.get("split")
    wanted = ("word" in similarity.get("representations", []) or bool(similarity.get("attention"))
              or bool(extraction.get("attention")))
    return [split] if wanted and split in extraction.get("splits", []) else []


def _detail_errors(config: dict, models: dict, measures: dict) -> Iterator[str]:
    """Word-level and attention pair jobs read what extraction stores for its detail splits."""
    extraction, similarity = config.get("extraction", {}), config.get("similarity", {})
    split = similarity.get("split")
    detail = detail_splits(extraction, similarity)
    for name in detail:
        if name not in extraction.get("splits", []):
            yield (f"key 'extraction.detail_splits' names {name!r}, which extraction.splits = "
                   f"{extraction.get('splits')} does not extract; add it there")
    attention = similarity.get("attention")
    users = (["similarity.representations: word"] if "word" in similarity.get("representations", []) else []) + (
        ["similarity.attention"] if attention else [])
    for user in users:
        if split not in detail:
            yield (f"{user} compares words of similarity.split = {split!r}, but extraction.detail_splits = "
                   f"{detail} stores words only for those splits; add {split!r} there")
    for label in similarity.get("word", {}).get("measures") or []:
        if label not in measures:
            yield (f"key 'similarity.word.measures' names {label!r}, which is not a measure in this config; "
                   f"defined measures: {', '.join(sorted(measures))}")
    if attention and not extraction.get("attention"):
        yield "similarity.attention compares attention maps, which extraction.attention: true stores; set it"
    named = [("similarity.attention.pairs", pair) for pair in (attention or {}).get("pairs") or []]
    named += [("similarity.word.pairs", pair) for pair in similarity.get("word", {}).get("pairs") or []]
    named += [("similarity.pairs", pair) for pair in similarity.get("pairs") or []]
    for key, pair in named:
        for name in pair:
            if name not in models:
                yield (f"key '{key}' names {name!r}, which is not a model in this config; "
                       f"defined models: {', '.join(sorted(models))}")
