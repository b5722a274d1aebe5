# Stage grounding: which measure to believe (Ding et al. 2021; ReSi, Klabunde et al. 2024). Each configured
# measure's scores on tests of sensitivity and specificity, on this configuration's models, with half-sample
# intervals (reprsim.stages.grounding; docs/numerics.md §13), then all measures ranked in one table.
from itertools import combinations

from reprsim.config import grounding_dataset
from reprsim.design.relations import seed_families

GROUNDING = config["grounding"]
GROUNDING_DATASET = grounding_dataset(config)
SHORTCUT_DATASET = GROUNDING["shortcut_dataset"]
GROUNDING_SPLIT = config["similarity"]["split"]
GROUNDING_REPRESENTATION = GROUNDING["representation"] or next(
    (r for r in config["similarity"]["representations"] if r in ("mean", "cls", "last")), "mean")
GROUNDED = list(GROUNDING["measures"] or config["measures"]) if GROUNDING["enabled"] else []
# the deletion and layer tests' probes train on the train rows: without them extracted both are left out (the report
# says so)
GROUNDING_TESTS = [t for t in GROUNDING["tests"]
                   if t not in ("deletion", "layer") or "train" in config["extraction"]["splits"]]
# the models the tests compare: those with a network (brought models, source activations, take no part: the tests
# read their own representation and split, probes and predictions, which a brought model need not have)
GROUNDING_MODELS = NETWORKED
# the trained models (random initialisations left out, as ReSi's seed models): monotonicity, Ding's layer and
# specificity tests compare their layers with their own and their seed siblings'; deletion's default
TRAINED = [m for m in GROUNDING_MODELS if config["models"][m]["source"] != "init"]
MONOTONIC = GROUNDING["monotonicity_models"] or TRAINED
# the prediction test correlates over the seed siblings of one recipe fine-tuned on the grounding dataset (the largest
# family, or grounding.prediction.models) and, descriptive, over all of them; it needs three models (three pairs)
TUNED_HERE = [m for m in FINETUNED if config["models"][m]["dataset"] == GROUNDING_DATASET]
PREDICTION_FAMILY = GROUNDING["prediction"]["models"] or (seed_families(config["models"], TUNED_HERE) or [[]])[0]
PREDICTED = (TUNED_HERE if GROUNDING["prediction"]["all_recipes"] else PREDICTION_FAMILY) \
    if GROUNDED and "prediction" in GROUNDING_TESTS else []
PREDICTED = PREDICTED if len(PREDICTED) >= 3 else []
# the models fine-tuned with a shortcut are compared on grounding.shortcut_dataset (ReSi's test 4)
SHORTCUT_MODELS = [m for m in FINETUNED if config["models"][m].get("shortcut")] if SHORTCUT_DATASET else []
DELETED = ((GROUNDING["deletion"]["models"] or TRAINED) if "deletion" in GROUNDING_TESTS else []) if GROUNDED else []
# the deletion test checks each fine-tuned model's undeleted probe against its own head: their outputs too
PREDICTED = list(dict.fromkeys(PREDICTED + [m for m in DELETED if m in TUNED_HERE]))
# a probe job per model: every layer at k = 0 (Ding's layer test) and the deleted versions of the deletion models
PROBED = list(dict.fromkeys(DELETED + (MONOTONIC if GROUNDED and "layer" in GROUNDING_TESTS else [])))


def grounding_resamples(label):
    """grounding.resamples, or where null the half-samples the pair jobs draw for `label` (its own or
    similarity.intervals'), whose first ones the tests' are: the tests read the pair jobs' values."""
    computed = workflow_measures.with_draws(config, pair_measures(GROUNDING_REPRESENTATION)).get(label)
    return GROUNDING["resamples"] or (computed or {}).get("resamples") or config["similarity"]["intervals"]["resamples"]


def grounding_setup(label=None):
    """What reprsim.stages.grounding.measure_tests.Setup takes besides paths: as params, so a change reruns."""
    return {"representation": GROUNDING_REPRESENTATION, "split": GROUNDING_SPLIT, "train_split": "train",
            "tests": GROUNDING_TESTS, "resamples": grounding_resamples(label) if label else None,
            "confidence": config["similarity"]["intervals"]["confidence"],
            "seed": config["similarity"]["intervals"]["seed"],
            "monotonicity_models": MONOTONIC, "deletion_models": DELETED,
            "deletion_layers": GROUNDING["deletion"]["layers"], "probe_gap": GROUNDING["deletion"]["probe_gap"],
            "prediction_models": GROUNDING["prediction"]["models"],
            "all_recipes": GROUNDING["prediction"]["all_recipes"],
            "min_items": GROUNDING["min_items"], "null_draws": GROUNDING["null_draws"],
            "specs": {m: config["models"][m] for m in GROUNDING_MODELS}}


# The measure's values the pair jobs already computed (rule compare_pair) are read from their tables: a pair's table
# of the grounding representation on the dataset a test compares, where that representation's pair jobs compute
# the label as the tests do (the same measure and params, at least grounding.resamples half-samples; the seed is
# similarity.intervals' for both, so their first half-samples are the tests'). The tests read the monotonicity
# cells (each model with itself, seed siblings) and every two models' last layers; the rest they compute.
def reads_pair_tables(label):
    computed = workflow_measures.with_draws(config, pair_measures(GROUNDING_REPRESENTATION)).get(label)
    spec = config["measures"][label]
    return (computed is not None and computed["measure"] == spec["measure"]
            and (computed.get("params") or {}) == (spec.get("params") or {})
            and computed["resamples"] >= grounding_resamples(label))


