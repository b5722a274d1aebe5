"""Snakemake entry point: every aligner between the layers of two models, and each held-out example's
error (rules/align.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.align.layers import align_layers

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    aligners = {label: tuple(spec) for label, spec in json.loads(snakemake.params.aligners).items()}
    table, examples = align_layers(snakemake.input.a, snakemake.input.b, snakemake.wildcards.representation,
                                   aligners, json.loads(snakemake.params.splits), layers=snakemake.params.layers,
                                   seed=snakemake.params.seed)
    for frame in (table, examples):
        frame["dataset"] = snakemake.wildcards.dataset
        frame["model_a"], frame["model_b"] = snakemake.wildcards.model_a, snakemake.wildcards.model_b
    write_parquet(snakemake.output.rows, examples)
    write_parquet(snakemake.output.table, table)
