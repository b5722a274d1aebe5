"""Snakemake entry point: one dimension placebo, every reference seed reduced to one width by one method and
compared with each other reference seed (rules/universality.smk)."""
import json

import pandas as pd
import torch

from reprsim.design.relations import cross_seed
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.compare.placebo import compare_reduced

similarity = snakemake.config["similarity"]

with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    reduce = json.loads(snakemake.params.reduce)
    specs = json.loads(snakemake.params.specs)
    reference = json.loads(snakemake.params.reference)
    stores = dict(zip(reference, snakemake.input.stores))
    terms = dict(zip(reference, snakemake.input.terms))
    tables, replicates = [], []
    for seed, other in cross_seed(specs, reference, reference):
        table, long = compare_reduced(
            stores[seed], stores[other], representation=snakemake.params.representation,
            split=snakemake.params.split, measures=json.loads(snakemake.params.measures),
            chance=json.loads(snakemake.params.chance), intervals=json.loads(snakemake.params.intervals),
            device=similarity.get("device", "cpu"), max_memory_gb=similarity.get("max_memory_gb"),
            terms_b=terms[other], reduce={**{k: reduce[k] for k in ("method", "dims", "seed")},
                                          "name": reduce["names"][seed]})
        tables.append(table)
        replicates.append(long)
    write_parquet(snakemake.output.replicates, pd.concat(replicates, ignore_index=True))
    write_parquet(snakemake.output.table, pd.concat(tables, ignore_index=True))
