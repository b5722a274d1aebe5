"""Snakemake entry point: the HTML report (rules/report.smk), from the rule's named inputs."""
from reprsim.io.logs import tee_to_log
from reprsim.stages.report.html import ReportInputs, build_report

with tee_to_log(snakemake.log[0]):
    inputs = ReportInputs.from_named({name: paths for name, paths in snakemake.input.items()
                                      if name not in ("code", "captions")},
                                     title=snakemake.params.title, task_metrics=snakemake.params.task_metrics)
    build_report(snakemake.output.html, inputs)
