# Stage data: prepare datasets (builtin generator, local files, or the Hugging Face hub).


def dataset_spec(wildcards):
    """What the prepared table depends on: the spec without `metric`, which only chooses what figures show."""
    return canonical({k: v for k, v in config["datasets"][wildcards.dataset].items() if k != "metric"})


def dataset_files(wildcards):
    """A local dataset's files, or a shipped sample's, so that editing one re-prepares the dataset."""
    spec = config["datasets"][wildcards.dataset]
    if spec["source"] == "sample":
        return sorted(glob.glob(os.path.join(workflow_file("src/reprsim/stages/data/samples", spec["name"]), "*.tsv")))
    if spec["source"] != "local":
        return []
    return [os.path.join(spec["data_root"], path) for path in spec["files"].values()]


rule prepare_dataset:
    input:
        files=dataset_files,
        fetched=lambda wildcards: hub_fetched("dataset", wildcards.dataset),
        code=code("prepare_dataset"),
    output:
        dataset=directory(paths.DATASET),
    log:
        paths.log(paths.DATASET),
    params:
        spec=dataset_spec,
    threads: 1
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/prepare_dataset.py"
