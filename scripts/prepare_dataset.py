"""Snakemake entry point: prepare one dataset (rules/data.smk)."""
import json

from reprsim.data import prepare_dataset
from reprsim.logs import tee_to_log

with tee_to_log(snakemake.log[0]):
    prepare_dataset(snakemake.wildcards.dataset, json.loads(snakemake.params.spec), snakemake.output.dataset)
