"""Snakemake entry point: localization scores from all pair tables (rules/compare.smk)."""
import pandas as pd

from reprsim.io.logs import tee_to_log
from reprsim.stages.compare.summaries import localization_scores

with tee_to_log(snakemake.log[0]):
    table = localization_scores(pd.read_parquet(snakemake.input.table), snakemake.params.neuronsim,
                                snakemake.params.svcca)
    table.to_parquet(snakemake.output.table, index=False)
