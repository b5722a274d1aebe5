# Fine-tuning (a model source like any other) and what it did to each layer (Phang et al. 2021):
# truncation, skipping blocks, and CLS-token CKA views between layers.


rule finetune_model:
    input:
        unpack(finetune_inputs),
        code=code("finetune_model"),
    output:
        model=directory("results/models/{model}"),
    log:
        "results/logs/finetune/{model}.log",
    params:
        spec=model_spec,
        device=config["device"],
    wildcard_constraints:
        model=_one_of(FINETUNED),
    threads: 2
    resources:
        gpu=1,
        mem_mb=finetune_mem_mb,
        runtime=finetune_runtime,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/finetune_model.py"


rule truncation:
    input:
        model="results/models/{model}",
        base=lambda wildcards: model_dir(config["models"][wildcards.model]["base"]),
        dataset=lambda wildcards: dataset_dir(config["models"][wildcards.model]["dataset"]),
        code=code("evaluate_finetuned"),
    output:
        table="results/finetune/{model}/truncation.parquet",
    log:
        "results/logs/finetune/{model}.truncation.log",
    params:
        kind="truncation",
        heads=config["finetune_eval"]["heads"],
        split=config["finetune_eval"]["split"],
        batch_size=config["finetune_eval"]["batch_size"],
        device=config["device"],
    wildcard_constraints:
        model=_one_of(FINETUNED),
    threads: 2
    resources:
        gpu=1,
        mem_mb=evaluation_mem_mb,
        runtime=truncation_runtime,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/evaluate_finetuned.py"


rule skip:
    input:
        model="results/models/{model}",
        dataset=lambda wildcards: dataset_dir(config["models"][wildcards.model]["dataset"]),
        code=code("evaluate_finetuned"),
    output:
        table="results/finetune/{model}/skip.parquet",
    log:
        "results/logs/finetune/{model}.skip.log",
    params:
        kind="skip",
        split=config["finetune_eval"]["split"],
        batch_size=config["finetune_eval"]["batch_size"],
        device=config["device"],
    wildcard_constraints:
        model=_one_of(FINETUNED),
    threads: 2
    resources:
        gpu=1,
        mem_mb=evaluation_mem_mb,
        runtime=skip_runtime,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/evaluate_finetuned.py"


rule layer_views:
    input:
        unpack(layer_view_stores),
        code=code("layer_views"),
    output:
        table="results/finetune/{model}/layer_views.parquet",
    log:
        "results/logs/finetune/{model}.layer_views.log",
    params:
        base=lambda wildcards: config["models"][wildcards.model]["base"],
        siblings=lambda wildcards: siblings(wildcards.model),
        split=config["similarity"]["split"],
    wildcard_constraints:
        model=_one_of(FINETUNED),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/layer_views.py"
