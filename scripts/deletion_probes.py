"""Snakemake entry point: the deletion and layer tests' linear probes of one model, once for every measure
(rules/grounding.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.grounding.setup import Setup
from reprsim.stages.grounding.probes import probe_table

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    model = snakemake.wildcards.model
    setup = Setup(stores={model: snakemake.input.store}, specs={}, dataset_dir=snakemake.input.dataset,
                  **json.loads(snakemake.params.setup))
    table = probe_table(setup, model, deleted=bool(snakemake.params.deleted))
    accuracy = table.groupby(["layer", "k"])["correct"].mean()
    print(f"{model}: probe accuracy per layer and deleted components\n{accuracy.to_string()}", flush=True)
    write_parquet(snakemake.output.table, table)
