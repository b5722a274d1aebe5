"""Snakemake entry point: truncation curves of one fine-tuned model (rules/finetune.smk)."""
import json

import torch

from reprsim.io.device import resolve_device
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.finetune.truncation import truncation

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    settings = json.loads(snakemake.params.heads)
    heads = settings if settings.pop("enabled") else None
    table = truncation(snakemake.input.model, snakemake.input.base, snakemake.input.dataset, heads=heads,
                       split=snakemake.params.split, batch_size=snakemake.params.batch_size,
                       device=resolve_device(snakemake.params.device), store=snakemake.input.get("store"),
                       base_store=snakemake.input.get("base_store"))
    write_parquet(snakemake.output.table, table)
