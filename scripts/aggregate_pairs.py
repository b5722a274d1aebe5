"""Snakemake entry point: all pair tables in one, their replicates in one, and the summary per
model pair (rules/compare.smk)."""
import pandas as pd

from reprsim.io.logs import tee_to_log
from reprsim.stages.compare.summaries import pair_summary

with tee_to_log(snakemake.log[0]):
    pairs = pd.concat([pd.read_parquet(path) for path in snakemake.input.tables], ignore_index=True)
    replicates = pd.concat([pd.read_parquet(path) for path in snakemake.input.replicates], ignore_index=True)
    replicates.to_parquet(snakemake.output.replicates, index=False)
    pair_summary(pairs, replicates).to_parquet(snakemake.output.summary, index=False)
    pairs.to_parquet(snakemake.output.table, index=False)
