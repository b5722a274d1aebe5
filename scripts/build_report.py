"""Snakemake entry point: the HTML report (rules/report.smk)."""
from reprsim.logs import tee_to_log
from reprsim.report import build_report

with tee_to_log(snakemake.log[0]):
    build_report(
        snakemake.output.html,
        title=snakemake.params.title,
        dataset_dirs=list(snakemake.input.datasets),
        model_dirs=list(snakemake.input.models),
        store_paths=list(snakemake.input.stores),
        pairs_table=snakemake.input.pairs,
        heatmaps=list(snakemake.input.heatmaps),
        alignment_figure=snakemake.input.alignment[0] if snakemake.input.alignment else None,
        summary_figures=list(snakemake.input.summaries),
        truncation_tables=list(snakemake.input.truncation_tables),
        truncation_figures=list(snakemake.input.truncation_figures),
        skip_figures=list(snakemake.input.skip_figures),
        align_tables=list(snakemake.input.align_tables),
        align_figures=list(snakemake.input.align_figures),
        synthetic_tables=list(snakemake.input.synthetic_tables),
        injection_tables=list(snakemake.input.injection_tables),
        layer_views=list(snakemake.input.layer_views),
        layer_view_figures=list(snakemake.input.layer_view_figures),
        task_metrics=snakemake.params.task_metrics,
    )
