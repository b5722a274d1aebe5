"""Snakemake entry point: one study model's competence on the shared yardstick, a linear probe of the dataset's
labels on every layer, nested-cross-validated on the compared rows (rules/universality.smk)."""
import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.grounding.competence import competence_table

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    table = competence_table(snakemake.input.store, snakemake.input.dataset,
                             representation=snakemake.params.representation, split=snakemake.params.split,
                             confidence=float(snakemake.params.confidence), seed=int(snakemake.params.seed))
    write_parquet(snakemake.output.table, table)
