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


ALIGN = config["align"]
ALIGN_PAIRS = (
    sorted({tuple(sorted(pair)) for pair in ALIGN["pairs"]}) if ALIGN["pairs"] is not None
    else [(a, b) for a, b in PAIRS if a != b]
) if ALIGN["enabled"] else []
# Layer injection: models fine-tuned from the same base on the same dataset, each unordered pair once.
INJECTION_PAIRS = [
    (a, b) for a, b in PAIRS if a < b and a in FINETUNED and b in FINETUNED
    and all(config["models"][a][key] == config["models"][b][key] for key in ("base", "dataset"))
    and config["models"][a]["dataset"] in EXTRACT_ON
] if ALIGN["enabled"] and ALIGN["injection"] else []


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


def dataset_spec(name):
    """What the prepared table depends on: the spec without `metric`, which only chooses what figures show."""
    return canonical({k: v for k, v in config["datasets"][name].items() if k != "metric"})


def local_dataset_files(wildcards):
    """A local dataset's files, so that editing one re-prepares the dataset."""
    spec = config["datasets"][wildcards.dataset]
    if spec["source"] != "local":
        return []
    return [os.path.join(spec["data_root"], path) for path in spec["files"].values()]


def model_spec(wildcards):
    return canonical(config["models"][wildcards.model])


def materialize_inputs(wildcards):
    spec = config["models"][wildcards.model]
    return {"tokenizer": model_dir(spec["tokenizer"])} if spec["source"] == "init" else {}


def finetune_inputs(wildcards):
    spec = config["models"][wildcards.model]
    return {"base": model_dir(spec["base"]), "dataset": dataset_dir(spec["dataset"])}


def task_metric(model):
    """The score a fine-tuned model's figures show: its dataset's `metric`."""
    return config["datasets"][config["models"][model]["dataset"]]["metric"]


def siblings(model):
    """Models fine-tuned exactly like `model` (same base, data, settings) but from another seed."""
    def recipe(name):
        return {k: v for k, v in config["models"][name].items() if k != "seed"}

    return [m for m in FINETUNED if m != model and recipe(m) == recipe(model)]


def layer_view_stores(wildcards):
    """The stores a fine-tuned model's layer views read: its own, its base's, its siblings'."""
    spec = config["models"][wildcards.model]
    names = [wildcards.model, spec["base"], *siblings(wildcards.model)]
    return {name: store(spec["dataset"], name) for name in names}


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


def all_layer_views():
    if not config["finetune_eval"]["layer_views"]:
        return []
    return [f"results/finetune/{m}/layer_views.parquet" for m in FINETUNED]


def all_layer_view_figures():
    return [t.replace("results/finetune/", "results/figures/finetune/").replace(".parquet", ".png")
            for t in all_layer_views()]


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


def aligner_specs():
    """label -> (aligner name, params), as reprsim.align takes them."""
    return {label: (spec["aligner"], spec["params"]) for label, spec in ALIGN["aligners"].items()}


def align_splits():
    return {role: config["alignment"][f"{role}_split"] for role in ("fit", "select", "score")}


def align_table(dataset, a, b):
    return f"results/align/{ALIGN['representation']}/{dataset}/{a}__{b}.parquet"


def all_align_tables():
    return [align_table(d, a, b) for d in EXTRACT_ON for a, b in ALIGN_PAIRS]


def all_align_figures():
    return [t.replace("results/align/", "results/figures/align/").replace(".parquet", ".png")
            for t in all_align_tables()]


def all_synthetic_tables():
    if not ALIGN["enabled"]:
        return []
    return [f"results/align/synthetic/{d}/{m}.parquet" for d in EXTRACT_ON for m in ALIGN["synthetic"]["models"]]


def all_injection_tables():
    return [f"results/align/injection/{config['models'][a]['dataset']}/{a}__{b}.parquet" for a, b in INJECTION_PAIRS]


def all_targets():
    return ["results/report/index.html"]


# ----------------------------------------------------------------- job resources
# Memory (mem_mb, MB) and wall time (runtime, minutes) of the heavy rules, estimated from what a
# job processes -- model parameters, examples, tokens, read from its inputs' meta.json or Zarr
# attributes -- and multiplied by `attempt`, so each retry (--retries) asks for more. Until an
# input exists (a dry run of a fresh workflow) Snakemake shows <TBD>, and evaluates again when
# the job is ready. Locally they bind only under --resources mem_mb=N; on SLURM they become
# --mem and --time. GPU rules declare gpu=1 beside these; where GPU jobs run (partition) is
# the cluster profile's business: profiles/slurm/config.yaml, whose set-resources lists them.
import errno
import math

