"""Snakemake entry point: each named output is its same-named inputs' tables in one (rules/compare.smk)."""
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.io.tables import read_tables

with tee_to_log(snakemake.log[0]):
    for name, path in snakemake.output.items():
        tables = read_tables(snakemake.input[name])
        write_parquet(path, tables)
        print(f"{path}: {len(tables)} rows from {len(snakemake.input[name])} tables")
