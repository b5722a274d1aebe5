"""Snakemake entry point: a brought model's activations (source: activations) into its store (rules/extract.smk)."""
import json

from reprsim.io.datasets import read_meta
from reprsim.io.logs import tee_to_log
from reprsim.stages.extract.brought import import_activations

with tee_to_log(snakemake.log[0]):
    settings = json.loads(snakemake.params.settings)
    import_activations(
        settings["splits"],
        snakemake.input.dataset,
        snakemake.output.store,
        model=snakemake.wildcards.model,
        pooling=settings["pooling"],
        splits=settings["order"],
        max_examples=settings["max_examples"],
        chunk_rows=settings["chunk_rows"],
        provenance={"dataset": snakemake.wildcards.dataset,
                    "dataset_hash": read_meta(snakemake.input.dataset)["content_hash"]},
    )
