"""Snakemake entry point: every layer pair of one model pair (rules/compare.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.compare.pairs import compare_pair

# Where and in how much memory the job computes changes no value (to 1e-6), so these are read from the
# config rather than given as params, which would rerun every pair job when they change.
similarity = snakemake.config["similarity"]

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    table, replicates = compare_pair(
        snakemake.input.a,
        snakemake.input.b,
        representation=snakemake.wildcards.representation,
        split=snakemake.params.split,
        measures=json.loads(snakemake.params.measures),
        chance=json.loads(snakemake.params.chance),
        intervals=json.loads(snakemake.params.intervals),
        words=json.loads(snakemake.params.words),
        device=similarity.get("device", "cpu"),
        max_memory_gb=similarity.get("max_memory_gb"),
        terms=(snakemake.input.terms_a, snakemake.input.terms_b),
    )
    write_parquet(snakemake.output.replicates, replicates)
    write_parquet(snakemake.output.table, table)