MODEL_FLOPS = 1e12  # sustained FLOP/s assumed for a model job on one GPU (a modest one, well below peak)
CORE_FLOPS = 1e10  # sustained float64 FLOP/s of one core, for the pairwise measures
MIN_MINUTES = 5  # floor per job: start-up, loading, writing


def _facts(directory, name="meta.json"):
    """meta.json of a model or dataset directory, or a Zarr store's attributes (name="zarr.json")."""
    path = os.path.join(str(directory), name)
    if not os.path.exists(path):
        # not produced yet: Snakemake reads a FileNotFoundError that names an input as <TBD>
        raise FileNotFoundError(errno.ENOENT, "not produced yet", str(directory))
    with open(path) as handle:
        facts = json.load(handle)
    return facts["attributes"] if name == "zarr.json" else facts


def _model_facts(name, input_dir):
    """meta.json of model `name`. A fine-tuned model has its base's architecture, so before it
    exists (a group job that also trains it, a dry run) its base's facts stand in."""
    while True:
        path = os.path.join(model_dir(name), "meta.json")
        if os.path.exists(path):
            with open(path) as handle:
                return json.load(handle)
        if config["models"][name]["source"] != "finetune":
            raise FileNotFoundError(errno.ENOENT, "not produced yet", str(input_dir))
        name = config["models"][name]["base"]


def _rows(dataset, splits, cap=None):
    sizes = _facts(dataset)["sizes"]
    return sum(min(sizes.get(split, 0), cap or sizes.get(split, 0)) for split in splits)


def _weights_mb(model, copies):
    """float32 parameters; copies = 4 for training (weights, gradients, two Adam moments)."""
    return copies * 4 * model["n_parameters"] / 1e6


def _activations_mb(model, batch_size, max_length, copies):
    """Hidden states of every layer for one batch."""
    return copies * 4 * (model["n_layers"] + 1) * batch_size * max_length * model["hidden_size"] / 1e6


def _minutes(flops, rate, attempt):
    return int(math.ceil((MIN_MINUTES + flops / rate / 60) * attempt))


def extract_mem_mb(wildcards, input, attempt):
    model, settings = _model_facts(wildcards.model, input.model), config["extraction"]
    return int((2000 + _weights_mb(model, 2) + _activations_mb(model, settings["batch_size"],
                                                               settings["max_length"], 3)) * attempt)


def extract_runtime(wildcards, input, attempt):
    settings = config["extraction"]
    tokens = _rows(input.dataset, settings["splits"], settings.get("max_examples")) * settings["max_length"]
    return _minutes(2 * _model_facts(wildcards.model, input.model)["n_parameters"] * tokens, MODEL_FLOPS, attempt)


def _finetune_steps(spec, dataset):
    """reprsim.finetune.training_steps, restated: importing it would load torch whenever the DAG is built."""
    if spec.get("steps") is not None:
        return spec["steps"]
    if spec.get("epochs") is not None:
        return max(1, math.ceil(spec["epochs"] * _rows(dataset, ["train"]) / spec["batch_size"]))
    return 300


def finetune_mem_mb(wildcards, input, attempt):
    spec = config["models"][wildcards.model]
    base = _model_facts(spec["base"], input.base)
    return int((2500 + _weights_mb(base, 4) + _activations_mb(base, spec["batch_size"], spec["max_length"], 12))
               * attempt)


def finetune_runtime(wildcards, input, attempt):
    spec = config["models"][wildcards.model]
    base = _model_facts(spec["base"], input.base)
    tokens = _finetune_steps(spec, input.dataset) * spec["batch_size"] * spec["max_length"]
    evaluation = _rows(input.dataset, ["validation"]) * spec["max_length"]
    return _minutes(base["n_parameters"] * (6 * tokens + 2 * evaluation), MODEL_FLOPS, attempt)


def _evaluation(wildcards, input):
    """(model facts, rows of the evaluation split, rows the truncation heads train on, max length)."""
    model, settings = _model_facts(wildcards.model, input.model), config["finetune_eval"]
    heads = settings.get("heads") or {}
    train = 0
    if heads.get("enabled", False):
        train = min(_rows(input.dataset, ["train"]), heads.get("max_train_examples") or math.inf)
    return model, _rows(input.dataset, [settings["split"]]), train, config["models"][wildcards.model]["max_length"]


