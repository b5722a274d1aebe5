# Config-derived logic: names, pairs, wildcard constraints, code dependencies, targets.
import json
import os
import re
from itertools import combinations_with_replacement

from reprsim.aggregate import first_label
from reprsim.codedeps import code_dependencies

DATASETS = sorted(config["datasets"])
MODELS = sorted(config["models"])
FINETUNED = sorted(m for m in MODELS if config["models"][m]["source"] == "finetune")
MATERIALIZED = sorted(m for m in MODELS if m not in FINETUNED)
EXTRACT_ON = sorted(config["extraction"]["datasets"])
REPRESENTATIONS = sorted(config["similarity"]["representations"])
# Unordered pairs, each model with itself included; names sorted so a pair has one path.
PAIRS = list(combinations_with_replacement(MODELS, 2))


def _one_of(names):
    # An empty alternation would match everything; (?!) matches nothing.
    return "|".join(re.escape(n) for n in names) or "(?!)"


wildcard_constraints:
    dataset=_one_of(DATASETS),
    model=_one_of(MODELS),
    model_a=_one_of(MODELS),
    model_b=_one_of(MODELS),
    representation=_one_of(REPRESENTATIONS),


def canonical(value):
    """Params as sorted JSON: equal settings give equal strings, so no spurious reruns."""
    return json.dumps(value, sort_keys=True)


def code(script):
    """A rule's script and every reprsim module it imports, declared as input so that a
    real edit reruns the rule (Snakemake compares content: a touch does nothing)."""
    return list(code_dependencies(os.path.join(workflow.basedir, "scripts", f"{script}.py"),
                                  os.path.join(workflow.basedir, "src")))


# ----------------------------------------------------------------- per-job inputs
def model_dir(name):
    return f"results/models/{name}"


def dataset_dir(name):
    return f"results/datasets/{name}"


def model_spec(wildcards):
    return canonical(config["models"][wildcards.model])


def materialize_inputs(wildcards):
    spec = config["models"][wildcards.model]
    return {"tokenizer": model_dir(spec["tokenizer"])} if spec["source"] == "init" else {}


def finetune_inputs(wildcards):
    spec = config["models"][wildcards.model]
    return {"base": model_dir(spec["base"]), "dataset": dataset_dir(spec["dataset"])}


def store(dataset, model):
    return f"results/activations/{dataset}/{model}.zarr"


def pair_table(representation, dataset, a, b):
    return f"results/pairs/{representation}/{dataset}/{a}__{b}.parquet"


def heatmap(representation, dataset, a, b):
    return f"results/figures/pairs/{representation}/{dataset}/{a}__{b}.png"


# ----------------------------------------------------------------- aggregate lists
def all_stores():
    return [store(d, m) for d in EXTRACT_ON for m in MODELS]


def all_pair_tables():
    return [pair_table(r, d, a, b) for r in REPRESENTATIONS for d in EXTRACT_ON for a, b in PAIRS]


def all_heatmaps():
    return [heatmap(r, d, a, b) for r in REPRESENTATIONS for d in EXTRACT_ON for a, b in PAIRS]


def all_truncation_tables():
    if not config["finetune_eval"]["truncation"]:
        return []
    return [f"results/finetune/{m}/truncation.parquet" for m in FINETUNED]


def all_truncation_figures():
    return [t.replace("results/finetune/", "results/figures/finetune/").replace(".parquet", ".png")
            for t in all_truncation_tables()]


def all_skip_figures():
    if not config["finetune_eval"]["skip"]:
        return []
    return [f"results/figures/finetune/{m}/skip.png" for m in FINETUNED]


def summary_figures():
    """Model distances when the distance measure is configured; localization when neuronsim and svcca are."""
    figures = []
    if config["report"]["distance_measure"] in config["measures"]:
        figures.append("results/figures/summary/model_distance.png")
    if first_label(config["measures"], "neuronsim") and first_label(config["measures"], "svcca"):
        figures.append("results/figures/summary/localization.png")
    return figures


def all_targets():
    return ["results/report/index.html"]
