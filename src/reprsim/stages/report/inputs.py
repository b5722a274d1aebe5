"""The report rule's inputs: `ReportInputs`, the paths of each named input (rules/common.smk TARGETS) and the rule's
params."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Paths = tuple[str, ...]
PARAMS = ("title", "task_metrics", "split", "confidence", "measures", "attention_measures", "pages", "grounding_tests")


@dataclass(frozen=True)
class ReportInputs:
    """The report rule's named inputs (rules/common.smk TARGETS), each a tuple of paths, plus its params."""

    title: str = "reprsim report"
    task_metrics: Mapping[str, str] = field(default_factory=dict)
    split: str = ""  # the rows the similarity measures are computed on
    confidence: float = 0.95  # of every interval
    measures: Mapping[str, str] = field(default_factory=dict)  # config label -> measure, in config order
    pages: Mapping[str, str] = field(default_factory=dict)  # page name -> file name, set by build_report
    datasets: Paths = ()
    models: Paths = ()
    stores: Paths = ()
    findings: Paths = ()
    pair_summary: Paths = ()
    pairs: Paths = ()  # results/tables/pairs.parquet: every pair job's rows (each layer's best match)
    model_summary_figures: Paths = ()
    heatmaps: Paths = ()
    model_distances: Paths = ()
    model_distance_figure: Paths = ()
    localization: Paths = ()
    localization_figure: Paths = ()
    truncation_tables: Paths = ()
    truncation_figures: Paths = ()
    skip_tables: Paths = ()
    skip_figures: Paths = ()
    layer_views: Paths = ()
    layer_blocks: Paths = ()
    layer_view_figures: Paths = ()
    aligner_tables: Paths = ()
    aligner_figures: Paths = ()
    synthetic_tables: Paths = ()
    injection_tables: Paths = ()
    token_tables: Paths = ()
    attention: Paths = ()
    attention_heatmaps: Paths = ()
    attention_head_figures: Paths = ()
    attention_layer_figures: Paths = ()
    stitching: Paths = ()  # results/tables/stitching.parquet (all stitch jobs)
    stitching_replicates: Paths = ()  # results/tables/stitching_resamples.parquet (the asymmetry's intervals)
    stitch_figures: Paths = ()  # per unordered model pair: penalties both ways
    stitching_figures: Paths = ()  # per dataset: identity stitching beside CKA
    attention_measures: Mapping[str, str] = field(default_factory=dict)  # attention label -> measure
    measure_tests: Paths = ()  # results/tables/measure_tests.parquet: which measure to believe
    findings_by_measure: Paths = ()  # every claim under every measure (the findings stage)
    measure_agreement: Paths = ()  # every two measures' rank agreement
    discordance: Paths = ()  # model pairs two measures order oppositely
    measure_agreement_figure: Paths = ()
    grounding_tests: tuple[str, ...] = ()  # the tests grounding.tests asked for
    universality: Paths = ()  # results/tables/universality.parquet: each factor level's share u per measure and depth
    universality_statement: Paths = ()  # the study's sentences
    universality_senses: Paths = ()  # the same per sense of similarity (factor level × sense × third)
    universality_controls: Paths = ()  # each artefact control's verdicts beside its twin's
    universality_convergence: Paths = ()  # cross-seed similarity over training and its claims (two tables)
    universality_figure: Paths = ()  # the factor × depth matrix of verdicts per measure
    senses_figure: Paths = ()  # the factor × sense matrix
    convergence_figure: Paths = ()  # cross-seed similarity against the training step

    @classmethod
    def from_named(cls, inputs: Mapping[str, str | Iterable[str]], title: str,
                   task_metrics: Mapping[str, str] | None = None, **params) -> ReportInputs:
        """From named inputs as the rule passes them: a single path or a list of paths per name."""
        known = {f.name for f in dataclasses.fields(cls)} - set(PARAMS)
        unknown = sorted(set(inputs) - known)
        if unknown:
            raise ValueError(f"the report has no section for input(s) {unknown}; add a field to "
                             f"reprsim.stages.report.inputs.ReportInputs and a section to a page of "
                             f"reprsim.stages.report.pages (it knows {sorted(known)})")
        paths = {name: (str(value),) if isinstance(value, (str, os.PathLike)) else tuple(map(str, value))
                 for name, value in inputs.items()}
        return cls(title=title, task_metrics=dict(task_metrics or {}), **params, **paths)
