"""Snakemake entry point: pretrain one language model (causal or masked) from scratch (rules/models.smk)."""
import json

import torch

from reprsim.io.device import resolve_device
from reprsim.io.logs import tee_to_log
from reprsim.stages.models.pretrain import pretrain_model

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    pretrain_model(
        snakemake.wildcards.model,
        json.loads(snakemake.params.spec),
        snakemake.input.dataset,
        snakemake.output.model,
        device=resolve_device(snakemake.params.device),
        tokenizer_dir=snakemake.input.get("tokenizer"),
        tokenizer_dataset_dir=snakemake.input.get("tokenizer_dataset"),
    )
