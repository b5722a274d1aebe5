"""Snakemake entry point: layer injection between two fine-tuned models, both directions (rules/align.smk)."""
import json

import pandas as pd
import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.align.injection import layer_injection

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    aligners = {label: tuple(spec) for label, spec in json.loads(snakemake.params.aligners).items()}
    a, b = snakemake.wildcards.model_a, snakemake.wildcards.model_b
    base = snakemake.config["models"][a]["base"]
    stores = {a: snakemake.input.a, b: snakemake.input.b, base: snakemake.input.base}
    directories = {a: snakemake.input.model_a, b: snakemake.input.model_b}
    table = pd.concat([
        layer_injection(stores, source, target, directories[target], base, aligners, json.loads(snakemake.params.splits),
                        seed=snakemake.params.seed)
        for source, target in ((a, b), (b, a))
    ], ignore_index=True)
    table["dataset"] = snakemake.wildcards.dataset
    write_parquet(snakemake.output.table, table)
