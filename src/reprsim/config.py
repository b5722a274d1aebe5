"""Configuration: schema validation with readable errors, defaults, cross-references.

The workflow calls :func:`validate_config` before any job is scheduled, so a typo
in a key fails in seconds with a message naming the key and what is allowed.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Iterator

import jsonschema
from jsonschema import validators

from reprsim.metrics.sample_size import CCA_FAMILY, RATIO
from reprsim.schema import SCHEMA_PATH, load_yaml, with_defaults


class ConfigError(ValueError):
    """The configuration is invalid; the message says which key and what is allowed."""


def _key(path) -> str:
    parts = [str(p) for p in path]
    return ".".join(parts) if parts else "(top level)"


def _explain(error: jsonschema.ValidationError) -> str:
    """One sentence per schema violation: the key, what was found, what is allowed."""
    key = _key(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        where = key if error.absolute_path else "the top level"
        return (
            f"unknown key {', '.join(repr(e) for e in extra)} in {where}; "
            f"allowed keys there: {', '.join(allowed)}"
        )
    if error.validator == "enum":
        allowed = ", ".join(repr(v) for v in error.validator_value)
        return f"key '{key}' is {error.instance!r}; allowed values: {allowed}"
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return (
            f"key '{key}' must be of type {expected}; got {error.instance!r} "
            f"({type(error.instance).__name__})"
        )
    if error.validator == "required":
        return f"{key}: {error.message}"
    if error.validator == "pattern" and error.absolute_path == error.relative_path:
        return f"key '{key}': {error.message}"
    if error.validator in {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}:
        return f"key '{key}' is {error.instance!r}; must be {error.validator} {error.validator_value}"
    return f"key '{key}': {error.message}"


def _schema_errors(config: dict, schema: dict) -> Iterator[str]:
    validator_class = validators.validator_for(schema)
    validator = validator_class(schema)
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        # if/then branches report through their leaves; the container error adds nothing
        if error.validator in {"allOf", "if"}:
            continue
        if error.validator == "propertyNames":
            yield (
                f"name {error.instance!r} under '{_key(error.absolute_path)}' is not allowed: "
                "use letters, digits, '-', '_' and '.', starting with a letter or digit"
            )
            continue
        yield _explain(error)


def _reference_errors(config: dict) -> Iterator[str]:
    datasets = config.get("datasets", {})
    models = config.get("models", {})
    for kind, names in (("dataset", datasets), ("model", models)):
        for name in names:
            if "__" in name:
                yield f"{kind} name {name!r} contains '__', which reprsim reserves to join pair names"
    for name, spec in models.items():
        source = spec.get("source")
        if source == "finetune":
            if spec.get("base") not in models:
                yield (
                    f"key 'models.{name}.base' is {spec.get('base')!r}, which is not a model in "
                    f"this config; defined models: {', '.join(sorted(models))}"
                )
            if spec.get("dataset") not in datasets:
                yield (
                    f"key 'models.{name}.dataset' is {spec.get('dataset')!r}, which is not a "
                    f"dataset in this config; defined datasets: {', '.join(sorted(datasets))}"
                )
        if source == "finetune" and spec.get("steps") is not None and spec.get("epochs") is not None:
            yield f"models.{name}: give steps or epochs, not both (steps {spec['steps']}, epochs {spec['epochs']})"
        if source == "init" and spec.get("tokenizer") not in models:
            yield (
                f"key 'models.{name}.tokenizer' is {spec.get('tokenizer')!r}, which is not a model "
                f"in this config; defined models: {', '.join(sorted(models))}"
            )
    for name in config.get("extraction", {}).get("datasets", None) or []:
        if name not in datasets:
            yield (
                f"key 'extraction.datasets' names {name!r}, which is not a dataset in this config; "
                f"defined datasets: {', '.join(sorted(datasets))}"
            )
    from reprsim.metrics import check_params

    for label, spec in config.get("measures", {}).items():
        try:
            check_params(spec["measure"], spec.get("params", {}))
        except ValueError as error:
            yield f"key 'measures.{label}.params': {error}"
    distance = config.get("report", {}).get("distance_measure")
    measures = config.get("measures", {})
    if distance is not None and distance in measures and measures[distance]["measure"] != "cka":
        yield f"key 'report.distance_measure' is {distance!r}, a {measures[distance]['measure']} measure; it must name a cka measure"
    yield from _align_errors(config.get("align", {}), models)
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
    yield from _cycle_errors(models)


def _align_errors(align: dict, models: dict) -> Iterator[str]:
    """Aligner names and parameters, and the models the aligner stage names."""
    if not align.get("enabled"):
        return
    from reprsim.aligners.registry import check

    for label, spec in align.get("aligners", {}).items():
        try:
            check(spec["aligner"], spec.get("params", {}))
        except (ValueError, TypeError) as error:
            yield f"key 'align.aligners.{label}.params': {error}"
    named = [("align.pairs", name) for pair in align.get("pairs") or [] for name in pair]
    named += [("align.synthetic.models", name) for name in align.get("synthetic", {}).get("models", [])]
    for key, name in named:
        if name not in models:
            yield f"key '{key}' names {name!r}, which is not a model in this config; defined models: {', '.join(sorted(models))}"
    for pair in align.get("pairs") or []:
        if len(pair) == 2 and pair[0] == pair[1]:
            yield f"key 'align.pairs' pairs {pair[0]!r} with itself; name two different models"


def _expand_seeds(config: dict) -> Iterator[str]:
    """Replace each fine-tuned model with `seeds: [...]` by one model per seed, named {name}-s{seed}.

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
    for name, spec in expanded.items():
        for key in ("base", "tokenizer"):
            target = spec.get(key)
            if target in models and target not in expanded:
                yield (f"key 'models.{name}.{key}' is {target!r}, a seeds list; name one of its models "
                       f"({', '.join(n for n in expanded if n.startswith(target + '-s'))})")
    config["models"] = expanded


