"""Configuration: schema validation with readable errors, defaults, cross-references.

The workflow calls :func:`validate_config` before any job is scheduled, so a typo
in a key fails in seconds with a message naming the key and what is allowed. The checks themselves, by topic, are
reprsim.config_checks; this module runs them in order.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import jsonschema
from jsonschema import validators

from reprsim.config_checks.architectures import architecture_fields
from reprsim.config_checks.detail import detail_splits
from reprsim.config_checks.expansion import _expand_checkpoints, _expand_seeds
from reprsim.config_checks.grounding import grounding_dataset  # noqa: F401  (the rules read it through this module)
from reprsim.config_checks.hub import _hub_errors, hub_spec_errors
from reprsim.config_checks.references import _reference_errors
from reprsim.config_checks.sample_size import SampleSizeWarning, sample_size_warnings
from reprsim.config_checks.schema_errors import _schema_errors
from reprsim.config_checks.universality import StudyDimensionWarning, _study_errors, study_dimension_warnings
from reprsim.design import conditioning
from reprsim.measure_aliases import resolve_section
from reprsim.schema import SCHEMA_PATH, load_schema, load_yaml, with_defaults

# load_yaml and SCHEMA_PATH too: the CLI and the tests read configs through this module; architecture_fields and
# hub_spec_errors (reprsim.config_checks) are public through it as well
__all__ = ["SCHEMA_PATH", "ConfigError", "SampleSizeWarning", "architecture_fields", "first_label", "hub_spec_errors",
           "load_yaml", "sample_size_warnings", "validate_config"]


class ConfigError(ValueError):
    """The configuration is invalid; the message says which key and what is allowed."""


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
