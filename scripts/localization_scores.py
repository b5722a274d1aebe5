"""Snakemake entry point: localization scores from all pair tables (rules/compare.smk)."""
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.io.tables import read_table
from reprsim.stages.compare.summaries import localization_scores

with tee_to_log(snakemake.log[0]):
    table = localization_scores(read_table(snakemake.input.table), snakemake.params.neuronsim,
                                snakemake.params.svcca)
    write_parquet(snakemake.output.table, table)
