"""Snakemake entry point: the measures' rank agreement and discordant orderings (rules/findings.smk)."""
from reprsim.io.logs import tee_to_log
from reprsim.io.outputs import write_parquet
from reprsim.io.tables import read_table
from reprsim.stages.findings.agreement import measure_agreement

with tee_to_log(snakemake.log[0]):
    agreement, discordance = measure_agreement(read_table(snakemake.input.pairs),
                                               read_table(snakemake.input.replicates),
                                               snakemake.params.confidence, list(snakemake.params.measures))
    shown = agreement[agreement["statistic"] == "kendall_tau_b"]
    print(shown[["scope", "measure_x", "measure_y", "estimate", "ci_low", "ci_high", "n_items"]].round(3)
          .to_string(index=False), flush=True)
    print(f"{len(discordance)} discordant orderings (both intervals exclude 0)", flush=True)
    write_parquet(snakemake.output.agreement, agreement)
    write_parquet(snakemake.output.discordance, discordance)
