# Prepare datasets: builtin generator, local files, or the Hugging Face hub.


rule prepare_dataset:
    input:
        files=local_dataset_files,
        code=code("prepare_dataset"),
    output:
        dataset=directory("results/datasets/{dataset}"),
    log:
        "results/logs/datasets/{dataset}.log",
    params:
        spec=lambda wildcards: dataset_spec(wildcards.dataset),
    threads: 1
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/prepare_dataset.py"
