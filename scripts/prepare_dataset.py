"""Snakemake entry point: prepare one dataset (rules/data.smk)."""
import json
import sys

from reprsim.io.logs import tee_to_log
from reprsim.stages.data.prepare import prepare_dataset
from reprsim.stages.data.validate import DatasetError

try:
    with tee_to_log(snakemake.log[0]):   # the log keeps the whole traceback
        prepare_dataset(snakemake.wildcards.dataset, json.loads(snakemake.params.spec), snakemake.output.dataset)
except DatasetError as error:
    sys.exit(f"prepare_dataset: {error}")   # bad input: the message alone is what the user needs to read
