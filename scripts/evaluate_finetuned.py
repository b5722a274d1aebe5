"""Snakemake entry point: evaluate one fine-tuned model, truncated or with blocks skipped (rules/finetune.smk)."""
import torch

from reprsim.device import resolve_device
from reprsim.finetune import skip_spans, untuned_truncation
from reprsim.logs import tee_to_log

EVALUATIONS = {"truncation": untuned_truncation, "skip": skip_spans}

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    table = EVALUATIONS[snakemake.params.kind](
        snakemake.input.model,
        snakemake.input.dataset,
        split=snakemake.params.split,
        batch_size=snakemake.params.batch_size,
        device=resolve_device(snakemake.params.device),
    )
    table.to_parquet(snakemake.output.table, index=False)
