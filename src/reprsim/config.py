"""Configuration: schema validation with readable errors, defaults, cross-references.

The workflow calls :func:`validate_config` before any job is scheduled, so a typo
in a key fails in seconds with a message naming the key and what is allowed.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import validators

from reprsim.design import conditioning
from reprsim.design.dataset_labels import dataset_is_labelled
from reprsim.measure_aliases import resolve_section
from reprsim.measure_registry import MEASURES as REGISTERED
from reprsim.metrics.sample_size import CCA_FAMILY, RATIO
from reprsim.nets.gpt2_as_bert import untranslatable
from reprsim.design.dimension_placebo import dimension_placebos, model_width
from reprsim.design.relations import study_errors, study_pairs
from reprsim.schema import SCHEMA_PATH, load_schema, load_yaml, with_defaults
from reprsim.workflow.brought import NO_NETWORK, brought_models
from reprsim.workflow.stitching import function_problems, stitching_problems

# load_yaml and SCHEMA_PATH too: the CLI and the tests read configs through this module
__all__ = ["SCHEMA_PATH", "ConfigError", "SampleSizeWarning", "architecture_fields", "first_label", "hub_spec_errors",
           "load_yaml", "sample_size_warnings", "validate_config"]


class ConfigError(ValueError):
    """The configuration is invalid; the message says which key and what is allowed."""


# sources that build a model from a transformers config with a seed: a tokenizer (borrowed or trained) and `config`
FROM_CONFIG = ("init", "pretrain")
# config fields a pretrain model's own keys set: the tokenizer sets the vocabulary, `activation` the activation
PRETRAIN_SET_BY = {"vocab_size": "tokenizer", "activation_function": "activation"}


REMOTE_CODE = ("reprsim never executes remote code (a model's or dataset's own Python files from the hub); "
               "use an architecture transformers ships: a hub or local model of that architecture, or source: init")
BOUNDS = {"minimum": "≥", "maximum": "≤", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}


def _key(path) -> str:
    parts = [str(p) for p in path]
    return ".".join(parts) if parts else "(top level)"


def _unknown_key(key: str, name: str, allowed) -> str:
    """An unknown `name` at dotted path `key`, with the closest allowed name and the allowed ones."""
    if name == "trust_remote_code":
        return f"key '{key}' is refused: {REMOTE_CODE}"
    close = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"key '{key}' is unknown{hint}; allowed keys there: {', '.join(map(str, allowed)) or 'none'}"


def _text_number_hint(value) -> str:
    """A hint when YAML read a number as text: quoted, or 1e-3 (an exponent without a decimal point)."""
    if not isinstance(value, str):
        return ""
    try:
        float(value)
    except ValueError:
        return ""
    return " (YAML read it as text: drop any quotes, and give an exponent a decimal point, 1.0e-3 not 1e-3)"


def _explain(error: jsonschema.ValidationError) -> str:
    """One sentence per schema violation: the key, what was found, what is allowed."""
    key = _key(error.absolute_path)
    if error.validator == "enum":
        allowed = ", ".join(repr(v) for v in error.validator_value)
        return f"key '{key}' is {error.instance!r}; allowed values: {allowed}"
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return (
            f"key '{key}' must be of type {expected}; got {error.instance!r} "
            f"({type(error.instance).__name__}){_text_number_hint(error.instance)}"
        )
    if error.validator == "required":
        return f"{key}: {error.message}"
    if error.validator == "pattern" and error.absolute_path == error.relative_path:
        return f"key '{key}': {error.message}"
    if error.validator in BOUNDS:
        return f"key '{key}' is {error.instance!r}; must be {BOUNDS[error.validator]} {error.validator_value}"
    return f"key '{key}': {error.message}"


def _schema_errors(config: dict, schema: dict) -> Iterator[str]:
    validator_class = validators.validator_for(schema)
    validator = validator_class(schema)
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        # if/then branches report through their leaves; the container error adds nothing
        if error.validator in {"allOf", "if"}:
            continue
        if error.validator == "additionalProperties":
            allowed = sorted(error.schema.get("properties", {}))
            for extra in sorted(set(error.instance) - set(allowed), key=str):
                yield _unknown_key(_key([*error.absolute_path, extra]), extra, allowed)
            continue
        if error.validator == "propertyNames":
            yield (
                f"name {error.instance!r} under '{_key(error.absolute_path)}' is not allowed: "
                "use letters, digits, '-', '_' and '.', starting with a letter or digit"
            )
            continue
        yield _explain(error)


# A hub revision: a branch, tag, refs/... name (refs/convert/parquet, refs/pr/3) or commit, as git allows a ref
# name; above all no whitespace and no '..', since the hub cache keeps a ref at refs/<revision>.
REVISION_REFUSED = re.compile(r"\s|\.\.|//|^/|/$|[~^:?*\[\\]")
HUB_SPLIT = re.compile(r"\w+(\.\w+)*")      # the hub's (and the datasets library's) split names
CONFIG_REFUSED = re.compile(r"[<>:/\\|?*]|^\s|\s$|^\.{1,2}$")   # the datasets library's, and no '.', '..'


def hub_spec_errors(key: str, spec: dict) -> Iterator[str]:
    """What is wrong with the hub keys of one `source: hf` model or dataset (`key`: models.NAME or
    datasets.NAME): id a hub repo id (huggingface_hub.utils.validate_repo_id), revision a ref name or commit,
    a dataset's config and split names as the hub allows them. Values of the wrong type are the schema's."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    repo_id = spec.get("id")
    if isinstance(repo_id, str):
        try:
            validate_repo_id(repo_id)
        except HFValidationError as error:
            yield (f"key '{key}.id' is {repo_id!r}, which is not a hub repo id ({error}); give 'name' or 'org/name' "
                   "as on huggingface.co (letters, digits, '-', '_', '.'; no '--' or '..'); files on disk are a "
                   f"source: local {'model' if key.startswith('models.') else 'dataset'}")
    revision = spec.get("revision")
    if isinstance(revision, str) and (not revision or REVISION_REFUSED.search(revision)):
        yield (f"key '{key}.revision' is {revision!r}; give a branch, tag or commit of the repo (main, v1.0, "
               "refs/convert/parquet, a 40-hex commit): no whitespace, no '..', no leading or trailing '/', "
               "none of ~^:?*[\\, or leave it out (main)")
    config = spec.get("config")
    if isinstance(config, str) and (not config or CONFIG_REFUSED.search(config)):
        yield (f"key '{key}.config' is {config!r}; give a config name of the dataset (none of <>:/\\|?*, no "
               "surrounding whitespace), or leave it out (its default config)")
    splits = spec.get("splits")
    for ours, theirs in (splits.items() if isinstance(splits, dict) else []):
        if isinstance(theirs, str) and not HUB_SPLIT.fullmatch(theirs):
            yield (f"key '{key}.splits.{ours}' is {theirs!r}, which is not a hub split name (letters, digits and "
                   "'_', parts joined by '.', e.g. validation_matched)")


