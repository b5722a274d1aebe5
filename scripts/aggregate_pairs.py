"""Snakemake entry point: all pair tables in one (rules/report.smk)."""
import pandas as pd

from reprsim.logs import tee_to_log

with tee_to_log(snakemake.log[0]):
    tables = [pd.read_parquet(path) for path in snakemake.input.tables]
    pd.concat(tables, ignore_index=True).to_parquet(snakemake.output.table, index=False)
