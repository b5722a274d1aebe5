"""Snakemake entry point: every layer pair of one model pair (rules/compare.smk)."""
import json

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.compare.pairs import compare_pair

with tee_to_log(snakemake.log[0]):
    table, replicates = compare_pair(
        snakemake.input.a,
        snakemake.input.b,
        representation=snakemake.wildcards.representation,
        split=snakemake.params.split,
        measures=json.loads(snakemake.params.measures),
        chance=json.loads(snakemake.params.chance),
        intervals=json.loads(snakemake.params.intervals),
        words=json.loads(snakemake.params.words),
    )
    write_parquet(snakemake.output.replicates, replicates)
    write_parquet(snakemake.output.table, table)
