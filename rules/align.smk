# Stage align: aligners between representation spaces (Ren et al. 2023): per layer pair of two
# models, synthetic recovery of a known invertible map, and layer injection into a fine-tuned
# model. GPU rules: the INN and MLP aligners train networks.


rule align_layers:
    input:
        a=lambda wildcards: store(wildcards.dataset, wildcards.model_a),
        b=lambda wildcards: store(wildcards.dataset, wildcards.model_b),
        code=code("align_layers"),
    output:
        table=paths.ALIGNER_TABLE,
        rows=paths.ALIGNER_ROWS,
    log:
        paths.log(paths.ALIGNER_TABLE),
    params:
        aligners=canonical(aligner_specs()),
        splits=canonical(ALIGN["splits"]),
        layers=ALIGN["layers"],
        seed=ALIGN["seed"],
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=align_mem_mb,
        runtime=align_runtime,
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/align_layers.py"


rule synthetic_recovery:
    input:
        store=lambda wildcards: store(wildcards.dataset, wildcards.model),
        code=code("synthetic_recovery"),
    output:
        table=paths.SYNTHETIC_TABLE,
    log:
        paths.log(paths.SYNTHETIC_TABLE),
    params:
        aligners=canonical(aligner_specs()),
        pooling=ALIGN["representation"],
        splits=canonical(ALIGN["splits"]),
        layers=ALIGN["synthetic"]["layers"],
        map_seeds=ALIGN["synthetic"]["map_seeds"],
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=align_mem_mb,
        runtime=align_runtime,
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/synthetic_recovery.py"


rule layer_injection:
    input:
        a=lambda wildcards: store(wildcards.dataset, wildcards.model_a),
        b=lambda wildcards: store(wildcards.dataset, wildcards.model_b),
        base=lambda wildcards: store(wildcards.dataset, config["models"][wildcards.model_a]["base"]),
        model_a=lambda wildcards: model_dir(wildcards.model_a),
        model_b=lambda wildcards: model_dir(wildcards.model_b),
        code=code("layer_injection"),
    output:
        table=paths.INJECTION_TABLE,
    log:
        paths.log(paths.INJECTION_TABLE),
    params:
        aligners=canonical(aligner_specs()),
        splits=canonical(ALIGN["splits"]),
        seed=ALIGN["seed"],
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=align_mem_mb,
        runtime=align_runtime,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/layer_injection.py"