def _cycle_errors(models: dict) -> Iterator[str]:
    """A model derived (through base or tokenizer) from itself can never be built."""
    def parents(name: str) -> list[str]:
        spec = models.get(name, {})
        return [p for p in (spec.get("base"), spec.get("tokenizer")) if p in models]

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


def validate_config(config: dict, schema_path: str | Path = SCHEMA_PATH) -> dict:
    """Validate `config` in place (filling defaults) and return it.

    Raises ConfigError listing every problem found: unknown keys, wrong types or
    values, and references to models or datasets the config does not define.
    """
    schema = load_yaml(schema_path)
    if not isinstance(config, dict):
        raise ConfigError(f"the configuration must be a mapping; got {type(config).__name__}")
    try:
        with_defaults(validators.validator_for(schema))(schema).validate(config)
    except jsonschema.ValidationError:
        pass  # defaults are filled as far as possible; errors are reported below
    problems = list(dict.fromkeys(_schema_errors(config, schema)))
    if not problems:
        problems = list(_expand_seeds(config))
    if not problems:
        problems = list(_reference_errors(config))
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(f"invalid reprsim configuration ({len(problems)} problem(s)):\n{listing}")
    for spec in config["datasets"].values():
        if spec["source"] == "local" and spec.get("data_root") is None:
            spec["data_root"] = config["data_root"]
    extraction = config["extraction"]
    if not extraction.get("datasets"):
        extraction["datasets"] = sorted(config["datasets"])
    for message in sample_size_warnings(config):
        warnings.warn(message, SampleSizeWarning, stacklevel=2)
    return config


class SampleSizeWarning(UserWarning):
    """The similarity split may be too small for a configured measure (docs/numerics.md, rows needed)."""


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
        if name == "mutual_knn" and half is not None and params.get("k", 10) >= half:
            out.append(f"{where}: k = {params.get('k', 10)} is not below the {half} rows of a half-sample: "
                       "no interval")
    return out


def first_label(measures: dict, name: str) -> str | None:
    """The first configured label whose measure is `name`."""
    return next((label for label, spec in measures.items() if spec["measure"] == name), None)
