"""Snakemake entry point: every layer pair of one model pair (rules/compare.smk)."""
import json

from reprsim.compare import compare_pair
from reprsim.logs import tee_to_log

with tee_to_log(snakemake.log[0]):
    table = compare_pair(
        snakemake.input.a,
        snakemake.input.b,
        representation=snakemake.wildcards.representation,
        split=snakemake.params.split,
        measures=json.loads(snakemake.params.measures),
        alignment=json.loads(snakemake.params.alignment),
    )
    table.to_parquet(snakemake.output.table, index=False)
