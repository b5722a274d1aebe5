"""Memory and compute time of each heavy rule's job, from its wildcards, the config and the facts of its
inputs (reprsim.workflow.facts): the bridge between a job and the formulas of reprsim.workflow.resources.

rules/resources.smk asks these with facts read from files (Snakemake's mem_mb and runtime, the cluster
profile's --mem and --time); `reprsim plan` asks the same with predicted facts before anything runs.
`COSTS` maps a rule to (mem_mb(facts, config, wildcards, attempt), seconds(facts, config, wildcards));
rules not in it are light (tables, figures, downloads): LIGHT_JOB. Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from reprsim.config import grounding_dataset
from reprsim.tables.layers import reference_pairs
from reprsim.workflow import brought, pair_work
from reprsim.workflow import resources as r
from reprsim.workflow.measures import pair_measures, with_draws
from reprsim.workflow.stitching import function_settings

LIGHT_JOB = {"mem_mb": 2000, "seconds": 0.0}  # the SLURM profile's default-resources at attempt 1


# ----------------------------------------------------------------- extract
def extract_mem_mb(facts, config, w, attempt):
    return r.extract_mem_mb(facts.model(w["model"]), config["extraction"], attempt)


def extract_seconds(facts, config, w):
    settings = config["extraction"]
    rows = r.split_rows(facts.dataset_sizes(w["dataset"]), settings["splits"], settings.get("max_examples"))
    return r.extract_seconds(facts.model(w["model"]), rows, settings)


# ----------------------------------------------------------------- finetune and pretrain
def finetune_mem_mb(facts, config, w, attempt):
    spec = config["models"][w["model"]]
    return r.finetune_mem_mb(facts.model(spec["base"]), spec, attempt)


def finetune_seconds(facts, config, w):
    spec = config["models"][w["model"]]
    sizes = facts.dataset_sizes(spec["dataset"])
    n_train, n_validation = (r.split_rows(sizes, [split]) for split in ("train", "validation"))
    return r.finetune_seconds(facts.model(spec["base"]), spec, n_train, n_validation)


def _pretrained(facts, config, w):
    spec = config["models"][w["model"]]
    return r.pretrain_facts(spec, facts.vocab_size(spec)), spec


def pretrain_mem_mb(facts, config, w, attempt):
    model, spec = _pretrained(facts, config, w)
    return r.pretrain_mem_mb(model, spec, attempt)


def pretrain_seconds(facts, config, w):
    model, spec = _pretrained(facts, config, w)
    n_validation = r.split_rows(facts.dataset_sizes(spec["dataset"]), ["validation"])
    return r.pretrain_seconds(model, spec, n_validation)


# ----------------------------------------------------------------- truncation and skip
def _evaluation(facts, config, w):
    """(model facts, rows of the evaluation split, rows the truncation heads train on, max length)."""
    spec, settings = config["models"][w["model"]], config["finetune_eval"]
    sizes = facts.dataset_sizes(spec["dataset"])
    rows = r.split_rows(sizes, [settings["split"]])
    head_train = r.head_train_rows(r.split_rows(sizes, ["train"]), settings.get("heads"))
    return facts.model(w["model"]), rows, head_train, spec["max_length"]


def evaluation_mem_mb(facts, config, w, attempt):
    model, rows, head_train, max_length = _evaluation(facts, config, w)
    return r.evaluation_mem_mb(model, rows, head_train, max_length, config["finetune_eval"]["batch_size"], attempt)


def truncation_seconds(facts, config, w):
    model, rows, head_train, max_length = _evaluation(facts, config, w)
    return r.truncation_seconds(model, rows, head_train, max_length)


def skip_seconds(facts, config, w):
    model, rows, _, max_length = _evaluation(facts, config, w)
    return r.skip_seconds(model, rows, max_length)


# ----------------------------------------------------------------- compare
def _pair_stores(facts, w):
    return facts.store(w["dataset"], w["model_a"]), facts.store(w["dataset"], w["model_b"])


GRAM_MEASURES = ("mutual_knn", "cknna")  # measures on n x n matrices whatever their params; CKA: rbf kernel, unbiased


def gram_budget_gb(config) -> float:
    """similarity.max_memory_gb when a configured measure works on n x n matrices, else 0."""
    for spec in config["measures"].values():
        params = spec.get("params") or {}
        if spec["measure"] in GRAM_MEASURES or (spec["measure"] == "cka" and (
                params.get("kernel") == "rbf" or params.get("estimator") == "unbiased")):
            return float(config["similarity"].get("max_memory_gb") or 0)
    return 0.0


def block_pairs(w) -> list[tuple[str, str]]:
    """The model pairs of a pair job (rule compare_pair): `w` carries them as "pairs" (a pair of blocks,
    reprsim.workflow.pair_blocks), or names one pair as model_a, model_b."""
    return [tuple(pair) for pair in w["pairs"]] if "pairs" in w else [(w["model_a"], w["model_b"])]


def compare_mem_mb(facts, config, w, attempt):
    """The largest of its pairs' memory, plus the terms of its other models, which the job keeps once read."""
    conditioned = any(spec.get("conditioning") not in (None, "none") for spec in config["measures"].values())
    pairs = block_pairs(w)
    largest = 0
    for a, b in pairs:
        a, b = facts.store(w["dataset"], a), facts.store(w["dataset"], b)
        largest = max(largest, r.compare_mem_mb(a, b, config["similarity"]["split"], attempt, gram_budget_gb(config),
                                                compared_rows(a, config, w["representation"]), conditioned))
    kept = sorted({model for pair in pairs for model in pair})[2:]  # beyond the two of the pair being computed
    return largest + sum(math.ceil(terms_bytes(facts, config, {**w, "model": m}) / 1e6) for m in kept)


