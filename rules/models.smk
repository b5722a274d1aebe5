# Stage models: materialise models (hub, local directory, installed package, random init) into
# save_pretrained dirs, pretrain causal or masked LMs from scratch on a dataset's text (source pretrain), and
# copy a pretraining's checkpoints out as models of their own. Fine-tuned models come from rules/finetune.smk
# into the same place.


def model_spec(wildcards):
    return canonical(config["models"][wildcards.model])


def materialize_inputs(wildcards):
    """A random model's tokenizer: the model it borrows it from, or the dataset it is trained on; a hub model's
    download (rule fetch_hub)."""
    spec = config["models"][wildcards.model]
    if spec["source"] == "hf":
        return {"fetched": hub_fetched("model", wildcards.model)}
    if spec["source"] != "init":
        return {}
    if isinstance(spec["tokenizer"], dict):
        return {"dataset": dataset_dir(spec["tokenizer"]["train"]["dataset"])}
    return {"tokenizer": model_dir(spec["tokenizer"])}


rule materialize_model:
    input:
        unpack(materialize_inputs),
        code=code("materialize_model"),
    output:
        model=directory(paths.MODEL),
    log:
        paths.log(paths.MODEL),
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


def pretrain_inputs(wildcards):
    """A pretrained model's dataset and its tokenizer: the model it borrows it from, or (when it is another
    dataset than the one it pretrains on) the dataset the tokenizer is trained on."""
    spec = config["models"][wildcards.model]
    inputs = {"dataset": dataset_dir(spec["dataset"])}
    if not isinstance(spec["tokenizer"], dict):
        inputs["tokenizer"] = model_dir(spec["tokenizer"])
    elif spec["tokenizer"]["train"]["dataset"] != spec["dataset"]:
        inputs["tokenizer_dataset"] = dataset_dir(spec["tokenizer"]["train"]["dataset"])
    return inputs


rule pretrain_model:
    input:
        unpack(pretrain_inputs),
        code=code("pretrain_model"),
    output:
        model=directory(paths.MODEL),
    log:
        paths.log(paths.MODEL),
    params:
        spec=model_spec,
        device=config["device"],
    wildcard_constraints:
        model=_one_of(PRETRAINED),
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=pretrain_mem_mb,
        runtime=pretrain_runtime,
    conda:
        "../envs/models.yaml"
    script:
        "../scripts/pretrain_model.py"


# A pretrained model's checkpoint (NAME@STEP) is saved by NAME's own training job, inside its directory; copying it
# out is file work, run by the Snakemake process itself (on a cluster, the submitting host: no queue wait).
rule checkpoint_model:
    input:
        parent=lambda wildcards: model_dir(CHECKPOINT_OF[wildcards.model]),
        code=code("checkpoint_model"),
    output:
        model=directory(paths.MODEL),
    log:
        paths.log(paths.MODEL),
    params:
        spec=model_spec,
    wildcard_constraints:
        model=_one_of(sorted(CHECKPOINT_OF)),
    localrule: True
    threads: 1
    conda:
        "../envs/models.yaml"
    script:
        "../scripts/checkpoint_model.py"
