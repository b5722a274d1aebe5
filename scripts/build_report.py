"""Snakemake entry point: the HTML report's pages (rules/report.smk), from the rule's named inputs."""
from reprsim.io.logs import tee_to_log
from reprsim.stages.report.html import build_report
from reprsim.stages.report.inputs import ReportInputs

with tee_to_log(snakemake.log[0]):
    params = snakemake.params
    inputs = ReportInputs.from_named({name: paths for name, paths in snakemake.input.items()
                                      if name not in ("code", "captions", "templates")},
                                     title=params.title, task_metrics=params.task_metrics, split=params.split,
                                     confidence=params.confidence, measures=params.measures,
                                     attention_measures=params.attention_measures,
                                     grounding_tests=tuple(params.grounding_tests))
    build_report(dict(snakemake.output.items()), inputs)
