"""Snakemake entry point: every layer pair of the model pairs of one pair of blocks (rules/compare.smk;
reprsim.workflow.pair_blocks), one after the other, each model's terms read once."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.compare.pairs import compare_block

# Where and in how much memory the job computes changes no value (to 1e-6), so these are read from the
# config rather than given as params, which would rerun every pair job when they change.
similarity = snakemake.config["similarity"]

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    models = list(snakemake.params.models)
    table, replicates = compare_block(
        [tuple(pair) for pair in json.loads(snakemake.params.pairs)],
        dict(zip(models, snakemake.input.stores)),
        dict(zip(models, snakemake.input.terms)),
        representation=snakemake.wildcards.representation,
        split=snakemake.params.split,
        measures=json.loads(snakemake.params.measures),
        chance=json.loads(snakemake.params.chance),
        intervals=json.loads(snakemake.params.intervals),
        words=json.loads(snakemake.params.words),
        device=similarity.get("device", "cpu"),
        max_memory_gb=similarity.get("max_memory_gb"),
    )
    write_parquet(snakemake.output.replicates, replicates)
    write_parquet(snakemake.output.table, table)