def _hub_errors(config: dict) -> Iterator[str]:
    """hub_spec_errors of every `source: hf` model and dataset."""
    for section in ("models", "datasets"):
        entries = config.get(section)
        for name, spec in (entries.items() if isinstance(entries, dict) else []):
            if isinstance(spec, dict) and spec.get("source") == "hf":
                yield from hub_spec_errors(f"{section}.{name}", spec)


def _reference_errors(config: dict, distance_named: bool, written: dict[str, str],
                      model_configs: bool = True) -> Iterator[str]:
    """Names that must refer to something the config defines, and settings that contradict each other.

    distance_named: the user set report.distance_measure (its default may name no measure: no distances).
    written: expanded model name -> the name the config gives it (see _expand_seeds).
    """
    datasets = config.get("datasets", {})
    models = config.get("models", {})
    for kind, names in (("dataset", datasets), ("model", models)):
        for name in names:
            if "__" in name:
                yield f"{kind} name {name!r} contains '__', which reprsim reserves to join pair names"
    for name, spec in models.items():
        source, key = spec.get("source"), f"models.{written.get(name, name)}"
        if source == "pretrain" and spec.get("dataset") not in datasets:
            yield (
                f"key '{key}.dataset' is {spec.get('dataset')!r}, which is not a "
                f"dataset in this config; defined datasets: {', '.join(sorted(datasets))}"
            )
        if source == "finetune":
            if spec.get("base") not in models:
                yield (
                    f"key '{key}.base' is {spec.get('base')!r}, which is not a model in "
                    f"this config; defined models: {', '.join(sorted(models))}"
                )
            if spec.get("dataset") not in datasets:
                yield (
                    f"key '{key}.dataset' is {spec.get('dataset')!r}, which is not a "
                    f"dataset in this config; defined datasets: {', '.join(sorted(datasets))}"
                )
        if source == "finetune" and spec.get("steps") is not None and spec.get("epochs") is not None:
            yield f"{key}: give steps or epochs, not both (steps {spec['steps']}, epochs {spec['epochs']})"
        tokenizer = spec.get("tokenizer")
        if source in FROM_CONFIG and isinstance(tokenizer, dict):
            trained_on = tokenizer.get("train", {}).get("dataset")
            if trained_on not in datasets:
                yield (
                    f"key '{key}.tokenizer.train.dataset' is {trained_on!r}, which is not a dataset "
                    f"in this config; defined datasets: {', '.join(sorted(datasets))}"
                )
        elif source in FROM_CONFIG and tokenizer not in models:
            yield (
                f"key '{key}.tokenizer' is {tokenizer!r}, which is not a model "
                f"in this config; defined models: {', '.join(sorted(models))}"
            )
    for name in config.get("extraction", {}).get("datasets", None) or []:
        if name not in datasets:
            yield (
                f"key 'extraction.datasets' names {name!r}, which is not a dataset in this config; "
                f"defined datasets: {', '.join(sorted(datasets))}"
            )
    distance = config.get("report", {}).get("distance_measure")
    measures = config.get("measures", {})
    if distance_named and distance not in measures:
        yield (f"key 'report.distance_measure' is {distance!r}, which is not a measure in this config; "
               f"defined measures: {', '.join(sorted(measures))}")
    if distance in measures and measures[distance]["measure"] != "cka":
        yield f"key 'report.distance_measure' is {distance!r}, a {measures[distance]['measure']} measure; it must name a cka measure"
    yield from _align_errors(config.get("align", {}), models)
    yield from _token_pair_errors(config, models)
    yield from _detail_errors(config, models, measures)
    brought = list(_brought_errors(config, models, datasets))
    yield from brought
    if not any("stitching.pairs" in problem for problem in brought):  # else each pair's objective would be refused too
        yield from stitching_problems(config)
    extracted = config.get("extraction", {}).get("splits", [])
    wanted = {"similarity.split": config.get("similarity", {}).get("split")}
    align = config.get("align", {})
    splits = align.get("splits", {})
    if align.get("enabled"):
        wanted.update({f"align.splits.{role}": splits.get(role) for role in ("fit", "select", "score")})
    for key, split in wanted.items():
        if split is not None and split not in extracted:
            yield (
                f"key '{key}' is {split!r}, but activations are extracted only for "
                f"extraction.splits = {extracted}; add it there"
            )
    if align.get("enabled") and splits.get("score") in (splits.get("fit"), splits.get("select")):
        yield (
            f"key 'align.splits.score' is {splits['score']!r}, the same split the aligners are "
            "fit or selected on; scores must come from held-out rows"
        )
    if config.get("finetune_eval", {}).get("layer_views"):
        extraction = config.get("extraction", {})
        on = extraction.get("datasets") or list(datasets)
        for name, spec in models.items():
            if spec.get("source") == "finetune" and spec.get("dataset") in datasets and spec["dataset"] not in on:
                yield (f"finetune_eval.layer_views compares {name} with its base on its dataset "
                       f"{spec['dataset']!r}, which extraction.datasets leaves out; add it there or set "
                       "finetune_eval.layer_views: false")
        if any(spec.get("source") == "finetune" for spec in models.values()) and "cls" not in extraction.get("poolings", []):
            yield "finetune_eval.layer_views compares CLS representations; add 'cls' to extraction.poolings"
    yield from _grounding_errors(config, datasets, models)
    yield from _unlabelled_errors(config, datasets, models)
    yield from _cycle_errors(models)
    if model_configs:
        yield from _architecture_errors(models)


