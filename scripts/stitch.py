"""Snakemake entry point: one bottom model stitched into one top model at every asked layer (rules/stitch.smk)."""
import json

import torch

from reprsim.io.device import resolve_device
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.io.tables import read_tables
from reprsim.stages.stitch.pairs import stitch_pair

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    settings = json.loads(snakemake.params.settings)
    intervals = json.loads(snakemake.params.intervals)
    self_table = snakemake.input.get("self_table")
    layers = settings["layers"]
    table, replicates = stitch_pair(
        snakemake.input.bottom, snakemake.input.top, snakemake.input.dataset,
        objective=settings["objective"],
        layers=layers if isinstance(layers, str) else [tuple(pair) for pair in layers],
        phis=settings["phi"], steps=settings["steps"], batch_size=settings["batch_size"],
        optimizer=settings["optimizer"], split=settings["split"], seeds=settings["seeds"],
        resamples=intervals["resamples"], confidence=intervals["confidence"], interval_seed=intervals["seed"],
        chance_permutations=settings["chance_permutations"], max_length=settings["max_length"],
        context=settings["context"], max_examples=settings["max_examples"], init_tokens=settings["init_tokens"],
        heldout=settings["heldout"], start=settings.get("start", "auto"),
        on_width_mismatch="skip", device=resolve_device(snakemake.params.device),
        names=(snakemake.wildcards.model_a, snakemake.wildcards.model_b), dataset=snakemake.wildcards.dataset,
        self_table=read_tables([self_table]) if self_table else None,
    )
    write_parquet(snakemake.output.replicates, replicates)
    write_parquet(snakemake.output.table, table)