def terms_mem_mb(facts, config, w, attempt):
    store = facts.store(w["dataset"], w["model"])
    return r.compare_mem_mb(store, store, config["similarity"]["split"], attempt, gram_budget_gb(config),
                            compared_rows(store, config, w["representation"]))


def compared_rows(store, config, representation: str) -> int:
    """Rows a pair job of `representation` compares: the split's examples, or at word level similarity.word's
    max_words (20 words a sentence where it is null: an estimate, the stores do not count words)."""
    sentences = store["split_sizes"].get(config["similarity"]["split"], 0)
    if representation != "word":
        return sentences
    return config["similarity"]["word"].get("max_words") or 20 * sentences


def _on_gpu(config) -> bool:
    """The pair rules ask for a GPU (similarity.device: cuda): their work is priced at a GPU's rates."""
    return config["similarity"].get("device") == "cuda"


def _layers(store) -> tuple[int, int]:
    return store["n_layers"] + 1, store["hidden_size"]


def terms_seconds(facts, config, w):
    store = facts.store(w["dataset"], w["model"])
    measures = pair_measures(config, w["representation"])
    resamples = max(spec["resamples"] for spec in with_draws(config, measures).values())
    return pair_work.terms_seconds(measures, *_layers(store), compared_rows(store, config, w["representation"]),
                                   resamples, gpu=_on_gpu(config))


def terms_bytes(facts, config, w) -> float:
    """Bytes of one model's terms store (reprsim.workflow.pair_work.terms_bytes)."""
    store = facts.store(w["dataset"], w["model"])
    measures = pair_measures(config, w["representation"])
    resamples = max(spec["resamples"] for spec in with_draws(config, measures).values())
    return pair_work.terms_bytes(measures, *_layers(store), compared_rows(store, config, w["representation"]),
                                 resamples)


def compare_seconds(facts, config, w):
    """The sum over its pairs."""
    measures = with_draws(config, pair_measures(config, w["representation"]))
    seconds = 0.0
    for a, b in block_pairs(w):
        a, b = facts.store(w["dataset"], a), facts.store(w["dataset"], b)
        seconds += pair_work.pair_seconds(measures, *_layers(a), *_layers(b),
                                          compared_rows(a, config, w["representation"]),
                                          memory_gb=config["similarity"].get("max_memory_gb"), gpu=_on_gpu(config))
    return seconds


def token_cka_mem_mb(facts, config, w, attempt):
    tokens = config["similarity"]["tokens"]
    return r.token_cka_mem_mb(*_pair_stores(facts, w), tokens["batch_size"], tokens["shifts"], attempt)


def token_cka_seconds(facts, config, w):
    tokens, a_b = config["similarity"]["tokens"], _pair_stores(facts, w)
    count = r.token_tokens(*a_b, config["similarity"]["split"], config["extraction"]["max_length"],
                           tokens.get("max_tokens"))
    return r.token_cka_seconds(*a_b, count, tokens["batch_size"], tokens["shifts"])


# ----------------------------------------------------------------- grounding
def measure_tests_seconds(facts, config, w):
    """One measure's grounding tests (reprsim.stages.grounding.measure_tests), as the pair-job work they are: its
    values with grounding.resamples half-samples and no null, for the models' last layers against each other (a
    model counts as one "layer"), each monotonicity model's layers against its own, and a layer against its
    deleted versions (Ding's grid, 14 widths). Seed-sibling cells and the shortcut matrix are left out: at most as
    much again. The probes are their own jobs (light)."""
    grounding = config["grounding"]
    dataset = grounding_dataset(config)
    spec = {**config["measures"][w["label"]], "null_permutations": 0,
            "resamples": grounding["resamples"] or config["similarity"]["intervals"]["resamples"]}
    one = {w["label"]: spec}
    stores = {m: facts.store(dataset, m) for m in brought.network_models(config["models"])}  # brought: no part
    n = next(iter(compared_rows(s, config, "mean") for s in stores.values()))
    widths: dict[int, int] = {}
    for store in stores.values():
        widths[store["hidden_size"]] = widths.get(store["hidden_size"], 0) + 1
    gpu = _on_gpu(config)
    seconds = sum(pair_work.pair_seconds(one, ca, da, cb, db, n, gpu=gpu)
                  for da, ca in widths.items() for db, cb in widths.items())
    for model in grounding["monotonicity_models"] or list(stores):
        seconds += pair_work.pair_seconds(one, *_layers(stores[model]), *_layers(stores[model]), n, gpu=gpu)
    if "deletion" in grounding["tests"]:
        for model in grounding["deletion"]["models"] or list(stores):
            width = stores[model]["hidden_size"]
            seconds += len(grounding["deletion"]["layers"]) * pair_work.pair_seconds(one, 1, width, 14, width, n,
                                                                                     gpu=gpu)
    return seconds