def grounding_dataset(config: dict) -> str | None:
    """The dataset the grounding tests compare on: grounding.dataset, else the first extracted dataset in name order
    (the rules' EXTRACT_ON)."""
    extracted = sorted((config.get("extraction") or {}).get("datasets") or config.get("datasets") or {})
    return (config.get("grounding") or {}).get("dataset") or (extracted[0] if extracted else None)


def _unlabelled_errors(config: dict, datasets: dict, models: dict) -> Iterator[str]:
    """Unlabelled text (a dataset whose columns name no label) is extracted and compared; what trains or scores on
    its labels is refused, each with the key that asks for it."""
    unlabelled = sorted(name for name, spec in datasets.items() if not dataset_is_labelled(spec))
    why = "which is unlabelled text (its columns name no label)"
    for name in unlabelled:
        spec = datasets[name]
        if spec.get("label_names"):
            yield (f"key 'datasets.{name}.label_names' lists classes, but datasets.{name}.columns names no label "
                   "column; add columns.label, or drop label_names for unlabelled text")
        if spec.get("shortcut"):
            yield (f"key 'datasets.{name}.shortcut' puts each row's label in front of its text; dataset {name!r} "
                   "has no labels (columns.label); add a label column or drop shortcut")
    for model, spec in models.items():
        if spec.get("source") == "finetune" and spec.get("dataset") in unlabelled:
            yield (f"key 'models.{model}.dataset' is {spec['dataset']!r}, {why}: fine-tuning trains a classifier on "
                   "labels; name a labelled dataset (compare the base model on the unlabelled text instead)")
    grounded = grounding_dataset(config)
    if (config.get("grounding") or {}).get("enabled", True) and grounded in unlabelled:
        yield (f"grounding (enabled by default) tests the measures on dataset {grounded!r}, {why}: its probes "
               "and predictions need labels; set grounding: {enabled: false}, or grounding.dataset to a labelled "
               "dataset")
    stitching = config.get("stitching")
    objective = (stitching or {}).get("objective", "auto")
    classifies = objective == "classification" or (objective == "auto" and any(
        spec.get("source") == "finetune" for spec in models.values()))  # auto: fine-tuned models classify
    if stitching and stitching.get("dataset") in unlabelled and classifies:
        yield (f"key 'stitching.dataset' is {stitching['dataset']!r}, {why}: the classification objective "
               "scores the top model's task on labels; set stitching.objective: language_modeling, or stitch on a "
               "labelled dataset")


def _grounding_errors(config: dict, datasets: dict, models: dict) -> Iterator[str]:
    """grounding's names refer to this config's datasets, models and measures; its inputs are extracted."""
    grounding = config.get("grounding") or {}
    if not grounding.get("enabled", True):
        return
    extraction = config.get("extraction", {})
    extracted = extraction.get("datasets") or list(datasets)
    name = grounding.get("dataset")
    if name is not None and name not in extracted:
        yield (f"key 'grounding.dataset' is {name!r}, which is not among the extracted datasets "
               f"({', '.join(sorted(extracted))}); add it to datasets and extraction.datasets")
    # the shortcut models alone are extracted there (by the grounding rules), so it need not be extracted for all
    name = grounding.get("shortcut_dataset")
    if name is not None and name not in datasets:
        yield (f"key 'grounding.shortcut_dataset' is {name!r}, which is not a dataset of this config; "
               f"defined datasets: {', '.join(sorted(datasets))}")
    for key, names in (("monotonicity_models", grounding.get("monotonicity_models")),
                       ("deletion.models", (grounding.get("deletion") or {}).get("models")),
                       ("prediction.models", (grounding.get("prediction") or {}).get("models"))):
        for name in names or []:
            if name not in models:
                yield (f"key 'grounding.{key}' names {name!r}, which is not a model in this config; "
                       f"defined models: {', '.join(sorted(models))}")
    for label in grounding.get("measures") or []:
        if label not in config.get("measures", {}):
            yield (f"key 'grounding.measures' names {label!r}, which is not a label of `measures`; defined: "
                   f"{', '.join(config.get('measures', {}))}")


def detail_splits(extraction: dict, similarity: dict) -> list[str]:
    """extraction.detail_splits, where null means the compared split (similarity.split, if extracted) when
    something reads word rows or attention maps (word in similarity.representations, similarity.attention,
    extraction.attention), else none: word rows take several times the pooled arrays' space."""
    chosen = extraction.get("detail_splits")
    if chosen is not None:
        return list(chosen)
    split = similarity.get("split")
    wanted = ("word" in similarity.get("representations", []) or bool(similarity.get("attention"))
              or bool(extraction.get("attention")))
    return [split] if wanted and split in extraction.get("splits", []) else []


def _detail_errors(config: dict, models: dict, measures: dict) -> Iterator[str]:
    """Word-level and attention pair jobs read what extraction stores for its detail splits."""
    extraction, similarity = config.get("extraction", {}), config.get("similarity", {})
    split = similarity.get("split")
    detail = detail_splits(extraction, similarity)
    for name in detail:
        if name not in extraction.get("splits", []):
            yield (f"key 'extraction.detail_splits' names {name!r}, which extraction.splits = "
                   f"{extraction.get('splits')} does not extract; add it there")
    attention = similarity.get("attention")
    users = (["similarity.representations: word"] if "word" in similarity.get("representations", []) else []) + (
        ["similarity.attention"] if attention else [])
    for user in users:
        if split not in detail:
            yield (f"{user} compares words of similarity.split = {split!r}, but extraction.detail_splits = "
                   f"{detail} stores words only for those splits; add {split!r} there")
    for label in similarity.get("word", {}).get("measures") or []:
        if label not in measures:
            yield (f"key 'similarity.word.measures' names {label!r}, which is not a measure in this config; "
                   f"defined measures: {', '.join(sorted(measures))}")
    if attention and not extraction.get("attention"):
        yield "similarity.attention compares attention maps, which extraction.attention: true stores; set it"
    named = [("similarity.attention.pairs", pair) for pair in (attention or {}).get("pairs") or []]
    named += [("similarity.word.pairs", pair) for pair in similarity.get("word", {}).get("pairs") or []]
    named += [("similarity.pairs", pair) for pair in similarity.get("pairs") or []]
    for key, pair in named:
        for name in pair:
            if name not in models:
                yield (f"key '{key}' names {name!r}, which is not a model in this config; "
                       f"defined models: {', '.join(sorted(models))}")


