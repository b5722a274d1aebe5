"""Snakemake entry point: every aligner between the layers of two models (rules/align.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.stages.align.layers import align_layers

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    aligners = {label: tuple(spec) for label, spec in json.loads(snakemake.params.aligners).items()}
    table = align_layers(snakemake.input.a, snakemake.input.b, snakemake.wildcards.representation, aligners,
                         json.loads(snakemake.params.splits), layers=snakemake.params.layers, seed=snakemake.params.seed)
    table["dataset"] = snakemake.wildcards.dataset
    table["model_a"], table["model_b"] = snakemake.wildcards.model_a, snakemake.wildcards.model_b
    table.to_parquet(snakemake.output.table, index=False)
