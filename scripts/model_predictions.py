"""Snakemake entry point: a fine-tuned model's outputs on the compared rows (rules/grounding.smk)."""
import torch

from reprsim.io.device import resolve_device
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.grounding.predictions import model_predictions

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    table = model_predictions(snakemake.input.model, snakemake.input.dataset, snakemake.params.split,
                              snakemake.params.max_examples, 64, resolve_device(snakemake.params.device),
                              store=snakemake.input.store)
    write_parquet(snakemake.output.table, table)