def _no_network(key: str, name: str, section: str) -> str:
    return (f"key '{key}' names {name!r}: model {name!r} is brought activations (source: activations) and has no "
            f"network, so it cannot take part in {section}")


def _brought_errors(config: dict, models: dict, datasets: dict) -> Iterator[str]:
    """Brought models (source: activations): their dataset and splits are extracted ones; where they are compared
    (similarity pairs, aligners) they bring the splits read and the representation compared is their pooling; a
    section that needs a network (reprsim.workflow.brought.NO_NETWORK) may not name one."""
    brought = brought_models(models)
    if not brought:
        return
    extraction, similarity, align = config.get("extraction", {}), config.get("similarity", {}), config.get("align", {})
    extracted_splits = extraction.get("splits", [])
    for name in brought:
        spec, key = models[name], f"models.{name}"
        dataset = spec.get("dataset")
        if dataset not in datasets:
            yield (f"key '{key}.dataset' is {dataset!r}, which is not a dataset in this config; defined datasets: "
                   f"{', '.join(sorted(datasets))}")
        elif extraction.get("datasets") and dataset not in extraction["datasets"]:
            yield (f"key '{key}.dataset' is {dataset!r}, which extraction.datasets = {extraction['datasets']} leaves "
                   "out: the brought activations are imported as a store on that dataset; add it there")
        for split in spec.get("splits", {}):
            if split not in extracted_splits:
                yield (f"key '{key}.splits.{split}': extraction.splits = {extracted_splits} does not extract that "
                       "split, so no model is compared on it; add it there or leave the split out")
    # where the workflow compares them
    pairs = similarity.get("pairs")
    representations = similarity.get("representations", [])
    for name in brought:
        spec, key = models[name], f"models.{name}"
        named = isinstance(pairs, list) and any(name in pair for pair in pairs)
        if named and spec.get("pooling") not in representations:
            yield (f"key 'similarity.pairs' names {name!r}, brought activations of pooling {spec.get('pooling')!r}, "
                   f"which similarity.representations = {representations} does not compare (a brought model is "
                   f"compared at its pooling only); add {spec.get('pooling')!r} there or leave {name!r} out")
        elif (named or pairs is None and spec.get("pooling") in representations) and \
                similarity.get("split") not in spec.get("splits", {}):
            yield (f"key '{key}.splits' brings no {similarity.get('split')!r} split (similarity.split), which its "
                   f"pairs compare; add {key}.splits.{similarity.get('split')}"
                   + ("" if named else f", or name similarity.pairs without {name!r}"))
    if align.get("enabled"):
        representation, roles = align.get("representation"), align.get("splits", {})
        named = {n for pair in align.get("pairs") or [] for n in pair}
        named |= set(align.get("synthetic", {}).get("models", []))
        for name in brought:
            spec, key = models[name], f"models.{name}"
            if name in named and spec.get("pooling") != representation:
                yield (f"key 'align.pairs' or 'align.synthetic.models' names {name!r}, brought activations of pooling "
                       f"{spec.get('pooling')!r}, but align.representation is {representation!r}; a brought model is "
                       "aligned at its pooling only")
                continue
            aligned = name in named or (align.get("pairs") is None and spec.get("pooling") == representation)
            for role in ("fit", "select", "score") if aligned else ():
                if roles.get(role) not in spec.get("splits", {}):
                    yield (f"key '{key}.splits' brings no {roles.get(role)!r} split (align.splits.{role}), which the "
                           f"aligners of its pairs need; add {key}.splits.{roles.get(role)}, or name align.pairs "
                           f"without {name!r} (or set align.enabled: false)")
    # what needs the network itself
    for name, spec in models.items():
        if spec.get("source") == "finetune" and spec.get("base") in brought:
            yield _no_network(f"models.{name}.base", spec["base"], NO_NETWORK["finetune"].format(model=name))
        tokenizer = spec.get("tokenizer")
        if spec.get("source") in FROM_CONFIG and isinstance(tokenizer, str) and tokenizer in brought:
            yield _no_network(f"models.{name}.tokenizer", spec["tokenizer"], NO_NETWORK["tokenizer"].format(model=name))
    attention, tokens = similarity.get("attention") or {}, similarity.get("tokens") or {}
    grounding = config.get("grounding") or {}
    named = [("stitching.pairs", "stitching", (config.get("stitching") or {}).get("pairs")),
             ("similarity.attention.pairs", "attention", attention.get("pairs")),
             ("similarity.tokens.pairs", "tokens", tokens.get("pairs")),
             ("similarity.word.pairs", "word", similarity.get("word", {}).get("pairs"))]
    named = [(key, section, [n for pair in pairs or [] for n in pair]) for key, section, pairs in named]
    if grounding.get("enabled", True):
        named += [("grounding.monotonicity_models", "monotonicity", grounding.get("monotonicity_models")),
                  ("grounding.deletion.models", "deletion", (grounding.get("deletion") or {}).get("models")),
                  ("grounding.prediction.models", "prediction", (grounding.get("prediction") or {}).get("models"))]
    for key, section, names in named:
        for name in dict.fromkeys(names or []):
            if name in brought:
                yield _no_network(key, name, NO_NETWORK[section])


