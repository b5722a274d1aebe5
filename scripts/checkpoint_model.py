"""Snakemake entry point: copy a pretrained model's checkpoint out as a model of its own (rules/models.smk)."""
import json

from reprsim.io.logs import tee_to_log
from reprsim.stages.models.checkpoints import copy_checkpoint

with tee_to_log(snakemake.log[0]):
    copy_checkpoint(
        snakemake.input.parent,
        snakemake.wildcards.model,
        json.loads(snakemake.params.spec),
        snakemake.output.model,
    )
