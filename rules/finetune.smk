# Stage finetune: fine-tuning (a model source like any other) and what it did to each layer
# (Phang et al. 2021): truncation, skipping blocks, and CLS-token CKA views between layers.


def finetune_inputs(wildcards):
    spec = config["models"][wildcards.model]
    return {"base": model_dir(spec["base"]), "dataset": dataset_dir(spec["dataset"])}


rule finetune_model:
    input:
        unpack(finetune_inputs),
        code=code("finetune_model"),
    output:
        model=directory(paths.MODEL),
    log:
        paths.log(paths.MODEL),
    params:
        spec=model_spec,
        device=config["device"],
    wildcard_constraints:
        model=_one_of(FINETUNED),
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=finetune_mem_mb,
        runtime=finetune_runtime,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/finetune_model.py"


def truncation_inputs(wildcards):
    """The model, its base and dataset, and the activation stores of the model and (with heads) its base on that
    dataset when the extraction may hold the evaluation rows' head inputs as the job's own passes compute them:
    the split extracted, float32 from full-precision passes, at the max length the model was tuned with. The job
    reads them only if they hold every row of the split and the head's pooling, else runs the forward passes
    (reprsim.nets.heads.stored_head_rows)."""
    spec, extraction = config["models"][wildcards.model], config["extraction"]
    inputs = {"base": model_dir(spec["base"]), "dataset": dataset_dir(spec["dataset"])}
    if (spec["dataset"] in EXTRACT_ON and config["finetune_eval"]["split"] in extraction["splits"]
            and extraction["dtype"] == "float32" and extraction["autocast"] is None
            and extraction["max_length"] == spec["max_length"]):
        inputs["store"] = store(spec["dataset"], wildcards.model)
        if config["finetune_eval"]["heads"]["enabled"]:
            inputs["base_store"] = store(spec["dataset"], spec["base"])
    return inputs


rule truncation:
    input:
        unpack(truncation_inputs),
        model=paths.MODEL,
        code=code("truncation"),
    output:
        table=paths.TRUNCATION_TABLE,
    log:
        paths.log(paths.TRUNCATION_TABLE),
    params:
        heads=canonical(config["finetune_eval"]["heads"]),
        split=config["finetune_eval"]["split"],
        batch_size=config["finetune_eval"]["batch_size"],
        device=config["device"],
    wildcard_constraints:
        model=_one_of(FINETUNED),
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=evaluation_mem_mb,
        runtime=truncation_runtime,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/truncation.py"


rule skip:
    input:
        model=paths.MODEL,
        dataset=lambda wildcards: dataset_dir(config["models"][wildcards.model]["dataset"]),
        code=code("skip"),
    output:
        table=paths.SKIP_TABLE,
    log:
        paths.log(paths.SKIP_TABLE),
    params:
        split=config["finetune_eval"]["split"],
        batch_size=config["finetune_eval"]["batch_size"],
        device=config["device"],
    wildcard_constraints:
        model=_one_of(FINETUNED),
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=evaluation_mem_mb,
        runtime=skip_runtime,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/skip.py"


rule layer_views:
    input:
        tables=lambda wildcards: view_tables(wildcards.model, paths.PAIR_TABLE),
        replicates=lambda wildcards: view_tables(wildcards.model, paths.PAIR_RESAMPLES),
        code=code("layer_views"),
    output:
        table=paths.LAYER_VIEWS_TABLE,
        blocks=paths.LAYER_BLOCKS_TABLE,
    log:
        paths.log(paths.LAYER_VIEWS_TABLE),
    params:
        base=lambda wildcards: config["models"][wildcards.model]["base"],
        siblings=lambda wildcards: siblings(wildcards.model),
        label=VIEW_LABEL,
        confidence=config["similarity"]["intervals"]["confidence"],
    wildcard_constraints:
        model=_one_of(FINETUNED),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/layer_views.py"