def _align_errors(align: dict, models: dict) -> Iterator[str]:
    """The models the aligner stage names (the schema checks the aligners' parameters)."""
    if not align.get("enabled"):
        return
    named = [("align.pairs", name) for pair in align.get("pairs") or [] for name in pair]
    named += [("align.synthetic.models", name) for name in align.get("synthetic", {}).get("models", [])]
    for key, name in named:
        if name not in models:
            yield f"key '{key}' names {name!r}, which is not a model in this config; defined models: {', '.join(sorted(models))}"
    for pair in align.get("pairs") or []:
        if len(pair) == 2 and pair[0] == pair[1]:
            yield f"key 'align.pairs' pairs {pair[0]!r} with itself; name two different models"


def _token_pair_errors(config: dict, models: dict) -> Iterator[str]:
    """similarity.tokens: the models it pairs, and the token-level states it reads. Whether two models share a
    tokenizer shows only in their stores, so the job refuses a pair that does not."""
    tokens = config.get("similarity", {}).get("tokens")
    if not tokens:
        return
    if not config.get("extraction", {}).get("tokens"):
        yield ("similarity.tokens needs extraction.tokens: true (token-level hidden states in the stores); "
               "set extraction.tokens: true or similarity.tokens: null")
    for pair in tokens.get("pairs") or []:
        for name in pair:
            if name not in models:
                yield (f"key 'similarity.tokens.pairs' names {name!r}, which is not a model in this config; "
                       f"defined models: {', '.join(sorted(models))}")


def _expand_seeds(config: dict, written: dict[str, str]) -> Iterator[str]:
    """Replace each fine-tuned model with `seeds: [...]` by one model per seed, named {name}-s{seed},
    and note in `written` each one's name in the config (for messages about the key the user wrote).

    Yields a problem when an expanded name collides or another model refers to the list's name.
    """
    models = config["models"]
    expanded = {}
    for name, spec in models.items():
        if spec.get("source") != "finetune" or "seeds" not in spec:
            expanded[name] = spec
            continue
        for seed in spec["seeds"]:
            child = f"{name}-s{seed}"
            if child in models or child in expanded:
                yield f"models.{name}.seeds: the expanded name {child!r} is already a model in this config"
            expanded[child] = {**{k: v for k, v in spec.items() if k != "seeds"}, "seed": seed}
            written[child] = name
    for name, spec in expanded.items():
        for key in ("base", "tokenizer"):
            target = spec.get(key)  # a trained tokenizer ({train: ...}) names no model
            if isinstance(target, str) and target in models and target not in expanded:
                yield (f"key 'models.{written.get(name, name)}.{key}' is {target!r}, a seeds list; name one of its models "
                       f"({', '.join(n for n in expanded if n.startswith(target + '-s'))})")
    config["models"] = expanded


def _study_errors(config: dict) -> Iterator[str]:
    """A universality study must vary one factor at a time (reprsim.design.relations.study_errors) over models of this config;
    `similarity.pairs: study` becomes the list of the pairs it reads (reprsim.design.relations.study_pairs)."""
    study, similarity = config.get("universality"), config["similarity"]
    if study is not None:
        brought = set(brought_models(config["models"]))
        named = [*study["reference"], *study["floor"],
                 *(m for levels in study["factors"].values() for models in levels.values() for m in models)]
        refused = [name for name in dict.fromkeys(named) if name in brought]
        for name in refused:
            yield _no_network("universality", name, NO_NETWORK["universality"])
        if not refused:
            yield from study_errors(config["models"], study)
        yield from _placebo_errors(config["models"], study)
        yield from function_problems(config)
        for label in study.get("measures") or []:
            if label not in config["measures"]:
                yield (f"key 'universality.measures' names {label!r}, which is not a label of `measures`; defined: "
                       f"{', '.join(config['measures'])}")
        if study.get("dataset") is not None and study["dataset"] not in config["datasets"]:
            yield f"key 'universality.dataset' is {study['dataset']!r}, which is not a dataset in this config"
    if similarity.get("pairs") == "study":
        if study is None:
            yield "key 'similarity.pairs' is 'study', but the config has no `universality` study to take the pairs from"
        else:
            similarity["pairs"] = [list(pair) for pair in study_pairs(config["models"], study)]


def _placebo_errors(models: dict, study: dict) -> Iterator[str]:
    """A dimension placebo reduces the reference seeds to fewer dimensions than they have: each width asked for must
    be below the reference's width, and without widths some width level must be narrower."""
    asked = study.get("dimension_placebo")
    if not asked or any(name not in models for name in study["reference"]):
        return
    full = model_width(models, study["reference"][0])
    if full is None:
        yield ("key 'universality.dimension_placebo' is set, but the reference's width is unknown: its models' "
               "`config` gives none of n_embd, hidden_size, d_model, nor does a hub model's `recipe` declare its width")
        return
    wide = [dims for dims in asked.get("widths") or [] if dims >= full]
    if wide:
        yield (f"key 'universality.dimension_placebo.widths' has {', '.join(map(str, wide))}, not below the "
               f"reference's width {full}: a placebo reduces the reference seeds to fewer dimensions")
    elif not dimension_placebos(models, study):
        yield (f"key 'universality.dimension_placebo' is set, but no width level is narrower than the reference "
               f"({full}; widths as the models' `config` or `recipe` gives them): give `widths`, or a narrower width level")


def _expand_checkpoints(config: dict, written: dict[str, str]) -> Iterator[str]:
    """Add, for each pretrained model with `checkpoints: [k, ...]`, a model {name}@{k} per checkpoint: the
    parent's spec without `checkpoints`, with `checkpoint: k` (its seed kept, so the checkpoints of seed siblings
    at one step are seed siblings by reprsim.design.relations.recipe); note in `written` each one's name in the config.

    Yields a problem when a checkpoint is not below the model's steps or an expanded name collides.
    """
    models = config["models"]
    expanded = dict(models)
    for name, spec in models.items():
        if spec.get("source") != "pretrain":
            continue
        for step in spec.get("checkpoints") or []:
            if step >= spec["steps"]:
                yield (f"key 'models.{written.get(name, name)}.checkpoints' has {step}, not below steps = "
                       f"{spec['steps']}: a checkpoint is saved after that step of a run of steps")
                continue
            child = f"{name}@{step}"
            if child in expanded:
                yield f"models.{name}.checkpoints: the expanded name {child!r} is already a model in this config"
                continue
            expanded[child] = {**{k: v for k, v in spec.items() if k != "checkpoints"}, "checkpoint": step}
            written[child] = written.get(name, name)
    config["models"] = expanded


