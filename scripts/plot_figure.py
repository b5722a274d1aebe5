"""Snakemake entry point: one figure of the registry from the rule's tables (rules/report.smk)."""
from reprsim.io.logs import tee_to_log
from reprsim.io.tables import read_table
from reprsim.stages.report.figures import draw

with tee_to_log(snakemake.log[0]):
    tables = {name: read_table(path) for name, path in snakemake.input.items() if name != "code"}
    draw(snakemake.params.figure, tables, snakemake.output.figure, **snakemake.params.options)
