# Names, pairs and targets derived from the config, and the code each rule declares as input.
# Runs whenever the DAG is built, so it stays torch-free. Results paths: reprsim.workflow.paths.
import functools
import glob
import json
import os
import re
from itertools import combinations_with_replacement

from reprsim.config import first_label
from reprsim.design.dataset_labels import dataset_is_labelled
from reprsim.design.dimension_placebo import dimension_placebos
from reprsim.design.relations import competence_checkpoints, recipe
from reprsim.workflow import measures as workflow_measures
from reprsim.workflow.measures import view_label
from reprsim.workflow import paths
from reprsim.workflow import brought
from reprsim.workflow import pair_blocks
from reprsim.workflow.codedeps import code_dependencies
from reprsim.workflow.stitching import function_plan, function_settings
from reprsim.workflow import slurm as slurm_controller

# Threads of the model rules (fine-tuning, extraction, truncation, skipping, stitching, aligners). Measured on this
# project's 2-core machine, a second thread gains a job 1.0-1.6× (docs/benchmarks.md, "Both cores busy"), less than a second
# job running beside it, so each takes one core while there are few; a bigger machine gives them more.
JOB_THREADS = max(1, (workflow.cores or 1) // 4)

DATASETS = sorted(config["datasets"])
MODELS = sorted(config["models"])
FINETUNED = sorted(m for m in MODELS if config["models"][m]["source"] == "finetune")
PRETRAINED = sorted(m for m in MODELS
                    if config["models"][m]["source"] == "pretrain" and "checkpoint" not in config["models"][m])
# a pretrained model's checkpoints (models.NAME.checkpoints: models NAME@STEP, whose spec has `checkpoint`) -> the model
CHECKPOINT_OF = {m: m.rsplit("@", 1)[0] for m in MODELS
                 if config["models"][m]["source"] == "pretrain" and "checkpoint" in config["models"][m]}
# models given as stored activations (source: activations): no network, no results/models directory; their store is
# imported (rule import_activations) on their own dataset, and they take part in the pairs of their pooling only
BROUGHT = brought.brought_models(config["models"])
# each model is made by exactly one rule: finetune_model, pretrain_model, checkpoint_model (a copy out of its
# pretrained model's directory), or materialize_model for the rest but the brought ones, which have none
MATERIALIZED = sorted(m for m in MODELS if m not in FINETUNED and m not in PRETRAINED and m not in CHECKPOINT_OF
                      and m not in BROUGHT)
# the models that have a network (and a results/models directory): extraction runs them
NETWORKED = brought.network_models(config["models"], MODELS)
EXTRACT_ON = sorted(config["extraction"]["datasets"])
REPRESENTATIONS = sorted(config["similarity"]["representations"])
# Unordered pairs, each model with itself included; names sorted so a pair has one path.
PAIRS = list(combinations_with_replacement(MODELS, 2))
DISTINCT_PAIRS = [(a, b) for a, b in PAIRS if a != b]


def unordered(pairs):
    """Configured [a, b] pairs as sorted name tuples, each once (the order a pair's paths use)."""
    return sorted({tuple(sorted(pair)) for pair in pairs})


ALIGN = config["align"]
ALIGN_PAIRS = brought.taking_part(config["models"], (
    unordered(ALIGN["pairs"]) if ALIGN["pairs"] is not None else DISTINCT_PAIRS
), ALIGN["representation"]) if ALIGN["enabled"] else []
# Layer injection: models fine-tuned from the same base on the same dataset, each unordered pair once.
INJECTION_PAIRS = [
    (a, b) for a, b in PAIRS if a < b and a in FINETUNED and b in FINETUNED
    and all(config["models"][a][key] == config["models"][b][key] for key in ("base", "dataset"))
    and config["models"][a]["dataset"] in EXTRACT_ON
] if ALIGN["enabled"] and ALIGN["injection"] else []


def _one_of(names):
    # An empty alternation would match everything; (?!) matches nothing.
    return "|".join(re.escape(n) for n in names) or "(?!)"


# A job Snakemake runs in another process than its own (submitted to a cluster: `--mode remote`, or a job step)
# never touches the network: compute nodes often have no route out, and every hub download is a local rule of the
# main process (rules/hub.smk). Its libraries then read the hub cache alone; the local rules keep the user's setting.
if not workflow.is_main_process:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"


# Under the SLURM executor the submitting Snakemake waits for the controller before its first submission
# (reprsim.workflow.slurm): sbatch gives up within seconds, and each refusal would cost a job one of its retries.
onstart:
    plugin = workflow.executor_plugin
    if workflow.is_main_process and plugin is not None and plugin.cli_prefix == "slurm":
        try:
            slurm_controller.wait_for_controller(slurm_controller.wait_seconds())
        except (slurm_controller.ControllerUnreachable, ValueError) as error:
            raise WorkflowError(str(error)) from None


# Pair work in blocks (similarity.block_size, reprsim.workflow.pair_blocks): one pair job per pair of blocks of
# models, named by their model for blocks of one.
BLOCK_SIZE = pair_blocks.block_size(config["similarity"]["block_size"], len(MODELS))
BLOCKS = pair_blocks.blocks(list(config["models"]), BLOCK_SIZE)


wildcard_constraints:
    dataset=_one_of(DATASETS),
    block_a=_one_of(BLOCKS),
    block_b=_one_of(BLOCKS),
    model=_one_of(MODELS),
    model_a=_one_of(MODELS),
    model_b=_one_of(MODELS),
    representation=_one_of(sorted({*REPRESENTATIONS, "cls"})),


def canonical(value):
    """Params as sorted JSON: equal settings give equal strings, so no spurious reruns."""
    return json.dumps(value, sort_keys=True)


def workflow_file(*parts):
    """A file of this checkout, relative to the working directory: Snakemake records input paths
    as given, so an absolute path would make a moved or renamed checkout rerun every job."""
    return os.path.relpath(os.path.join(workflow.basedir, *parts))


def code(script):
    """A rule's script and every reprsim module it imports, declared as input so that a
    real edit reruns the rule (Snakemake compares content: a touch does nothing)."""
    return list(code_dependencies(workflow_file("scripts", f"{script}.py"), workflow_file("src")))


def model_dir(name):
    return paths.MODEL.format(model=name)


def dataset_dir(name):
    return paths.DATASET.format(dataset=name)


def store(dataset, model):
    return paths.STORE.format(dataset=dataset, model=model)


def per_model(template, models):
    return [template.format(model=m) for m in models]


def per_pair(template, representations, datasets, pairs):
    """`template` for every representation, dataset and pair of `pairs` whose models have a store on that dataset
    (a brought model only on its own)."""
    return [template.format(representation=r, dataset=d, model_a=a, model_b=b)
            for r in representations for d in datasets for a, b in brought.taking_part(config["models"], pairs,
                                                                                      dataset=d)]


def stores_on(dataset, models=MODELS):
    """Those of `models` with an activation store on `dataset` (a brought model only on its own)."""
    return brought.with_store(config["models"], models, dataset)


# The pairs each representation compares: similarity.pairs (null: every pair, self pairs too), except that
# similarity.word.pairs may name fewer for word level (its pair jobs cost more: n words instead of n sentences).
COMPARED_PAIRS = unordered(config["similarity"]["pairs"]) if config["similarity"]["pairs"] is not None else PAIRS
WORD_PAIRS = config["similarity"]["word"]["pairs"]
# A brought model (source: activations) is compared at its pooling only: the pairs of other representations, word
# level included, leave it out.
PAIRS_OF = {r: brought.taking_part(config["models"], unordered(WORD_PAIRS) if r == "word" and WORD_PAIRS is not None
                                   else COMPARED_PAIRS, r)
            for r in REPRESENTATIONS}


def siblings(model):
    """Models fine-tuned exactly like `model` (same base, data, settings) but from another seed."""
    return [m for m in FINETUNED if m != model and recipe(config["models"][m]) == recipe(config["models"][model])]


# Layer views (finetune_eval.layer_views; Phang et al. 2021, §3): CLS-token linear CKA between the layers of a
# fine-tuned model, its base and its seed siblings, computed by pair jobs of representation "cls" like any other
# pair (the same null, interval and per-model terms), with the configured linear CKA's draws.
VIEW_LABEL = view_label(config)
VIEWS = workflow_measures.VIEWS


def view_pairs(model):
    """The (sorted) model pairs of a fine-tuned model's views: ORIG–ORIG, FT–ORIG, FT–FT, FT[a]–FT[b]."""
    base = config["models"][model]["base"]
    return unordered([(base, base), (model, base), (model, model), *((model, s) for s in siblings(model))])


def view_tables(model, template):
    """`template` (pair table or replicates) of the pair jobs that compute a fine-tuned model's layer views' pairs."""
    return pair_tables(template, VIEWS, config["models"][model]["dataset"], view_pairs(model))


@functools.cache
def compared_pairs(representation, dataset):
    """The sorted model pairs whose tables of `representation` on `dataset` the pair jobs write."""
    pairs = set(PAIRS_OF.get(representation, [])) if dataset in EXTRACT_ON else set()
    if representation == VIEWS:  # the layer views' pairs
        pairs.update(pair for model in EVALUATED["layer_views"] if config["models"][model]["dataset"] == dataset
                     for pair in view_pairs(model))
    return pairs


@functools.cache
def pair_blocks_of(representation, dataset):
    """reprsim.workflow.pair_blocks.PairBlocks: the pairs of `representation` on `dataset` by the job computing them."""
    return pair_blocks.PairBlocks(BLOCKS, brought.taking_part(config["models"], sorted(compared_pairs(
        representation, dataset)), dataset=dataset))


def pair_tables(template, representation, dataset, pairs):
    """`template` (PAIR_TABLE or PAIR_RESAMPLES) of the pair jobs that compute `pairs`, each job once."""
    blocked = pair_blocks_of(representation, dataset)
    keys = dict.fromkeys(blocked.key(a, b) for a, b in pairs)
    return [template.format(representation=representation, dataset=dataset, block_a=x, block_b=y) for x, y in keys]


def per_compared_pair(template):
    """`template` (pair tables) of every representation, extracted dataset and pair that representation compares."""
    return [path for r in REPRESENTATIONS for d in EXTRACT_ON
            for path in pair_tables(template, r, d, brought.taking_part(config["models"], PAIRS_OF[r], dataset=d))]


def per_compared_pair_figure(template):
    """`template` (a per-pair figure) for every representation, extracted dataset and pair that it compares."""
    return [path for r in REPRESENTATIONS for path in per_pair(template, [r], EXTRACT_ON, PAIRS_OF[r])]


def aligner_specs():
    """label -> (aligner name, params), as reprsim.aligners takes them."""
    return {label: (spec["aligner"], spec["params"]) for label, spec in ALIGN["aligners"].items()}


def task_metric(model):
    """The score a fine-tuned model's figures show: its dataset's `metric`."""
    return config["datasets"][config["models"][model]["dataset"]]["metric"]


# ----------------------------------------------------------------- targets
EVALUATED = {evaluation: FINETUNED if config["finetune_eval"][evaluation] else []
             for evaluation in ("truncation", "skip", "layer_views")}
DISTANCES = config["report"]["distance_measure"] in config["measures"]
LOCALIZATION = bool(first_label(config["measures"], "neuronsim") and first_label(config["measures"], "svcca"))

TARGETS = {
    "datasets": [dataset_dir(d) for d in DATASETS],
    "models": [model_dir(m) for m in NETWORKED],
    "stores": [store(d, m) for d in EXTRACT_ON for m in stores_on(d)],
    "findings": [paths.FINDINGS],
    "pair_summary": paths.PAIR_SUMMARY,
    "pairs": paths.PAIRS,
    "model_summary_figures": [paths.MODEL_SUMMARY_FIGURE.format(representation=r, dataset=d)
                              for r in REPRESENTATIONS for d in EXTRACT_ON],
    # per-pair heatmaps while pairs are computed one per job; with larger blocks `reprsim heatmap` draws a pair's
    # on demand (its figure jobs would grow like the pairs)
    "heatmaps": per_compared_pair_figure(paths.PAIR_HEATMAP) if BLOCK_SIZE == 1 else [],
    "model_distances": [paths.MODEL_DISTANCES] if DISTANCES else [],
    "model_distance_figure": [paths.MODEL_DISTANCE_FIGURE] if DISTANCES else [],
    "localization": [paths.LOCALIZATION] if LOCALIZATION else [],
    "localization_figure": [paths.LOCALIZATION_FIGURE] if LOCALIZATION else [],
    "truncation_tables": per_model(paths.TRUNCATION_TABLE, EVALUATED["truncation"]),
    "truncation_figures": per_model(paths.TRUNCATION_FIGURE, EVALUATED["truncation"]),
    "skip_tables": per_model(paths.SKIP_TABLE, EVALUATED["skip"]),
    "skip_figures": per_model(paths.SKIP_FIGURE, EVALUATED["skip"]),
    "layer_views": per_model(paths.LAYER_VIEWS_TABLE, EVALUATED["layer_views"]),
    "layer_blocks": per_model(paths.LAYER_BLOCKS_TABLE, EVALUATED["layer_views"]),
    "layer_view_figures": per_model(paths.LAYER_VIEWS_FIGURE, EVALUATED["layer_views"]),
    "aligner_tables": per_pair(paths.ALIGNER_TABLE, [ALIGN["representation"]], EXTRACT_ON, ALIGN_PAIRS),
    "aligner_figures": per_pair(paths.ALIGNER_FIGURE, [ALIGN["representation"]], EXTRACT_ON, ALIGN_PAIRS),
    "synthetic_tables": [paths.SYNTHETIC_TABLE.format(dataset=d, model=m) for d in EXTRACT_ON
                         for m in stores_on(d, ALIGN["synthetic"]["models"])] if ALIGN["enabled"] else [],
    "injection_tables": [paths.INJECTION_TABLE.format(dataset=config["models"][a]["dataset"], model_a=a, model_b=b)
                         for a, b in INJECTION_PAIRS],
}


# Token-level minibatch CKA (similarity.tokens): each configured pair once, names sorted, on every extracted
# dataset.
TOKEN_PAIRS = unordered(config["similarity"]["tokens"]["pairs"]) if config["similarity"].get("tokens") else []
TOKEN_TABLES = [paths.TOKEN_TABLE.format(dataset=d, model_a=a, model_b=b) for d in EXTRACT_ON for a, b in TOKEN_PAIRS]
TARGETS["token_tables"] = [paths.TOKEN_TABLES] if TOKEN_PAIRS else []

# Attention similarity (similarity.attention): the configured pairs (null: every pair of distinct models).
ATTENTION_SETTINGS = config["similarity"]["attention"]
ATTENTION_PAIRS = ([] if not ATTENTION_SETTINGS else unordered(ATTENTION_SETTINGS["pairs"])
                   if ATTENTION_SETTINGS["pairs"] is not None  # a brought model has no attention maps
                   else [(a, b) for a, b in DISTINCT_PAIRS if a in NETWORKED and b in NETWORKED])
ATTENTION_DETAIL = bool(ATTENTION_SETTINGS and ATTENTION_SETTINGS["detail_layers"])


def per_attention_pair(template):
    return [template.format(dataset=d, model_a=a, model_b=b) for d in EXTRACT_ON for a, b in ATTENTION_PAIRS]


# The models whose word rows or attention maps some job reads: the word-level pairs' (compare_pair and model_terms
# at representation word) and the attention pairs'. Only their stores get extraction.detail_splits; the others'
# would hold several times their pooled arrays' size that nothing reads.
DETAIL_MODELS = sorted({model for pair in [*PAIRS_OF.get("word", []), *ATTENTION_PAIRS] for model in pair})


def extraction_settings(model):
    """extraction's settings for one model's store: the detail splits only where DETAIL_MODELS says they are read."""
    settings = config["extraction"] | {"datasets": None}
    return settings if model in DETAIL_MODELS else settings | {"detail_splits": []}


TARGETS.update({
    "attention": [paths.ATTENTION] if ATTENTION_PAIRS else [],
    "attention_heatmaps": per_attention_pair(paths.ATTENTION_HEATMAP),
    "attention_head_figures": per_attention_pair(paths.ATTENTION_HEADS_FIGURE) if ATTENTION_DETAIL else [],
    "attention_layer_figures": [paths.ATTENTION_LAYERS_FIGURE.format(dataset=d) for d in EXTRACT_ON]
                               if ATTENTION_PAIRS else [],
})


def all_targets():
    return [paths.REPORT]
