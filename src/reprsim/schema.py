"""The configuration schema (it ships inside the package) and its defaults.

Kept apart from :mod:`reprsim.config`, whose cross-reference checks import the measures and
aligners: a stage that only needs a default imports this module and nothing heavier.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml
from jsonschema import validators

SCHEMA_PATH = Path(__file__).resolve().parent / "schema.yaml"


def load_yaml(path: str | Path) -> Any:
    with open(path) as handle:
        return yaml.safe_load(handle)


@functools.lru_cache(maxsize=4)
def _parsed_schema(path: str, modified_ns: int) -> dict:
    return load_yaml(path)


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    """The schema at `path`, parsed once per version of the file (the workflow and the tests validate
    many configs in one process); callers must not modify it."""
    return _parsed_schema(str(path), Path(path).stat().st_mtime_ns)


def with_defaults(validator_class):
    """A validator that fills `default` values of object properties while it walks."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if validator.is_type(instance, "object"):
            for prop, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(prop, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


def schema_defaults(*keys: str, schema_path: str | Path = SCHEMA_PATH) -> dict:
    """The schema's defaults of the section at `keys` (e.g. "finetune_eval", "heads"), so a library
    caller without a config gets exactly what the workflow gets."""
    config: dict = {}
    schema = load_yaml(schema_path)
    # walking every keyword fills the defaults; the errors (required keys missing) do not matter here
    for _ in with_defaults(validators.validator_for(schema))(schema).iter_errors(config):
        pass
    section = config
    for key in keys:
        section = section[key]
    return copy.deepcopy(section)
