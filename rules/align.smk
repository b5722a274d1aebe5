# Aligners between representation spaces (Ren et al. 2023): per layer pair of two models,
# synthetic recovery of a known invertible map, and layer injection into a fine-tuned model.
# GPU rules: the INN and MLP aligners train networks.


rule align_layers:
    input:
        a=lambda wildcards: store(wildcards.dataset, wildcards.model_a),
        b=lambda wildcards: store(wildcards.dataset, wildcards.model_b),
        code=code("align_layers"),
    output:
        table="results/align/{representation}/{dataset}/{model_a}__{model_b}.parquet",
    log:
        "results/logs/align/{representation}/{dataset}/{model_a}__{model_b}.log",
    params:
        aligners=canonical(aligner_specs()),
        splits=align_splits(),
        layers=ALIGN["layers"],
        seed=ALIGN["seed"],
    threads: 2
    resources:
        gpu=1,
        mem_mb=align_mem_mb,
        runtime=align_runtime,
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/align_layers.py"


rule synthetic_alignment:
    input:
        store=lambda wildcards: store(wildcards.dataset, wildcards.model),
        code=code("synthetic_alignment"),
    output:
        table="results/align/synthetic/{dataset}/{model}.parquet",
    log:
        "results/logs/align/synthetic/{dataset}/{model}.log",
    params:
        aligners=canonical(aligner_specs()),
        pooling=ALIGN["representation"],
        splits=align_splits(),
        layers=ALIGN["synthetic"]["layers"],
        map_seeds=ALIGN["synthetic"]["map_seeds"],
    threads: 2
    resources:
        gpu=1,
        mem_mb=align_mem_mb,
        runtime=align_runtime,
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/synthetic_alignment.py"


rule layer_injection:
    input:
        a=lambda wildcards: store(wildcards.dataset, wildcards.model_a),
        b=lambda wildcards: store(wildcards.dataset, wildcards.model_b),
        base=lambda wildcards: store(wildcards.dataset, config["models"][wildcards.model_a]["base"]),
        model_a=lambda wildcards: model_dir(wildcards.model_a),
        model_b=lambda wildcards: model_dir(wildcards.model_b),
        code=code("layer_injection"),
    output:
        table="results/align/injection/{dataset}/{model_a}__{model_b}.parquet",
    log:
        "results/logs/align/injection/{dataset}/{model_a}__{model_b}.log",
    params:
        aligners=canonical(aligner_specs()),
        splits=align_splits(),
        seed=ALIGN["seed"],
    threads: 2
    resources:
        gpu=1,
        mem_mb=align_mem_mb,
        runtime=align_runtime,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/layer_injection.py"


rule align_figure:
    input:
        table="results/align/{representation}/{dataset}/{model_a}__{model_b}.parquet",
        code=code("plot_figures"),
    output:
        figure=report(
            "results/figures/align/{representation}/{dataset}/{model_a}__{model_b}.png",
            category="Alignment",
            subcategory="{representation} pooling, {dataset}",
            caption="../report/aligners.rst",
            labels={"model A": "{model_a}", "model B": "{model_b}"},
        ),
    log:
        "results/logs/figures/align/{representation}/{dataset}/{model_a}__{model_b}.log",
    params:
        kind="aligners",
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figures.py"
