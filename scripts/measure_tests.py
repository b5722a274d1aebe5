"""Snakemake entry point: one measure's scores on the grounding tests (rules/grounding.smk)."""
import json

import torch

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.stages.grounding.measure_tests import measure_tests
from reprsim.stages.grounding.setup import Setup


def pair_tables(pairs, table_of, tables, replicates):
    """Sorted model pair -> (the table and replicates of the pair job that computed it: tables[table_of[i]])."""
    return {tuple(pair): (tables[i], replicates[i]) for pair, i in zip(pairs, table_of)}


with tee_to_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    params, inputs = snakemake.params, snakemake.input
    settings = json.loads(params.setup)
    setup = Setup(stores=dict(zip(params.models, inputs.stores)),
                  shortcut_stores=dict(zip(params.shortcut_models, inputs.shortcut_stores)),
                  predictions=dict(zip(params.predicted, inputs.predictions)),
                  probes=dict(zip(params.probed, inputs.probes)),
                  pair_tables=pair_tables(params.pairs, params.table_of, inputs.pair_tables, inputs.pair_resamples),
                  shortcut_pair_tables=pair_tables(params.shortcut_pairs, params.shortcut_table_of,
                                                   inputs.shortcut_pair_tables, inputs.shortcut_pair_resamples),
                  dataset_dir=inputs.dataset, **settings)
    table = measure_tests(snakemake.wildcards.label, json.loads(params.spec), setup)
    print(table[["test", "variant", "score", "ci_low", "ci_high", "chance", "n_items", "p_value", "decision"]]
          .to_string(index=False), flush=True)
    write_parquet(snakemake.output.table, table)
