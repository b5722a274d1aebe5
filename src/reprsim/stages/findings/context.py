"""What the claims read: the tables a configuration produced, and the settings they need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping

import pandas as pd


@dataclass(frozen=True)
class Tables:
    """The other stages' tables; None = the configuration does not produce that table."""

    pairs: pd.DataFrame | None = None  # results/tables/pairs.parquet
    replicates: pd.DataFrame | None = None  # results/tables/pair_resamples.parquet
    skip: pd.DataFrame | None = None  # every fine-tuned model's skip.parquet, concatenated
    truncation: pd.DataFrame | None = None  # every fine-tuned model's truncation.parquet
    layer_blocks: pd.DataFrame | None = None  # every fine-tuned model's layer_blocks.parquet
    aligners: pd.DataFrame | None = None  # every aligned pair's table (results/align/...)
    aligner_rows: pd.DataFrame | None = None  # their per-example errors (paths.ALIGNER_ROWS)
    attention: pd.DataFrame | None = None  # results/tables/attention.parquet (pair-table format)
    attention_replicates: pd.DataFrame | None = None  # results/tables/attention_resamples.parquet
    stitching: pd.DataFrame | None = None  # results/tables/stitching.parquet (every stitch job)
    stitching_replicates: pd.DataFrame | None = None  # results/tables/stitching_resamples.parquet


@dataclass(frozen=True)
class Setup:
    """Settings from the config: model specs (after validation), the CKA label the layer claims
    read, the aligner labels (label -> aligner, in config order) and similarity.intervals."""

    models: Mapping[str, Mapping]
    measure: str | None = None
    attention_measure: str | None = None  # the distributed attention CKA label of similarity.attention
    aligners: Mapping[str, str] = field(default_factory=dict)
    confidence: float = 0.95
    resamples: int = 100
    seed: int = 0
    # the groups claim's model distance: Brown et al.'s arccos of CKA, or for another measure's similarity-oriented
    # series the negated mean over matching layers (reprsim.stages.findings.by_measure)
    model_distance: str = "arccos"


def compared_pairs(pairs: pd.DataFrame) -> set[tuple[str, str]]:
    """The (model_a, model_b) pairs a pair table holds (names sorted, as the compare stage writes them);
    a representation may compare fewer pairs than the others (similarity.word.pairs)."""
    return set(zip(pairs["model_a"], pairs["model_b"]))


def pair_blocks(tables: Tables) -> Iterator[tuple[str, str, pd.DataFrame, pd.DataFrame]]:
    """(dataset, representation, pairs, replicates) per dataset and representation of the pair tables."""
    if tables.pairs is None or tables.replicates is None:
        return
    replicates = dict(iter(tables.replicates.groupby(["dataset", "representation"])))
    for (dataset, representation), pairs in tables.pairs.groupby(["dataset", "representation"]):
        if (dataset, representation) not in replicates:
            raise ValueError(f"pair_resamples.parquet has no replicates for {dataset}/{representation}; "
                             "rerun aggregate_pairs")
        yield dataset, representation, pairs, replicates[(dataset, representation)]
