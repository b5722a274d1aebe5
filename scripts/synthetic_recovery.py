"""Snakemake entry point: synthetic recovery of a random invertible map from one model's layers (rules/align.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.align.layers import synthetic_table

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    aligners = {label: tuple(spec) for label, spec in json.loads(snakemake.params.aligners).items()}
    table = synthetic_table(snakemake.input.store, snakemake.params.pooling, list(snakemake.params.layers), aligners,
                            json.loads(snakemake.params.splits), list(snakemake.params.map_seeds))
    table["dataset"], table["model"] = snakemake.wildcards.dataset, snakemake.wildcards.model
    write_parquet(snakemake.output.table, table)
