# Downloads from the Hugging Face hub: one local rule per `source: hf` model or dataset, run by the Snakemake
# process itself (on a cluster: the submitting host, where the network is), into the hub cache that the jobs
# then read offline (reprsim.io.hub; common.smk makes every submitted job offline). Nothing else downloads.

HUB_SOURCES = {("model", name): spec for name, spec in config["models"].items() if spec["source"] == "hf"}
HUB_SOURCES.update({("dataset", name): spec for name, spec in config["datasets"].items() if spec["source"] == "hf"})


def hub_fetched(kind, name):
    """The fetch marker a `source: hf` model or dataset's job waits for ([] for any other source)."""
    return [paths.HUB_FETCH.format(kind=kind, name=name)] if (kind, name) in HUB_SOURCES else []


rule fetch_hub:
    output:
        fetched=paths.HUB_FETCH,
    log:
        paths.log(paths.HUB_FETCH),
    params:
        spec=lambda wildcards: canonical(HUB_SOURCES[(wildcards.kind, wildcards.name)]),
    wildcard_constraints:
        kind="model|dataset",
        name=_one_of(sorted({name for _, name in HUB_SOURCES})),
    localrule: True
    threads: 1
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/fetch_hub.py"
