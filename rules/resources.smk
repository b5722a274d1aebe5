# Job resources: memory (mem_mb, MB) and wall time (runtime, minutes) of the heavy rules, estimated
# from what a job processes -- model parameters, examples, tokens, read from its inputs' meta.json or
# Zarr attributes -- and multiplied by `attempt`, so each retry (--retries) asks for more. Until an
# input exists (a dry run of a fresh workflow) Snakemake shows <TBD>, and evaluates again when
# the job is ready. Locally they bind only under --resources mem_mb=N; on SLURM they become
# --mem and --time. GPU rules declare gpu=1 beside these; where GPU jobs run (partition) is
# the cluster profile's business: profiles/slurm/config.yaml, whose set-resources lists them.
#
# The formulas are pure functions in reprsim.workflow.resources (unit-tested); here are only the
# adapters Snakemake calls, (wildcards, input, attempt), which read the facts from the inputs.
import errno
import json
import os

from reprsim.workflow import paths
from reprsim.workflow import resources as job_resources


def _not_produced_yet(input_path):
    # Snakemake reads a FileNotFoundError that names an input as <TBD>
    return FileNotFoundError(errno.ENOENT, "not produced yet", str(input_path))


def _read_json(path):
    with open(path) as handle:
        return json.load(handle)


def _dataset_sizes(directory):
    """Rows per split of a prepared dataset: its meta.json's `sizes`."""
    path = os.path.join(str(directory), "meta.json")
    if not os.path.exists(path):
        raise _not_produced_yet(directory)
    return _read_json(path)["sizes"]


def _store_facts(store_path):
    """A Zarr store's attributes (n_examples, n_layers, hidden_size, split_sizes)."""
    path = os.path.join(str(store_path), "zarr.json")
    if not os.path.exists(path):
        raise _not_produced_yet(store_path)
    return _read_json(path)["attributes"]


def _model_facts(name, input_dir):
    """meta.json of model `name`. A fine-tuned model has its base's architecture, so before it
    exists (a group job that also trains it, a dry run) its base's facts stand in; a pretrained
    model's are estimated from its spec."""
    while True:
        path = os.path.join(paths.MODEL.format(model=name), "meta.json")
        if os.path.exists(path):
            return _read_json(path)
        spec = config["models"][name]
        if spec["source"] == "pretrain":
            return {**job_resources.pretrain_facts(spec, _vocab_size(spec)), "spec": spec}
        if spec["source"] != "finetune":
            raise _not_produced_yet(input_dir)
        name = spec["base"]


def _vocab_size(spec):
    """A pretrained model's vocabulary: at most its trained tokenizer's vocab_size, or the vocab_size in the
    config.json of the model whose tokenizer it borrows."""
    tokenizer = spec["tokenizer"]
    if isinstance(tokenizer, dict):
        return tokenizer["train"]["vocab_size"]
    directory = paths.MODEL.format(model=tokenizer)
    path = os.path.join(directory, "config.json")
    if not os.path.exists(path):
        raise _not_produced_yet(directory)
    return _read_json(path)["vocab_size"]


# ----------------------------------------------------------------- extract
def extract_mem_mb(wildcards, input, attempt):
    model = _model_facts(wildcards.model, input.model)
    return job_resources.extract_mem_mb(model, config["extraction"], attempt)


def extract_runtime(wildcards, input, attempt):
    settings = config["extraction"]
    rows = job_resources.split_rows(_dataset_sizes(input.dataset), settings["splits"], settings.get("max_examples"))
    return job_resources.extract_runtime(_model_facts(wildcards.model, input.model), rows, settings, attempt)


# ----------------------------------------------------------------- finetune
def finetune_mem_mb(wildcards, input, attempt):
    spec = config["models"][wildcards.model]
    return job_resources.finetune_mem_mb(_model_facts(spec["base"], input.base), spec, attempt)


def finetune_runtime(wildcards, input, attempt):
    spec = config["models"][wildcards.model]
    base = _model_facts(spec["base"], input.base)
    sizes = _dataset_sizes(input.dataset)
    n_train, n_validation = (job_resources.split_rows(sizes, [split]) for split in ("train", "validation"))
    return job_resources.finetune_runtime(base, spec, n_train, n_validation, attempt)


# ----------------------------------------------------------------- pretrain
def _pretrain_facts(wildcards):
    spec = config["models"][wildcards.model]
    return job_resources.pretrain_facts(spec, _vocab_size(spec)), spec


def pretrain_mem_mb(wildcards, attempt):  # no input: known from the config (a borrowed tokenizer's model aside)
    model, spec = _pretrain_facts(wildcards)
    return job_resources.pretrain_mem_mb(model, spec, attempt)


def pretrain_runtime(wildcards, input, attempt):
    model, spec = _pretrain_facts(wildcards)
    n_validation = job_resources.split_rows(_dataset_sizes(input.dataset), ["validation"])
    return job_resources.pretrain_runtime(model, spec, n_validation, attempt)


# ----------------------------------------------------------------- truncation and skip
def _evaluation(wildcards, input):
    """(model facts, rows of the evaluation split, rows the truncation heads train on, max length)."""
    model, settings = _model_facts(wildcards.model, input.model), config["finetune_eval"]
    sizes = _dataset_sizes(input.dataset)
    rows = job_resources.split_rows(sizes, [settings["split"]])
    head_train = job_resources.head_train_rows(job_resources.split_rows(sizes, ["train"]), settings.get("heads"))
    return model, rows, head_train, config["models"][wildcards.model]["max_length"]


def evaluation_mem_mb(wildcards, input, attempt):
    model, rows, head_train, max_length = _evaluation(wildcards, input)
    return job_resources.evaluation_mem_mb(model, rows, head_train, max_length,
                                           config["finetune_eval"]["batch_size"], attempt)


def truncation_runtime(wildcards, input, attempt):
    model, rows, head_train, max_length = _evaluation(wildcards, input)
    return job_resources.truncation_runtime(model, rows, head_train, max_length, attempt)


def skip_runtime(wildcards, input, attempt):
    model, rows, _, max_length = _evaluation(wildcards, input)
    return job_resources.skip_runtime(model, rows, max_length, attempt)


# ----------------------------------------------------------------- compare
def compare_mem_mb(wildcards, input, attempt):
    return job_resources.compare_mem_mb(_store_facts(input.a), _store_facts(input.b),
                                        config["similarity"]["split"], attempt)


def compare_runtime(wildcards, input, attempt):
    similarity = config["similarity"]
    draws = {label: {**spec, "null_permutations": spec["null_permutations"] or similarity["chance"]["permutations"],
                     "resamples": spec["resamples"] or similarity["intervals"]["resamples"]}
             for label, spec in config["measures"].items()}
    return job_resources.compare_runtime(_store_facts(input.a), _store_facts(input.b), similarity["split"], draws,
                                         attempt)


# ----------------------------------------------------------------- align
def _aligned_stores(input):
    """(a, b) store attributes of a pair job (align_layers, layer_injection); synthetic recovery
    (one store, mapped onto itself) gives b = job_resources.SYNTHETIC."""
    if "a" not in input.keys():
        return _store_facts(input.store), job_resources.SYNTHETIC
    return _store_facts(input.a), _store_facts(input.b)


def align_mem_mb(wildcards, input, attempt):
    a, b = _aligned_stores(input)
    return job_resources.align_mem_mb(a, b, config["similarity"]["split"], attempt)


def align_runtime(wildcards, input, attempt):
    a, b = _aligned_stores(input)
    return job_resources.align_runtime(a, b, config["align"], attempt)
