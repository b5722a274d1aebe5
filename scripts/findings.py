"""Snakemake entry point: the seed papers' claims tested on this configuration's tables (rules/findings.smk)."""
import json

from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.io.tables import read_tables
from reprsim.stages.findings.by_measure import findings_by_measure, with_summary
from reprsim.stages.findings.claims import findings
from reprsim.stages.findings.context import Setup, Tables
from reprsim.stages.findings.table import write_findings


def read(name):
    """The named input's tables in one, or None when the configuration produces none."""
    files = snakemake.input.get(name, [])
    files = [files] if isinstance(files, str) else list(files)  # a single path comes as a string
    return read_tables(files) if files else None


with tee_to_log(snakemake.log[0]):
    intervals = json.loads(snakemake.params.intervals)
    setup = Setup(models=json.loads(snakemake.params.models), measure=snakemake.params.measure or None,
                  attention_measure=snakemake.params.attention_measure or None,
                  aligners=json.loads(snakemake.params.aligners), confidence=intervals["confidence"],
                  resamples=intervals["resamples"], seed=intervals["seed"])
    tables = Tables(**{name: read(name) for name in ("pairs", "replicates", "skip", "truncation", "layer_blocks",
                                                     "aligners", "aligner_rows", "attention",
                                                     "attention_replicates", "stitching",
                                                     "stitching_replicates")})
    table = findings(tables, setup)
    measures = json.loads(snakemake.params.measures)
    by_measure = findings_by_measure(tables, setup, measures, table, read("measure_tests"))
    table = with_summary(table, by_measure, measures)
    print(table[["claim_id", "estimate", "ci_low", "ci_high", "verdict", "holds_under"]].to_string(index=False),
          flush=True)
    write_parquet(snakemake.output.by_measure, by_measure)
    write_findings(table, snakemake.output.table, snakemake.output.csv)
