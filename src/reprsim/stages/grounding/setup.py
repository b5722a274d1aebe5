"""What a grounding job reads (stores, specs, predictions, probes, pair tables) and how it tests: one dataclass shared by the
measure tests and the probes, so that the probes' jobs import no measure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

TESTS = ("monotonicity", "deletion", "layer", "prediction", "groups", "seeds", "specificity")


@dataclass
class Setup:
    """What one measure-tests job reads: the models' activation stores, their config specs, predictions of the
    fine-tuned ones, the dataset (labels for the probe), and the pair tables that hold the measure's values
    (sorted model pair -> (table, replicates): reprsim.stages.grounding.pair_tables)."""
    stores: Mapping[str, str | Path]
    specs: Mapping[str, Mapping]
    dataset_dir: str | Path
    representation: str = "mean"
    split: str = "test"
    train_split: str = "train"
    predictions: Mapping[str, str | Path] = field(default_factory=dict)
    probes: Mapping[str, str | Path] = field(default_factory=dict)  # model -> its deletion probes (probe_table)
    shortcut_stores: Mapping[str, str | Path] = field(default_factory=dict)
    pair_tables: Mapping[tuple[str, str], tuple[str | Path, str | Path]] = field(default_factory=dict)
    shortcut_pair_tables: Mapping[tuple[str, str], tuple[str | Path, str | Path]] = field(default_factory=dict)
    monotonicity_models: list[str] | None = None
    deletion_models: list[str] | None = None
    deletion_layers: list[int | str] = field(default_factory=lambda: ["last"])
    prediction_models: list[str] | None = None  # None: the largest family of seed siblings with predictions
    all_recipes: bool = True  # the prediction test over every model with predictions too (descriptive)
    min_items: int = 10  # fewer items (pairs, layers, deletion rows): "too few items", no ranking
    null_draws: int = 999  # draws of each item-level null (every permutation where there are fewer)
    probe_gap: float = 0.02  # a deletion cell whose undeleted probe is further below the model's head is left out
    tests: tuple[str, ...] = TESTS
    resamples: int = 20
    confidence: float = 0.95
    seed: int = 0
    probe: Mapping = field(default_factory=dict)
