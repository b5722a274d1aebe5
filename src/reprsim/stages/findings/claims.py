"""Every claim, in the order the findings table lists them, and the table of all of them."""

from __future__ import annotations

from typing import Callable

import pandas as pd

from reprsim.stages.findings.accuracy import finetuned_layers_carry_the_task, skip_upper_cheaper
from reprsim.stages.findings.alignment import inn_aligns_better
from reprsim.stages.findings.context import Setup, Tables
from reprsim.stages.findings.groups import groups_closer_within
from reprsim.stages.findings.profiles import (adjacent_layers, finetuning_changes_upper_attention,
                                              finetuning_changes_upper_layers, lower_layers_across_seeds)
from reprsim.stages.findings.stitching import stitching_asymmetric_between_kinds, stitching_penalty_grows_with_depth
from reprsim.stages.findings.table import findings_frame
from reprsim.stages.findings.two_blocks import two_block_structure

CLAIMS: list[Callable[[Tables, Setup], list[dict]]] = [
    adjacent_layers,
    lower_layers_across_seeds,
    finetuning_changes_upper_layers,
    finetuning_changes_upper_attention,
    skip_upper_cheaper,
    inn_aligns_better,
    two_block_structure,
    groups_closer_within,
    finetuned_layers_carry_the_task,
    stitching_penalty_grows_with_depth,
    stitching_asymmetric_between_kinds,
]


def findings(tables: Tables, setup: Setup) -> pd.DataFrame:
    """One row per claim (and per dataset and representation where a claim reads the pair tables)."""
    return findings_frame([row for claim in CLAIMS for row in claim(tables, setup)])
