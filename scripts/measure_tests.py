"""Snakemake entry point: one measure's scores on the grounding tests (rules/grounding.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.grounding.measure_tests import measure_tests
from reprsim.stages.grounding.setup import Setup

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    params = snakemake.params
    settings = json.loads(params.setup)
    setup = Setup(stores=dict(zip(params.models, snakemake.input.stores)),
                  shortcut_stores=dict(zip(params.shortcut_models, snakemake.input.shortcut_stores)),
                  predictions=dict(zip(params.predicted, snakemake.input.predictions)),
                  probes=dict(zip(params.deleted, snakemake.input.probes)),
                  dataset_dir=snakemake.input.dataset, **settings)
    table = measure_tests(snakemake.wildcards.label, json.loads(params.spec), setup)
    print(table[["test", "variant", "score", "ci_low", "ci_high", "chance"]].to_string(index=False), flush=True)
    write_parquet(snakemake.output.table, table)
