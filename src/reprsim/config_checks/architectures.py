"""Random and pretrained models' `config` keys against their architecture's transformers config class: its fields,
their kinds, consistent sizes, what a pretrained model's own keys set. The classes are read in a child process
without torch, its answer kept on disk per transformers install."""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reprsim.config_checks.schema_errors import REMOTE_CODE, _text_number_hint
from reprsim.nets.gpt2_as_bert import untranslatable

# sources that build a model from a transformers config with a seed: a tokenizer (borrowed or trained) and `config`
FROM_CONFIG = ("init", "pretrain")
# config fields a pretrain model's own keys set: the tokenizer sets the vocabulary, `activation` the activation
PRETRAIN_SET_BY = {"vocab_size": "tokenizer", "activation_function": "activation"}

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
