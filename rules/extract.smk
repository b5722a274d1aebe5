# Stage extract: activations of every layer into Zarr (GPU rule: cluster profiles route it by resources.gpu).


rule extract_activations:
    input:
        model=paths.MODEL,
        dataset=paths.DATASET,
        code=code("extract_activations"),
    output:
        store=directory(paths.STORE),
    log:
        paths.log(paths.STORE),
    params:
        settings=lambda wildcards: canonical(extraction_settings(wildcards.model)),
        device=config["device"],
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=extract_mem_mb,
        runtime=extract_runtime,
    conda:
        "../envs/extract.yaml"
    script:
        "../scripts/extract_activations.py"
