"""Snakemake entry point: every attention layer pair of one model pair (rules/compare.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.compare.attention import compare_attention

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    settings = json.loads(snakemake.params.settings)
    intervals = json.loads(snakemake.params.intervals)
    table, replicates, heads = compare_attention(
        snakemake.input.a,
        snakemake.input.b,
        split=snakemake.params.split,
        level=settings["level"],
        measures=settings["measures"],
        max_examples=settings["max_examples"],
        permutations=settings["permutations"],
        resamples=intervals["resamples"],
        confidence=intervals["confidence"],
        seed=snakemake.params.seed,
        detail_layers=settings["detail_layers"],
    )
    write_parquet(snakemake.output.heads, heads)
    write_parquet(snakemake.output.replicates, replicates)
    write_parquet(snakemake.output.table, table)
