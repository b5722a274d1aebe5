"""Snakemake entry point: one figure from one table (rules/report.smk)."""
import pandas as pd

from reprsim import plots
from reprsim.logs import tee_to_log

with tee_to_log(snakemake.log[0]):
    table = pd.read_parquet(snakemake.input.table)
    kind = snakemake.params.kind
    if kind == "heatmap":
        plots.similarity_heatmap(table, "linear_cka", snakemake.output.figure)
    elif kind == "truncation":
        plots.truncation_curve(table, snakemake.output.figure)
    elif kind == "alignment":
        plots.alignment_curves(table, snakemake.output.figure)
    else:
        raise ValueError(f"unknown figure kind {kind!r}")