def _cycle_errors(models: dict) -> Iterator[str]:
    """A model derived (through base or tokenizer) from itself can never be built."""
    def parents(name: str) -> list[str]:
        spec = models.get(name, {})
        # a trained tokenizer ({train: ...}) depends on a dataset, not on a model
        return [p for p in (spec.get("base"), spec.get("tokenizer")) if isinstance(p, str) and p in models]

    for start in models:
        seen, stack = set(), [(start, [start])]
        while stack:
            node, trail = stack.pop()
            for parent in parents(node):
                if parent == start:
                    yield f"model {start!r} depends on itself: {' -> '.join(trail + [parent])}"
                    stack = []
                    break
                if parent not in seen:
                    seen.add(parent)
                    stack.append((parent, trail + [parent]))


# Read in a child process: importing a transformers config class imports torch where it is installed
# (transformers 5), which building the DAG must not pay for. The child hides torch, which the config
# classes do not need (transformers supports installs without it), which halves the time.
# Prints {architecture: {class, fields, aliases}} as JSON.
_DESCRIBE_ARCHITECTURES = """
import json, sys
sys.modules["torch"] = None
from transformers import CONFIG_MAPPING
described = {}
for name in sys.argv[1:]:
    config_class = CONFIG_MAPPING[name]
    described[name] = {"class": config_class.__name__, "fields": config_class().to_dict(),
                       "aliases": dict(getattr(config_class, "attribute_map", {}))}
print(json.dumps(described, default=repr))
"""
_ARCHITECTURES: dict[str, dict] = {}
# to_dict() entries transformers writes itself; a model's config cannot set them
NOT_SETTABLE = {"model_type", "transformers_version", "architectures"}
# sizes named by their canonical transformers names (attribute_map aliases resolve them per architecture)
POSITIVE_SIZES = ("hidden_size", "num_hidden_layers", "num_attention_heads")


def architecture_fields(architectures) -> dict[str, dict]:
    """Each architecture's transformers config class: its name, the fields of a default instance
    (to_dict) with their defaults, and the aliases it accepts (attribute_map: alias -> field).
    Read once per process, for all the architectures asked for at once."""
    missing = sorted(set(architectures) - set(_ARCHITECTURES))
    stamp, cached = _transformers_stamp(), {}
    if missing and stamp:
        cached = _read_architecture_cache(stamp)
        _ARCHITECTURES.update({name: cached[name] for name in missing if name in cached})
        missing = sorted(set(architectures) - set(_ARCHITECTURES))
    if missing:
        result = subprocess.run([sys.executable, "-c", _DESCRIBE_ARCHITECTURES, *missing],
                                capture_output=True, text=True, check=False)
        if result.returncode:
            raise RuntimeError(f"could not read the transformers configs of {', '.join(missing)} to check "
                               f"the models' config keys:\n{result.stderr.strip()}")
        _ARCHITECTURES.update(json.loads(result.stdout.strip().splitlines()[-1]))
        if stamp:
            _write_architecture_cache(stamp, {**cached, **_ARCHITECTURES})
    return {name: _ARCHITECTURES[name] for name in architectures}


# The child process costs about two seconds, paid by every Snakemake start (each SLURM job's too): its answer is kept
# on disk, for the transformers install it came from (version, location, and its config registry's mtime).
def _architecture_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "reprsim" / "transformers-configs.json"


def _transformers_stamp() -> str | None:
    """What identifies the installed transformers, found without importing it; None when it is not installed."""
    try:
        spec = importlib.util.find_spec("transformers")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    registry = Path(spec.origin).parent / "models" / "auto" / "configuration_auto.py"
    try:
        from importlib.metadata import version
        return f"{version('transformers')} {spec.origin} {registry.stat().st_mtime_ns}"
    except (OSError, ImportError, ValueError):
        return None


def _read_architecture_cache(stamp: str) -> dict:
    try:
        cache = json.loads(_architecture_cache().read_text())
    except (OSError, ValueError):
        return {}
    return cache.get("architectures", {}) if isinstance(cache, dict) and cache.get("stamp") == stamp else {}


def _write_architecture_cache(stamp: str, architectures: dict) -> None:
    """Written whole, then renamed into place: a reader sees the old file or the new one. An unwritable cache
    directory only costs the next start the child process again."""
    path = _architecture_cache()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        partial.write_text(json.dumps({"stamp": stamp, "architectures": architectures}))
        os.replace(partial, path)
    except OSError:
        pass


def _kind_error(value: Any, default: Any) -> str | None:
    """What `value` must be, judged by the field's default value; None when it fits."""
    scalar = (str, int, float, bool)
    if default is None:  # the field's type is unknown: any scalar, or a list of them (eos_token_id)
        fits = value is None or isinstance(value, scalar) or (
            isinstance(value, list) and all(isinstance(v, scalar) for v in value))
        return None if fits else "a scalar or a list of scalars"
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "true or false"
    if isinstance(default, int):
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if isinstance(default, float):
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else "a number"
    for kind, words in ((str, "a string"), (list, "a list"), (dict, "a mapping")):
        if isinstance(default, kind):
            return None if isinstance(value, kind) else words
    return None


