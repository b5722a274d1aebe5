"""Snakemake entry point: one measure's scores on the grounding tests (rules/grounding.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.grounding.measure_tests import measure_tests
from reprsim.stages.grounding.setup import Setup


def pair_tables(pairs, tables, replicates):
    """Sorted model pair -> (its pair table, its replicates)."""
    return {tuple(pair): files for pair, files in zip(pairs, zip(tables, replicates))}


with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    params, inputs = snakemake.params, snakemake.input
    settings = json.loads(params.setup)
    setup = Setup(stores=dict(zip(params.models, inputs.stores)),
                  shortcut_stores=dict(zip(params.shortcut_models, inputs.shortcut_stores)),
                  predictions=dict(zip(params.predicted, inputs.predictions)),
                  probes=dict(zip(params.probed, inputs.probes)),
                  pair_tables=pair_tables(params.pairs, inputs.pair_tables, inputs.pair_resamples),
                  shortcut_pair_tables=pair_tables(params.shortcut_pairs, inputs.shortcut_pair_tables,
                                                   inputs.shortcut_pair_resamples),
                  dataset_dir=inputs.dataset, **settings)
    table = measure_tests(snakemake.wildcards.label, json.loads(params.spec), setup)
    print(table[["test", "variant", "score", "ci_low", "ci_high", "chance", "n_items", "p_value", "decision"]]
          .to_string(index=False), flush=True)
    write_parquet(snakemake.output.table, table)