@functools.cache  # read by several input functions and params of each measure_tests job
def grounding_pairs(label, shortcut=False):
    """The sorted model pairs whose tables measure_tests reads for `label` (on grounding.shortcut_dataset: the
    shortcut models' last layers)."""
    if not reads_pair_tables(label):
        return []
    read = set()
    if shortcut and "groups" in GROUNDING_TESTS:
        read |= set(combinations(SHORTCUT_MODELS, 2))
    if not shortcut and {"monotonicity", "layer", "specificity"} & set(GROUNDING_TESTS):
        read |= {(m, m) for m in MONOTONIC} | {tuple(sorted((a, b))) for a, b in combinations(MONOTONIC, 2)
                                               if recipe(config["models"][a]) == recipe(config["models"][b])}
    if not shortcut and {"prediction", "groups", "seeds"} & set(GROUNDING_TESTS):
        read |= set(combinations(GROUNDING_MODELS, 2))
    dataset = SHORTCUT_DATASET if shortcut else GROUNDING_DATASET
    return [list(pair) for pair in sorted(read & compared_pairs(GROUNDING_REPRESENTATION, dataset))]


def grounding_tables(label, template, shortcut=False):
    """The tables (or replicates) of the pair jobs that computed grounding_pairs, each once."""
    dataset = SHORTCUT_DATASET if shortcut else GROUNDING_DATASET
    return pair_tables(template, GROUNDING_REPRESENTATION, dataset, grounding_pairs(label, shortcut))


def grounding_table_of(label, shortcut=False):
    """Per pair of grounding_pairs, the position of its pair job's table in grounding_tables."""
    dataset = SHORTCUT_DATASET if shortcut else GROUNDING_DATASET
    blocked, position = pair_blocks_of(GROUNDING_REPRESENTATION, dataset), {}
    keys = [blocked.key(*pair) for pair in grounding_pairs(label, shortcut)]
    return [position.setdefault(key, len(position)) for key in keys]


rule model_predictions:
    input:
        model=paths.MODEL,
        store=lambda wildcards: store(wildcards.dataset, wildcards.model),
        dataset=lambda wildcards: dataset_dir(wildcards.dataset),
        code=code("model_predictions"),
    output:
        table=paths.PREDICTIONS,
    log:
        paths.log(paths.PREDICTIONS),
    params:
        split=GROUNDING_SPLIT,
        max_examples=config["extraction"]["max_examples"],
        device=config["device"],
    wildcard_constraints:
        model=_one_of(FINETUNED),
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=evaluation_mem_mb,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/model_predictions.py"


rule deletion_probes:
    input:
        store=store(GROUNDING_DATASET, "{model}"),
        dataset=dataset_dir(GROUNDING_DATASET),
        code=code("deletion_probes"),
    output:
        table=paths.DELETION_PROBES,
    log:
        paths.log(paths.DELETION_PROBES),
    params:
        setup=canonical({key: value for key, value in grounding_setup().items()  # what the probes depend on
                         if key in ("representation", "split", "train_split", "deletion_layers", "seed")}),
        deleted=lambda wildcards: wildcards.model in DELETED,  # else every layer at k = 0 alone (Ding's layer test)
    wildcard_constraints:
        model=_one_of(PROBED),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/deletion_probes.py"


rule measure_tests:
    input:
        stores=[store(GROUNDING_DATASET, m) for m in GROUNDING_MODELS],
        shortcut_stores=[store(SHORTCUT_DATASET, m) for m in SHORTCUT_MODELS],
        predictions=[paths.PREDICTIONS.format(dataset=GROUNDING_DATASET, model=m) for m in PREDICTED],
        probes=[paths.DELETION_PROBES.format(dataset=GROUNDING_DATASET, model=m) for m in PROBED],
        pair_tables=lambda wildcards: grounding_tables(wildcards.label, paths.PAIR_TABLE),
        pair_resamples=lambda wildcards: grounding_tables(wildcards.label, paths.PAIR_RESAMPLES),
        shortcut_pair_tables=lambda wildcards: grounding_tables(wildcards.label, paths.PAIR_TABLE, shortcut=True),
        shortcut_pair_resamples=lambda wildcards: grounding_tables(wildcards.label, paths.PAIR_RESAMPLES,
                                                                   shortcut=True),
        dataset=dataset_dir(GROUNDING_DATASET),
        code=code("measure_tests"),
    output:
        table=paths.MEASURE_TESTS_PART,
    log:
        paths.log(paths.MEASURE_TESTS_PART),
    params:
        spec=lambda wildcards: canonical(config["measures"][wildcards.label]),
        setup=lambda wildcards: canonical(grounding_setup(wildcards.label)),
        models=GROUNDING_MODELS,
        shortcut_models=SHORTCUT_MODELS,
        predicted=PREDICTED,
        probed=PROBED,
        pairs=lambda wildcards: grounding_pairs(wildcards.label),
        shortcut_pairs=lambda wildcards: grounding_pairs(wildcards.label, shortcut=True),
        table_of=lambda wildcards: grounding_table_of(wildcards.label),
        shortcut_table_of=lambda wildcards: grounding_table_of(wildcards.label, shortcut=True),
    wildcard_constraints:
        label=_one_of(GROUNDED),
    threads: JOB_THREADS
    resources:
        mem_mb=measure_tests_mem_mb,
        runtime=measure_tests_runtime,
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/measure_tests.py"


rule measure_tests_table:
    input:
        parts=[paths.MEASURE_TESTS_PART.format(label=label) for label in GROUNDED],
        code=code("measure_tests_table"),
    output:
        table=paths.MEASURE_TESTS,
    log:
        paths.log(paths.MEASURE_TESTS),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/measure_tests_table.py"


TARGETS["measure_tests"] = [paths.MEASURE_TESTS] if GROUNDED else []
