"""Snakemake entry point: every measure's grounding scores in one table, ranked per test (rules/grounding.smk)."""
import pandas as pd

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.grounding.scores import ranked

with tee_to_log(snakemake.log[0]):
    table = ranked(pd.concat([pd.read_parquet(path) for path in snakemake.input.parts], ignore_index=True))
    write_parquet(snakemake.output.table, table)
