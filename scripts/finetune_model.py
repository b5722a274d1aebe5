"""Snakemake entry point: fine-tune one model (rules/finetune.smk)."""
import json

import torch

from reprsim.device import resolve_device
from reprsim.finetune import finetune_model
from reprsim.logs import tee_to_log

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    finetune_model(
        snakemake.wildcards.model,
        json.loads(snakemake.params.spec),
        snakemake.input.base,
        snakemake.input.dataset,
        snakemake.output.model,
        device=resolve_device(snakemake.params.device),
    )
