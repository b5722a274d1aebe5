# Fine-tuning (a model source like any other) and its evaluation: truncation (Phang et al. 2021).


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
        mem_mb=8000,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/finetune_model.py"


rule truncation:
    input:
        model="results/models/{model}",
        dataset=lambda wildcards: dataset_dir(config["models"][wildcards.model]["dataset"]),
        code=code("evaluate_finetuned"),
    output:
        table="results/finetune/{model}/truncation.parquet",
    log:
        "results/logs/finetune/{model}.truncation.log",
    params:
        kind="truncation",
        split=config["finetune_eval"]["split"],
        batch_size=config["finetune_eval"]["batch_size"],
        device=config["device"],
    wildcard_constraints:
        model=_one_of(FINETUNED),
    threads: 2
    resources:
        gpu=1,
        mem_mb=4000,
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
        mem_mb=4000,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/evaluate_finetuned.py"
