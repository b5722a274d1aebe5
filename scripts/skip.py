"""Snakemake entry point: one fine-tuned model with spans of blocks skipped (rules/finetune.smk)."""
import torch

from reprsim.io.device import resolve_device
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.finetune.skip import skip_spans

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    table = skip_spans(snakemake.input.model, snakemake.input.dataset, split=snakemake.params.split,
                       batch_size=snakemake.params.batch_size, device=resolve_device(snakemake.params.device))
    write_parquet(snakemake.output.table, table)
