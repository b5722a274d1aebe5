"""Snakemake entry point: token-level minibatch CKA of one model pair (rules/compare.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.compare.tokens import token_cka_table

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    tokens = json.loads(snakemake.params.tokens)
    table = token_cka_table(
        snakemake.input.a,
        snakemake.input.b,
        split=snakemake.params.split,
        batch_size=tokens["batch_size"],
        kernel=tokens["kernel"],
        max_tokens=tokens["max_tokens"],
        shifts=tokens["shifts"],
        intervals=json.loads(snakemake.params.intervals),
    )
    print(f"{snakemake.wildcards.model_a} vs {snakemake.wildcards.model_b}: {table['n'].iloc[0]} tokens, "
          f"{len(table)} layer pairs", flush=True)
    write_parquet(snakemake.output.table, table)
