"""Snakemake entry point: one model's terms for every pair job it is in (rules/compare.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.metrics import memory
from reprsim.stages.compare.terms import model_terms

# as in compare_pair: where the job computes changes no value, so the device is read from the config
similarity = snakemake.config["similarity"]

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    with memory.budget(similarity.get("max_memory_gb")):
        model_terms(
            snakemake.input.store,
            snakemake.output.terms,
            representation=snakemake.wildcards.representation,
            split=snakemake.params.split,
            measures=json.loads(snakemake.params.measures),
            intervals=json.loads(snakemake.params.intervals),
            words=json.loads(snakemake.params.words),
            device=similarity.get("device", "cpu"),
        )
