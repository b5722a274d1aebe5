# Pairwise jobs: one per unordered model pair (and each model with itself), all layer pairs inside.


rule compare_pair:
    input:
        a=lambda wildcards: store(wildcards.dataset, wildcards.model_a),
        b=lambda wildcards: store(wildcards.dataset, wildcards.model_b),
        code=code("compare_pair"),
    output:
        table="results/pairs/{representation}/{dataset}/{model_a}__{model_b}.parquet",
    log:
        "results/logs/pairs/{representation}/{dataset}/{model_a}__{model_b}.log",
    params:
        split=config["similarity"]["split"],
        measures=canonical(config["measures"]),
        alignment=canonical(config["alignment"]),
    threads: 1
    resources:
        mem_mb=compare_mem_mb,
        runtime=compare_runtime,
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/compare_pair.py"
