"""Snakemake entry point: model distances from all pair tables (rules/compare.smk)."""
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.io.tables import read_table
from reprsim.stages.compare.distances import model_distance_table

with tee_to_log(snakemake.log[0]):
    table = model_distance_table(read_table(snakemake.input.table), snakemake.params.label,
                                 read_table(snakemake.input.replicates))
    write_parquet(snakemake.output.table, table)
