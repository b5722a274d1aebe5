# Stage extract: activations of every layer into Zarr (GPU rule: cluster profiles route it by resources.gpu); a
# brought model's (source: activations) imported into the same store instead, from its files (no network, no GPU).


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
    wildcard_constraints:
        model=_one_of(NETWORKED),  # a brought model's store is import_activations'
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=extract_mem_mb,
        runtime=extract_runtime,
    conda:
        "../envs/extract.yaml"
    script:
        "../scripts/extract_activations.py"


def brought_inputs(wildcards):
    """A brought model's files, each split's (reprsim.workflow.brought.source_files: a changed file re-imports), and
    its dataset, whose prepared splits check the rows; its store exists on that dataset alone."""
    spec = config["models"][wildcards.model]
    if wildcards.dataset != spec["dataset"]:
        raise ValueError(f"model {wildcards.model} is brought activations of dataset {spec['dataset']} "
                         f"(models.{wildcards.model}.dataset): it has no store on {wildcards.dataset}")
    inputs = {f"split_{split}": brought.source_files(path, spec["pooling"]) for split, path in spec["splits"].items()}
    return {**inputs, "dataset": dataset_dir(spec["dataset"])}


def brought_settings(wildcards):
    """What a brought model's store depends on besides its files: its splits' paths (in extraction's order),
    pooling, the rows extraction takes of a split (max_examples) and the store's chunking."""
    spec, extraction = config["models"][wildcards.model], config["extraction"]
    return canonical({"splits": {split: spec["splits"][split] for split in extraction["splits"] if split in spec["splits"]},
                      "order": [split for split in extraction["splits"] if split in spec["splits"]],
                      "pooling": spec["pooling"], "max_examples": extraction["max_examples"],
                      "chunk_rows": extraction["chunk_rows"]})


rule import_activations:
    input:
        unpack(brought_inputs),
        code=code("import_activations"),
    output:
        store=directory(paths.STORE),
    log:
        paths.log(paths.STORE),
    params:
        settings=brought_settings,
    wildcard_constraints:
        model=_one_of(BROUGHT),  # never a model with a network: extract_activations makes its store
    threads: 1
    resources:  # each split is read whole, then every layer written: about three copies of the files at most
        mem_mb=lambda wildcards, input, attempt: int((1000 + 3 * input.size_mb) * attempt),
    conda:
        "../envs/extract.yaml"
    script:
        "../scripts/import_activations.py"


# One split's pooled rows of any model's store as a brought model's file (reprsim.stages.extract.brought): what a
# brought model's `splits` may point to, so that an example needs no file from outside the workflow
# (config/examples/brought-activations.yaml); asked for by such a path only.
rule export_activations:
    input:
        store=lambda wildcards: store(wildcards.dataset, wildcards.model),
        code=code("export_activations"),
    output:
        file=paths.EXPORT,
    log:
        paths.log(paths.EXPORT),
    wildcard_constraints:
        pooling="mean|cls|last",
        split="train|validation|test",
        format="npz|safetensors",
    threads: 1
    conda:
        "../envs/extract.yaml"
    script:
        "../scripts/export_activations.py"
