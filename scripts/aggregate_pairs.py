"""Snakemake entry point: all pair tables in one, their replicates in one, and the summary per
model pair (rules/compare.smk)."""
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.io.tables import read_tables
from reprsim.stages.compare.summaries import pair_summary

with tee_to_log(snakemake.log[0]):
    pairs = read_tables(snakemake.input.tables)
    replicates = read_tables(snakemake.input.replicates)
    write_parquet(snakemake.output.replicates, replicates)
    write_parquet(snakemake.output.summary, pair_summary(pairs, replicates))
    write_parquet(snakemake.output.table, pairs)
