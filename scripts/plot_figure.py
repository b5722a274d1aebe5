"""Snakemake entry point: one figure of the registry from the rule's tables (rules/report.smk)."""
import pandas as pd

from reprsim.io.logs import tee_to_log
from reprsim.stages.report.figures import draw

with tee_to_log(snakemake.log[0]):
    tables = {name: pd.read_parquet(path) for name, path in snakemake.input.items() if name != "code"}
    draw(snakemake.params.figure, tables, snakemake.output.figure, **snakemake.params.options)
