"""Snakemake entry point: prepare one dataset (rules/data.smk)."""
import json

from reprsim.io.logs import tee_to_log
from reprsim.stages.data.prepare import prepare_dataset

with tee_to_log(snakemake.log[0]):
    prepare_dataset(snakemake.wildcards.dataset, json.loads(snakemake.params.spec), snakemake.output.dataset)