def measure_tests_mem_mb(facts, config, w, attempt):
    """The models' last layers and one model's layers in float64, twice over for the measure's work."""
    dataset = grounding_dataset(config)
    stores = [facts.store(dataset, m) for m in brought.network_models(config["models"])]
    n = compared_rows(stores[0], config, "mean")
    floats = sum(s["hidden_size"] for s in stores) * n + max(s["hidden_size"] * (s["n_layers"] + 1) for s in stores) * n
    return int((1000 + 2 * floats * 8 / 1e6) * attempt)


# ----------------------------------------------------------------- align
def _aligned_stores(facts, w):
    """(a, b) store facts of an aligner or injection job; synthetic recovery (wildcard `model`: one store,
    mapped onto itself) gives b = resources.SYNTHETIC."""
    if "model" in w:
        return facts.store(w["dataset"], w["model"]), r.SYNTHETIC
    return _pair_stores(facts, w)


def align_mem_mb(facts, config, w, attempt):
    return r.align_mem_mb(*_aligned_stores(facts, w), config["similarity"]["split"], attempt)


def align_seconds(facts, config, w):
    return r.align_seconds(*_aligned_stores(facts, w), config["align"])


# ----------------------------------------------------------------- stitching
def _stitch_settings(config, rule: str) -> Mapping:
    """The settings a stitch job runs under: the stitching section's, or for the universality study's functional
    sense (rule function_stitch) its own, on the study's similarity split, every reference layer, one seed."""
    return config["stitching"] if rule == "stitch" else function_settings(config)


def stitch_length(settings: Mapping, top: Mapping) -> int:
    """Tokens per row the stitched models see: the settings', else the top model's training spec's."""
    spec = top.get("spec", {})
    return (settings["max_length"] or settings["context"] or spec.get("max_length") or spec.get("context")
            or 128)


def _stitched(facts, w):
    return facts.model(w["model_a"]), facts.model(w["model_b"])


def _stitch_mem_mb(rule: str):
    def mem_mb(facts, config, w, attempt):
        settings, (bottom, top) = _stitch_settings(config, rule), _stitched(facts, w)
        return r.stitch_mem_mb(bottom, top, settings["batch_size"], stitch_length(settings, top), attempt)
    return mem_mb


def _stitch_seconds(rule: str):
    def seconds(facts, config, w):
        settings, (bottom, top) = _stitch_settings(config, rule), _stitched(facts, w)
        if settings["layers"] == "reference":  # each top layer from one bottom layer, or the two around it
            placed = len(reference_pairs(bottom["n_layers"], top["n_layers"]))
        else:
            placed = bottom["n_layers"]
        maps = len([phi for phi in settings["phi"] if phi != "identity"]) * placed * len(settings["seeds"])
        rows = facts.dataset_sizes(w["dataset"]).get(settings["split"], 0)
        rows = min(rows, settings["max_examples"] or rows)
        return r.stitch_seconds(bottom, top, maps, settings["steps"], settings["batch_size"],
                                stitch_length(settings, top), rows)
    return seconds


Cost = tuple[Callable[..., int], Callable[..., float]]
COSTS: dict[str, Cost] = {
    "extract_activations": (extract_mem_mb, extract_seconds),
    "finetune_model": (finetune_mem_mb, finetune_seconds),
    "pretrain_model": (pretrain_mem_mb, pretrain_seconds),
    "truncation": (evaluation_mem_mb, truncation_seconds),
    "skip": (evaluation_mem_mb, skip_seconds),
    "model_terms": (terms_mem_mb, terms_seconds),
    "compare_pair": (compare_mem_mb, compare_seconds),
    "token_cka": (token_cka_mem_mb, token_cka_seconds),
    "align_layers": (align_mem_mb, align_seconds),
    "layer_injection": (align_mem_mb, align_seconds),
    "synthetic_recovery": (align_mem_mb, align_seconds),
    "stitch": (_stitch_mem_mb("stitch"), _stitch_seconds("stitch")),
    "function_stitch": (_stitch_mem_mb("function_stitch"), _stitch_seconds("function_stitch")),
    "measure_tests": (measure_tests_mem_mb, measure_tests_seconds),
}
