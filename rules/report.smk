# Figures, the aggregated table and the HTML report.


rule pair_heatmap:
    input:
        table="results/pairs/{representation}/{dataset}/{model_a}__{model_b}.parquet",
        code=code("plot_figures"),
    output:
        figure=report(
            "results/figures/pairs/{representation}/{dataset}/{model_a}__{model_b}.png",
            category="Similarity",
            subcategory="{representation} pooling, {dataset}",
            caption="../report/heatmap.rst",
            labels={"model A": "{model_a}", "model B": "{model_b}"},
        ),
    log:
        "results/logs/figures/pairs/{representation}/{dataset}/{model_a}__{model_b}.log",
    params:
        kind="heatmap",
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figures.py"


rule truncation_figure:
    input:
        table="results/finetune/{model}/truncation.parquet",
        code=code("plot_figures"),
    output:
        figure=report(
            "results/figures/finetune/{model}/truncation.png",
            category="Fine-tuning",
            caption="../report/truncation.rst",
            labels={"model": "{model}"},
        ),
    log:
        "results/logs/figures/finetune/{model}.log",
    params:
        kind="truncation",
        metric=lambda wildcards: task_metric(wildcards.model),
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figures.py"


rule skip_figure:
    input:
        table="results/finetune/{model}/skip.parquet",
        code=code("plot_figures"),
    output:
        figure=report(
            "results/figures/finetune/{model}/skip.png",
            category="Fine-tuning",
            caption="../report/skip.rst",
            labels={"model": "{model}"},
        ),
    log:
        "results/logs/figures/finetune/{model}.skip.log",
    params:
        kind="skip",
        metric=lambda wildcards: task_metric(wildcards.model),
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figures.py"


rule layer_views_figure:
    input:
        table="results/finetune/{model}/layer_views.parquet",
        code=code("plot_figures"),
    output:
        figure=report(
            "results/figures/finetune/{model}/layer_views.png",
            category="Fine-tuning",
            caption="../report/layer_views.rst",
            labels={"model": "{model}"},
        ),
    log:
        "results/logs/figures/finetune/{model}.layer_views.log",
    params:
        kind="layer_views",
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figures.py"


rule aggregate_pairs:
    input:
        tables=all_pair_tables(),
        code=code("aggregate_pairs"),
    output:
        table="results/tables/pairs.parquet",
    log:
        "results/logs/tables/pairs.log",
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/aggregate_pairs.py"


rule alignment_figure:
    input:
        table="results/tables/pairs.parquet",
        code=code("plot_figures"),
    output:
        figure=report(
            "results/figures/alignment/linear_map_error.png",
            category="Alignment",
            caption="../report/alignment.rst",
        ),
    log:
        "results/logs/figures/alignment.log",
    params:
        kind="alignment",
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figures.py"


rule model_distance_figure:
    input:
        table="results/tables/pairs.parquet",
        code=code("plot_figures"),
    output:
        figure=report(
            "results/figures/summary/model_distance.png",
            category="Similarity",
            caption="../report/model_distance.rst",
        ),
    log:
        "results/logs/figures/model_distance.log",
    params:
        kind="model_distance",
        label=config["report"]["distance_measure"],
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figures.py"


rule localization_figure:
    input:
        table="results/tables/pairs.parquet",
        code=code("plot_figures"),
    output:
        scores="results/tables/localization.parquet",
        figure=report(
            "results/figures/summary/localization.png",
            category="Similarity",
            caption="../report/localization.rst",
        ),
    log:
        "results/logs/figures/localization.log",
    params:
        kind="localization",
        neuronsim=first_label(config["measures"], "neuronsim"),
        svcca=first_label(config["measures"], "svcca"),
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figures.py"


rule report:
    input:
        datasets=[dataset_dir(d) for d in DATASETS],
        models=[model_dir(m) for m in MODELS],
        stores=all_stores(),
        pairs="results/tables/pairs.parquet",
        heatmaps=all_heatmaps(),
        alignment=["results/figures/alignment/linear_map_error.png"] if config["alignment"]["enabled"] else [],
        summaries=summary_figures(),
        truncation_tables=all_truncation_tables(),
        truncation_figures=all_truncation_figures(),
        skip_figures=all_skip_figures(),
        align_tables=all_align_tables(),
        align_figures=all_align_figures(),
        synthetic_tables=all_synthetic_tables(),
        injection_tables=all_injection_tables(),
        layer_views=all_layer_views(),
        layer_view_figures=all_layer_view_figures(),
        code=code("build_report"),
    output:
        html="results/report/index.html",
    log:
        "results/logs/report.log",
    params:
        title=config["report"]["title"],
        task_metrics={m: task_metric(m) for m in FINETUNED},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/build_report.py"
