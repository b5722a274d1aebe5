"""Snakemake entry point: activations of one model on one dataset (rules/extract.smk)."""
import json

import torch

from reprsim.io.datasets import read_meta
from reprsim.io.device import resolve_device
from reprsim.io.logs import tee_to_log
from reprsim.stages.extract.activations import extract_activations

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    settings = json.loads(snakemake.params.settings)
    extract_activations(
        snakemake.input.model,
        snakemake.input.dataset,
        snakemake.output.store,
        splits=settings["splits"],
        max_examples=settings["max_examples"],
        batch_size=settings["batch_size"],
        max_length=settings["max_length"],
        dtype=settings["dtype"],
        poolings=settings["poolings"],
        tokens=settings["tokens"],
        chunk_rows=settings["chunk_rows"],
        chunk_tokens=settings["chunk_tokens"],
        detail_splits=settings["detail_splits"],
        word_pooling=settings["word_pooling"],
        attention=settings["attention"],
        attention_dtype=settings["attention_dtype"],
        attention_max_gb=settings["attention_max_gb"],
        sort_window=settings["sort_window"],
        sort_window_mb=settings["sort_window_mb"],
        autocast=settings["autocast"],
        device=resolve_device(snakemake.params.device),
        provenance={
            "model": snakemake.wildcards.model,
            "dataset": snakemake.wildcards.dataset,
            "model_hash": read_meta(snakemake.input.model)["content_hash"],
            "dataset_hash": read_meta(snakemake.input.dataset)["content_hash"],
        },
    )
