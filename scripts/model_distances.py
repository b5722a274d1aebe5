"""Snakemake entry point: model distances from all pair tables (rules/compare.smk)."""
import pandas as pd

from reprsim.io.logs import tee_to_log
from reprsim.stages.compare.distances import model_distance_table

with tee_to_log(snakemake.log[0]):
    table = model_distance_table(pd.read_parquet(snakemake.input.table), snakemake.params.label,
                                 pd.read_parquet(snakemake.input.replicates))
    table.to_parquet(snakemake.output.table, index=False)
