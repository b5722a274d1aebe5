# Prepare datasets: builtin generator, local files, or the Hugging Face hub.


rule prepare_dataset:
    input:
        code=code("prepare_dataset"),
    output:
        dataset=directory("results/datasets/{dataset}"),
    log:
        "results/logs/datasets/{dataset}.log",
    params:
        spec=lambda wildcards: canonical(config["datasets"][wildcards.dataset]),
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/prepare_dataset.py"
