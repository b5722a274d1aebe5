"""Snakemake entry point: one split's pooled rows of a store as a brought model's file (rules/extract.smk)."""
from reprsim.io.logs import tee_to_log
from reprsim.stages.extract.brought import export_activations

with tee_to_log(snakemake.log[0]):
    written = export_activations(snakemake.input.store, snakemake.output.file, split=snakemake.wildcards.split,
                                 pooling=snakemake.wildcards.pooling, format=snakemake.wildcards.format)
    print(f"{snakemake.wildcards.model} ({snakemake.wildcards.split}, {snakemake.wildcards.pooling}) -> {written}")
