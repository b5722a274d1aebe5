"""Snakemake entry point: CLS-token CKA views between layers of one fine-tuned model, and their
block structure (rules/finetune.smk)."""
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.finetune.layer_views import block_summary, layer_views

with tee_to_log(snakemake.log[0]):
    model = snakemake.wildcards.model
    names = [model, snakemake.params.base, *snakemake.params.siblings]
    table = layer_views(model, {name: snakemake.input[name] for name in names}, snakemake.params.base,
                        list(snakemake.params.siblings), snakemake.params.split)
    write_parquet(snakemake.output.table, table)
    write_parquet(snakemake.output.blocks, block_summary(table))
