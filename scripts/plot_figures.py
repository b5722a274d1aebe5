"""Snakemake entry point: one figure from one table (rules/report.smk)."""
import pandas as pd

from reprsim import aggregate, plots
from reprsim.layer_views import block_summary
from reprsim.logs import tee_to_log

with tee_to_log(snakemake.log[0]):
    table = pd.read_parquet(snakemake.input.table)
    kind = snakemake.params.kind
    if kind == "heatmap":
        plots.pair_heatmaps(table, snakemake.output.figure)
    elif kind == "truncation":
        plots.truncation_curve(table, snakemake.output.figure, snakemake.params.metric)
    elif kind == "skip":
        plots.skip_heatmap(table, snakemake.output.figure, snakemake.params.metric)
    elif kind == "aligners":
        plots.aligner_figure(table, snakemake.output.figure)
    elif kind == "layer_views":
        plots.layer_views_figure(table, block_summary(table), snakemake.output.figure)
    elif kind == "alignment":
        plots.alignment_curves(table, snakemake.output.figure)
    elif kind == "model_distance":
        label = snakemake.params.label
        depths = pd.concat([table[["model_a", "layer_a"]].set_axis(["model", "layer"], axis=1),
                            table[["model_b", "layer_b"]].set_axis(["model", "layer"], axis=1)])
        depths = depths.groupby("model")["layer"].max().to_dict()
        plots.model_distance_figure(aggregate.model_distances(table, label, depths), label, snakemake.output.figure)
    elif kind == "localization":
        scores = aggregate.localization_scores(table, snakemake.params.neuronsim, snakemake.params.svcca)
        scores.to_parquet(snakemake.output.scores, index=False)
        plots.localization_curves(scores, snakemake.output.figure)
    else:
        raise ValueError(f"unknown figure kind {kind!r}")