def evaluation_mem_mb(wildcards, input, attempt):
    """Truncation and skip: the fine-tuned model (and for truncation heads, its base), one batch of
    activations, and every layer's head inputs of the rows the heads train and score on."""
    model, rows, train, max_length = _evaluation(wildcards, input)
    head_inputs = 2 * 4 * (model["n_layers"] + 1) * (rows + train) * model["hidden_size"] / 1e6
    batch = config["finetune_eval"]["batch_size"]
    return int((2000 + _weights_mb(model, 2) + _activations_mb(model, batch, max_length, 3) + head_inputs) * attempt)


def truncation_runtime(wildcards, input, attempt):
    model, rows, train, max_length = _evaluation(wildcards, input)
    passes = rows + 2 * (rows + train) if train else rows  # untuned; TUNED and TUNEDORIG features
    return _minutes(2 * model["n_parameters"] * passes * max_length, MODEL_FLOPS, attempt)


def skip_runtime(wildcards, input, attempt):
    model, rows, _, max_length = _evaluation(wildcards, input)
    spans = 1 + model["n_layers"] * (model["n_layers"] + 1) // 2
    return _minutes(2 * model["n_parameters"] * rows * spans * max_length, MODEL_FLOPS, attempt)


def _pair_sizes(input):
    """(rows in the stores, rows compared, summed layer widths of a and of b)."""
    a, b = _facts(input.a, "zarr.json"), _facts(input.b, "zarr.json")
    compared = a["split_sizes"].get(config["similarity"]["split"], 0)
    widths = [(s["n_layers"] + 1) * s["hidden_size"] for s in (a, b)]
    return max(a["n_examples"], b["n_examples"]), compared, widths


def compare_mem_mb(wildcards, input, attempt):
    """Both models' pooled rows in float64 (a few copies) and a few Gram matrices."""
    rows, compared, widths = _pair_sizes(input)
    return int((2000 + 3 * 8 * rows * sum(widths) / 1e6 + 4 * 8 * compared ** 2 / 1e6) * attempt)


def compare_runtime(wildcards, input, attempt):
    """Every measure for every layer pair (a null costs about a tenth of a measure per permutation),
    plus the linear maps."""
    rows, compared, widths = _pair_sizes(input)
    measures = sum(1 + spec.get("null_permutations", 0) / 10 for spec in config["measures"].values())
    flops = 2 * compared * widths[0] * widths[1] * measures + 2 * rows * sum(w * w for w in widths)
    return _minutes(flops, CORE_FLOPS, attempt)


def _aligner_passes():
    """Passes over the fit rows, summed over the configured aligners: a trained network's epochs
    (100 when not given), a few for the closed-form ones."""
    return sum(spec.get("params", {}).get("epochs", 100) if spec["aligner"] in ("inn", "mlp") else 3
               for spec in config.get("align", {}).get("aligners", {}).values())


def align_mem_mb(wildcards, input, attempt):
    """Aligners and injection (rules/align.smk): both models' pooled rows, like a pair job."""
    if "a" not in input.keys():  # synthetic recovery: one store, mapped onto itself
        facts = _facts(input.store, "zarr.json")
        return int((2000 + 3 * 8 * facts["n_examples"] * 2 * facts["hidden_size"] / 1e6) * attempt)
    return compare_mem_mb(wildcards, input, attempt)


def align_runtime(wildcards, input, attempt):
    """Every aligner fit on every aligned layer pair, a dense network's cost per pass (both directions)."""
    if "a" not in input.keys():
        facts = _facts(input.store, "zarr.json")
        stores, layer_pairs = [facts, facts], len(config["align"]["synthetic"].get("map_seeds", [0])) * len(
            config["align"]["synthetic"].get("layers", [-1]))
    else:
        stores = [_facts(input.a, "zarr.json"), _facts(input.b, "zarr.json")]
        depths = [s["n_layers"] + 1 for s in stores]
        layer_pairs = depths[0] * depths[1] if config["align"].get("layers") == "all" else max(depths)
    rows = max(s["n_examples"] for s in stores)
    width = sum(s["hidden_size"] for s in stores)
    flops = 2 * 6 * rows * width ** 2 * layer_pairs * _aligner_passes()
    return _minutes(flops, MODEL_FLOPS, attempt)
