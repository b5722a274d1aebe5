"""Snakemake entry point: evaluate one fine-tuned model, truncated or with blocks skipped (rules/finetune.smk)."""
import torch

from reprsim.device import resolve_device
from reprsim.logs import tee_to_log
from reprsim.truncation import skip_spans, truncation

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    common = dict(split=snakemake.params.split, batch_size=snakemake.params.batch_size,
                  device=resolve_device(snakemake.params.device))
    if snakemake.params.kind == "truncation":
        settings = dict(snakemake.params.heads)
        heads = settings if settings.pop("enabled") else None
        table = truncation(snakemake.input.model, snakemake.input.base, snakemake.input.dataset, heads=heads,
                           **common)
    else:
        table = skip_spans(snakemake.input.model, snakemake.input.dataset, **common)
    table.to_parquet(snakemake.output.table, index=False)
