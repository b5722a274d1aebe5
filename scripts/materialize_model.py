"""Snakemake entry point: materialise one model (rules/models.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.stages.models.materialize import materialize_model

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    materialize_model(
        snakemake.wildcards.model,
        json.loads(snakemake.params.spec),
        snakemake.output.model,
        tokenizer_dir=snakemake.input.get("tokenizer"),
        dataset_dir=snakemake.input.get("dataset"),
    )