def _model_config_errors(where: str, overrides: dict, architecture: str, described: dict) -> Iterator[str]:
    """`overrides` (a random model's config) against its architecture's transformers config class."""
    fields, aliases, config_class = described["fields"], described["aliases"], described["class"]
    settable = sorted(f for f in fields if f not in NOT_SETTABLE and not f.startswith("_"))
    given: dict[str, str] = {}  # field -> the key the user wrote for it
    for key, value in overrides.items():
        field = aliases.get(key, key)
        if key == "trust_remote_code":
            yield f"key '{where}.{key}' is refused: {REMOTE_CODE}"
            continue
        if field not in settable:
            close = difflib.get_close_matches(str(key), settable + sorted(aliases), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            yield (f"key '{where}.{key}' is not a field of the {architecture} config (transformers "
                   f"{config_class}){hint}")
            continue
        if field in given:
            yield f"keys '{where}.{given[field]}' and '{where}.{key}' both set {field}; give one of them"
            continue
        given[field] = key
        default = fields[field]
        if expected := _kind_error(value, default):
            yield (f"key '{where}.{key}' must be {expected}, like {config_class}'s default {default!r}; "
                   f"got {value!r} ({type(value).__name__}){_text_number_hint(value)}")
        elif isinstance(default, int) and not isinstance(default, bool) and default >= 0 and value < 0:
            yield f"key '{where}.{key}' is {value}; must be ≥ 0"

    def size(name: str) -> tuple[str, Any]:
        """How to name the size `name` in a message, and its value (the user's, else the default)."""
        field = aliases.get(name, name)
        if field in given:
            return f"key '{where}.{given[field]}'", overrides[given[field]]
        return f"{field} (default)", fields.get(field)

    sizes = {name: size(name) for name in POSITIVE_SIZES}
    if any(not isinstance(value, int) or isinstance(value, bool) for _, value in sizes.values()):
        return  # wrong types are reported above
    for key, value in sizes.values():
        if value == 0:  # negative ones are reported above
            yield f"{key} is 0; must be ≥ 1"
    (hidden_key, hidden), (heads_key, heads) = sizes["hidden_size"], sizes["num_attention_heads"]
    if hidden > 0 and heads > 0 and hidden % heads:
        yield (f"{hidden_key} = {hidden} is not a multiple of {heads_key} = {heads}: transformers "
               "refuses attention heads that do not split the hidden size evenly")


def _architecture_errors(models: dict) -> Iterator[str]:
    """Every random or pretrained model's `config` keys: fields of its architecture, of the right kind, consistent
    sizes; for a pretrained one also what its own keys set, and positions for its context."""
    # a checkpoint's config is its parent's, checked there
    specs = {name: spec for name, spec in models.items()
             if spec.get("source") in FROM_CONFIG and "checkpoint" not in spec}
    if not specs:
        return
    described = architecture_fields({spec["architecture"] for spec in specs.values()})
    for name, spec in specs.items():
        where, overrides = f"models.{name}.config", spec.get("config", {})
        yield from _model_config_errors(where, overrides, spec["architecture"], described[spec["architecture"]])
        if spec["source"] == "pretrain":
            yield from _pretrain_config_errors(where, overrides, spec, described[spec["architecture"]])


def _pretrain_config_errors(where: str, overrides: dict, spec: dict, described: dict) -> Iterator[str]:
    """A pretrained model's `config` may not set what its own keys set, and needs a position per context token;
    a BERT's masked LM's must translate into a BERT's (reprsim.nets.gpt2_as_bert)."""
    aliases, model = described["aliases"], where.removesuffix(".config")
    positions = aliases.get("max_position_embeddings", "max_position_embeddings")
    context = spec.get("context")
    if spec.get("blocks") is not None and spec.get("objective") != "masked":
        yield (f"key '{model}.blocks' is {spec['blocks']!r}: it chooses a masked LM's blocks; a causal LM is a GPT-2 "
               "(leave blocks out, or set objective: masked)")
    if spec.get("objective") == "masked" and spec.get("blocks") == "bert":
        for key, why in untranslatable(overrides):
            if aliases.get(key, key) in described["fields"] and aliases.get(key, key) not in PRETRAIN_SET_BY:
                yield f"key '{where}.{key}' has no counterpart in the BERT that blocks bert builds: {why}"
    for key, value in overrides.items():
        field = aliases.get(key, key)
        if field in PRETRAIN_SET_BY:
            yield f"key '{where}.{key}' is set by '{model}.{PRETRAIN_SET_BY[field]}'; leave it out of config"
        if (field == positions and isinstance(value, int) and not isinstance(value, bool)
                and isinstance(context, int) and 0 <= value < context):
            yield (f"key '{where}.{key}' is {value}, below context = {context}: the model would have no position "
                   "for a block's later tokens (leave it out: it defaults to context)")


def validate_config(config: dict, schema_path: str | Path = SCHEMA_PATH, *, model_configs: bool = True) -> dict:
    """Validate `config` in place (filling defaults) and return it.

    Raises ConfigError listing every problem found: unknown keys, wrong types or
    values, and references to models or datasets the config does not define.
    Imports neither torch nor transformers (see architecture_fields). `model_configs` False leaves out the check
    of random and pretrained models' `config` keys against their transformers config classes (a second of a
    child process): a cluster job's Snakemake, which runs one job of a configuration its submitting Snakemake
    has checked in full, sets it.
    """
    schema = load_schema(schema_path)
    if not isinstance(config, dict):
        raise ConfigError(f"the configuration must be a mapping; got {type(config).__name__}")
    distance_named = isinstance(config.get("report"), dict) and "distance_measure" in config["report"]
    named = resolve_section(config.get("measures"))  # aliases to registry names, before the schema reads them
    try:
        with_defaults(validators.validator_for(schema))(schema).validate(config)
    except jsonschema.ValidationError:
        pass  # defaults are filled as far as possible; errors are reported below
    problems = list(dict.fromkeys([*named, *_unnamed(_schema_errors(config, schema), named), *_hub_errors(config),
                                   *_conditioning_errors(config)]))
    written: dict[str, str] = {}
    if not problems:  # the seeds of one model refer alike: each problem once
        problems = list(dict.fromkeys(_expand_seeds(config, written)))
    if not problems:
        problems = list(dict.fromkeys(_expand_checkpoints(config, written)))
    if not problems:  # after the expansions: a study names expanded models
        problems = list(dict.fromkeys(_study_errors(config)))
    if not problems:
        problems = list(dict.fromkeys(_reference_errors(config, distance_named, written, model_configs)))
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(f"invalid reprsim configuration ({len(problems)} problem(s)):\n{listing}")
    for spec in config["datasets"].values():
        if spec["source"] == "local" and spec.get("data_root") is None:
            spec["data_root"] = config["data_root"]
    extraction = config["extraction"]
    if not extraction.get("datasets"):
        extraction["datasets"] = sorted(config["datasets"])
    extraction["detail_splits"] = detail_splits(extraction, config["similarity"])
    for message in sample_size_warnings(config):
        warnings.warn(message, SampleSizeWarning, stacklevel=2)
    for message in study_dimension_warnings(config):
        warnings.warn(message, StudyDimensionWarning, stacklevel=2)
    return config


class SampleSizeWarning(UserWarning):
    """The similarity split may be too small for a configured measure (docs/numerics.md, rows needed)."""


class StudyDimensionWarning(UserWarning):
    """A universality study's measure treats models of different widths differently (docs/numerics.md §13c)."""


def study_dimension_warnings(config: dict) -> list[str]:
    """A universality study whose models differ in width, with a measure whose `pca_dims` is not below the
    narrowest: the narrow models' layers enter whole while the wider ones' are cut to `pca_dims` principal
    directions, so a width level and the reference seeds are measured differently. Widths are read where the
    models' `config` gives them."""
    study = config.get("universality")
    if not isinstance(study, dict):
        return []
    named = [*study.get("reference", []), *study.get("floor", [])]
    named += [m for levels in (study.get("factors") or {}).values() for models in levels.values() for m in models]
    widths = {}
    for name in dict.fromkeys(named):
        width = model_width(config.get("models") or {}, name)
        if width is not None:
            widths[name] = width
    if len(set(widths.values())) < 2:
        return []
    narrowest = min(widths, key=widths.get)
    out = []
    for label, spec in (config.get("measures") or {}).items():
        pca_dims = (spec.get("params") or {}).get("pca_dims")
        if isinstance(pca_dims, int) and pca_dims >= widths[narrowest]:
            out.append(f"measures.{label} ({spec['measure']}): pca_dims {pca_dims} is not below the narrowest study "
                       f"model's width ({narrowest}: {widths[narrowest]}), so its layers enter whole while the "
                       f"{max(widths.values())}-wide ones are cut to {pca_dims} principal directions: a width level "
                       f"and the seeds are measured differently; set pca_dims below {widths[narrowest]}")
    return out


def sample_size_warnings(config: dict) -> list[str]:
    """What the config alone says about rows per compared dimension, before any data exists.

    The rows are at most extraction.max_examples (when set); every interval rests on half of
    them. The CCA family compares k = k_x + k_y dimensions (2·pca_dims at most), mixedsim
    pca_dims, mutual k-NN needs k below the half-sample's rows.
    """
    rows = config.get("extraction", {}).get("max_examples")
    half = rows // 2 if rows else None
    out = []
    for label, spec in config.get("measures", {}).items():
        name, params = spec["measure"], spec.get("params") or {}
        pca_dims = params.get("pca_dims")
        where = f"measures.{label} ({name})"
        if name in CCA_FAMILY and pca_dims is None:
            out.append(f"{where} has no pca_dims: it compares k_x + k_y = every dimension of both models "
                       f"(768 for two 384-wide models), which needs ≥ {RATIO}·k rows to be read without a "
                       "warning and is undefined above n − 1; set pca_dims (the default uses 64)")
        elif name in CCA_FAMILY and rows:
            k = 2 * pca_dims
            if rows - 1 < k:
                out.append(f"{where}: extraction.max_examples = {rows} rows cannot support k_x + k_y = {k} "
                           f"(needs n − 1 ≥ k): every value undefined")
            elif rows < RATIO * k:
                out.append(f"{where}: {rows} rows < {RATIO}·(k_x + k_y) = {RATIO * k}: values biased upward, "
                           "rows carry a warning")
            if half - 1 < k:
                out.append(f"{where}: half-samples of {half} rows cannot support k_x + k_y = {k}: no interval")
        if name == "mixedsim" and pca_dims is not None and rows and rows < RATIO * pca_dims:
            out.append(f"{where}: {rows} rows < {RATIO}·pca_dims = {RATIO * pca_dims}: values biased upward")
        if "k" in REGISTERED[name].params and half is not None and params.get("k", 10) >= half:
            out.append(f"{where}: k = {params.get('k', 10)} is not below the {half} rows of a half-sample: "
                       "no interval")
    return out


def first_label(measures: dict, name: str) -> str | None:
    """The first configured label whose measure is `name`."""
    return next((label for label, spec in measures.items() if spec["measure"] == name), None)


def measures_errors(measures: dict, schema_path: str | Path = SCHEMA_PATH) -> list[str]:
    """Every problem of a `measures` section alone (reprsim.compare's measures), as the configuration check words
    it; the specs get their defaults filled in place."""
    schema = load_schema(schema_path)
    section = {"$defs": schema["$defs"], "type": "object", "required": ["measures"],
               "properties": {"measures": schema["properties"]["measures"]}}
    config = {"measures": measures}
    named = resolve_section(measures)
    try:
        with_defaults(validators.validator_for(section))(section).validate(config)
    except jsonschema.ValidationError:
        pass
    return list(dict.fromkeys([*named, *_unnamed(_schema_errors(config, section), named),
                               *_conditioning_errors(config)]))


def _unnamed(schema_problems: list[str], named: list[str]) -> list[str]:
    """The schema's problems less its "allowed values" of a measure whose name the alias resolution has already
    refused (that message lists the close names; the schema's would list every registry name)."""
    labels = {match.group(1) for problem in named if (match := re.match(r"key '(measures\.[^.']+)", problem))}
    return [problem for problem in schema_problems if not any(f"'{label}.measure'" in problem for label in labels)]


def _conditioning_errors(config: dict) -> list[str]:
    """A measure's conditioning whose setting belongs to another method (the schema allows each key of both)."""
    out = []
    measures = config.get("measures")
    for label, spec in (measures.items() if isinstance(measures, dict) else ()):
        if isinstance(spec, dict) and spec.get("conditioning") is not None:
            try:
                conditioning.parse(spec["conditioning"])
            except ValueError as error:
                out.append(f"measures.{label}.conditioning: {error}")
    return out
