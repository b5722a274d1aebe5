"""Snakemake entry point: CLS-token CKA views between layers of one fine-tuned model, from its views' pair
tables, and their block structure (rules/finetune.smk)."""
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.finetune.layer_views import layer_views

with tee_to_log(snakemake.log[0]):
    table, blocks = layer_views(snakemake.wildcards.model, list(snakemake.input.tables),
                                list(snakemake.input.replicates), snakemake.params.base,
                                list(snakemake.params.siblings), snakemake.params.label, snakemake.params.confidence)
    write_parquet(snakemake.output.table, table)
    write_parquet(snakemake.output.blocks, blocks)
