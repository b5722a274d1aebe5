# Materialise models (hub, local directory, installed package, random init) into save_pretrained dirs.
# Fine-tuned models come from rules/finetune.smk into the same place.


rule materialize_model:
    input:
        unpack(materialize_inputs),
        code=code("materialize_model"),
    output:
        model=directory("results/models/{model}"),
    log:
        "results/logs/models/{model}.log",
    params:
        spec=model_spec,
    wildcard_constraints:
        model=_one_of(MATERIALIZED),
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
    conda:
        "../envs/models.yaml"
    script:
        "../scripts/materialize_model.py"
