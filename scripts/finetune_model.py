"""Snakemake entry point: fine-tune one model (rules/finetune.smk)."""
import json

import torch

from reprsim.io.device import resolve_device
from reprsim.io.logs import tee_to_log
from reprsim.stages.finetune.training import finetune_model

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
