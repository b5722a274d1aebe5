"""Seeded fuzz of the shipped configurations (issue 14, "bad input, clear errors").

Every mutation of a valid config (an unknown key at any mapping level, a wrong type for a typed
value, a list and a mapping swapped, an undefined reference, a negative size) must make
validate_config raise ConfigError (never another exception, never accept it) with a message that
names the mutated key by its dotted path, or for a reference the referring key.

The mutations come from walking each config tree. Those that would be valid are left out by
construction, from the rules below (what the schema allows beyond a value's own type), never by
catching: an int where a number is allowed, null where a key is nullable, a number where text or
an integer is allowed, a negative index where one counts from the top.
"""

from __future__ import annotations

import copy
import random
from fnmatch import fnmatchcase
from typing import Any, NamedTuple

import pytest
from conftest import REPO, TINY

from reprsim.config import ConfigError, load_yaml, validate_config

BASES = {
    "config": REPO / "config" / "config.yaml",
    "tiny": TINY,
    # local and hub datasets (files, columns, label_names, splits), freeze, seed lists
    "glue-local": REPO / "config" / "examples" / "glue-local.yaml",
    "glue-hub": REPO / "config" / "examples" / "glue-hub.yaml",
    "cross-tokenizer": REPO / "config" / "examples" / "cross-tokenizer.yaml",
    "stitching-lm": REPO / "config" / "examples" / "stitching-lm.yaml",  # pretrained LMs, stitching
}
SEED = 14
SAMPLED = 240  # of the ~3,100 wrong-type mutations (all pass; a sample keeps this to seconds); the rest run in full

# Rules over "typed paths": the name under datasets, models, measures or align.aligners is replaced
# by the entry's source, measure or aligner, so a rule says which kind of entry it is about.
# "*" stands for one segment.
NAMED = {("datasets",): "source", ("models",): "source", ("measures",): "measure", ("align", "aligners"): "aligner"}
NULLABLE = (
    "extraction.max_examples", "align.pairs",
    "measures.*.null_permutations", "measures.*.resamples", "measures.*.params.pca_dims",
    "align.aligners.*.params.pca_dims", "align.aligners.*.params.components", "align.aligners.*.params.threads",
    "align.aligners.mlp.params.hidden",
    "models.finetune.steps", "models.finetune.epochs", "models.finetune.freeze", "models.hf.revision",
    "models.pretrain.max_grad_norm",
    "models.package.subdir",
    "datasets.*.max_examples", "datasets.local.data_root", "datasets.hf.config", "datasets.hf.revision",
    "datasets.*.columns.text_pair",
    "extraction.detail_splits", "similarity.word.pairs", "similarity.word.measures", "similarity.word.max_words",
    "similarity.word.permutations", "similarity.word.resamples", "similarity.attention",
    "similarity.attention.pairs", "similarity.attention.max_examples", "similarity.tokens",
    "similarity.tokens.max_tokens",
    "stitching", "stitching.pairs", "stitching.dataset", "stitching.max_examples", "stitching.max_length",
    "stitching.context", "stitching.optimizer.max_grad_norm",
)
NUMBER = (  # a float where an int is written is still valid
    "similarity.intervals.confidence", "finetune_eval.heads.epochs", "finetune_eval.heads.learning_rate",
    "finetune_eval.heads.weight_decay", "models.finetune.epochs", "models.finetune.learning_rate",
    "models.finetune.warmup_fraction", "models.finetune.weight_decay", "datasets.*.split_fractions.*",
    "models.pretrain.learning_rate", "models.pretrain.warmup_fraction", "models.pretrain.weight_decay",
    "stitching.optimizer.learning_rate", "stitching.optimizer.momentum", "stitching.optimizer.weight_decay",
    "models.pretrain.max_grad_norm",
    "measures.*.params.threshold", "align.aligners.*.params.threshold", "align.aligners.*.params.lr",
    "align.aligners.*.params.weight_decay", "align.aligners.*.params.scale_bound",
    "align.aligners.linear.params.ridge", "align.aligners.linear.params.ridge.*",
)
TEXT_OR_INTEGER = ("datasets.*.columns.*", "datasets.*.label_names.*")
NEGATIVE_ALLOWED = ("align.synthetic.layers.*",)  # layers counted from the top
NAME_MAPS = ("datasets", "models", "measures", "align.aligners")  # any new key there is a new entry


class Mutation(NamedTuple):
    base: str
    kind: str
    path: tuple  # where the value is set
    value: Any
    names: str  # the dotted key the message must name

    def __str__(self) -> str:
        return f"{self.base}:{self.kind}:{'.'.join(map(str, self.path))}={self.value!r}"


def dotted(path) -> str:
    return ".".join(map(str, path))


def typed_path(config: dict, path: tuple) -> str:
    """`path` dotted, with each entry's name replaced by its kind (models.minilm -> models.package)."""
    parts = [str(p) for p in path]
    for prefix, discriminator in NAMED.items():
        n = len(prefix)
        if tuple(parts[:n]) == prefix and len(parts) > n:
            entry = config
            for part in path[: n + 1]:
                entry = entry[part]
            parts[n] = str(entry[discriminator])
    return ".".join(parts)


def matches(config: dict, path: tuple, patterns) -> bool:
    segments = typed_path(config, path).split(".")
    return any(len(p.split(".")) == len(segments) and all(map(fnmatchcase, segments, p.split(".")))
               for p in patterns)


def wrong_values(config: dict, path: tuple, value) -> list[tuple[str, Any]]:
    """Values of another type than `value`'s that the schema cannot accept at `path`."""
    nullable = matches(config, path, NULLABLE)
    if value is None:  # a null the config chose (pairs: null): its type has no single opposite
        return []
    if isinstance(value, bool):
        wrong = [("text", "yes"), ("integer", 1)]
    elif isinstance(value, int):
        wrong = [("text", "not-a-number"), ("bool", True)]
        wrong += [] if matches(config, path, NUMBER) else [("float", 1.5)]
        wrong += [] if matches(config, path, NEGATIVE_ALLOWED) else [("negative", -1)]
    elif isinstance(value, float):
        wrong = [("text", "not-a-number"), ("bool", True), ("negative", -0.5)]
    elif isinstance(value, str):
        wrong = [("bool", True)] + ([] if matches(config, path, TEXT_OR_INTEGER) else [("number", 7)])
    elif isinstance(value, list):
        return [("mapping for list", {"0": value[0] if value else 1}), ("text for list", "x")] + \
            ([] if nullable else [("null", None)])
    else:
        return [("list for mapping", list(value.values())[:1] or [1]), ("text for mapping", "x"),
                ("number for mapping", 3)] + ([] if nullable else [("null", None)])
    wrong += [("list", [value]), ("mapping", {"key": value})]
    return wrong + ([] if nullable else [("null", None)])


def nodes(tree, path=()):
    """Every (path, value) below the root, depth first in document order."""
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, value in items:
        yield (*path, key), value
        yield from nodes(value, (*path, key))


def structural(base: str, config: dict) -> list[Mutation]:
    """Unknown keys in every mapping (the root too), trust_remote_code in every model and dataset."""
    out = []
    mappings = [((), config)] + [(p, v) for p, v in nodes(config) if isinstance(v, dict)]
    for path, mapping in mappings:
        if dotted(path) not in NAME_MAPS:
            out.append(Mutation(base, "unknown key", (*path, "bogus_key"), 1, dotted((*path, "bogus_key"))))
    entries = {("measures",): config["measures"], ("align", "aligners"): config.get("align", {}).get("aligners", {})}
    for prefix, specs in entries.items():
        for label, spec in specs.items():
            if "params" not in spec:  # a parameter where the entry has none yet
                path = (*prefix, label, "params")
                out.append(Mutation(base, "unknown parameter", path, {"bogus_key": 1}, dotted((*path, "bogus_key"))))
    for section in ("models", "datasets"):
        for name, spec in config[section].items():
            at = [(section, name)] + ([(section, name, "config")] if spec.get("source") in ("init", "pretrain") else [])
            for path in at:
                key = (*path, "trust_remote_code")
                out.append(Mutation(base, "remote code", key, True, f"{dotted(key)}' is refused: reprsim never executes"))
    return out


def references(base: str, config: dict) -> list[Mutation]:
    """Names that point at nothing the config defines."""
    out = []
    models = config["models"]
    for name, spec in models.items():
        fields = {"finetune": ("base", "dataset"), "init": ("tokenizer",),
                  "pretrain": ("dataset", "tokenizer")}.get(spec["source"], ())
        for field in fields:
            out.append(Mutation(base, "undefined reference", ("models", name, field), "nope", f"models.{name}.{field}"))
        lists = [other for other, s in models.items() if "seeds" in s and other != name]
        if fields and lists:  # a seeds list is not one model: base or tokenizer must name one of its models
            out.append(Mutation(base, "seeds list reference", ("models", name, fields[0]), lists[0],
                                f"models.{name}.{fields[0]}"))
    extracted = config.get("extraction", {}).get("datasets") or sorted(config["datasets"])
    out.append(Mutation(base, "undefined reference", ("extraction", "datasets"), [*extracted, "nope"],
                        "extraction.datasets"))
    out.append(Mutation(base, "undefined reference", ("report", "distance_measure"), "nope", "report.distance_measure"))
    if config.get("align", {}).get("enabled", True):
        out.append(Mutation(base, "undefined reference", ("align", "pairs"), [[next(iter(models)), "nope"]],
                            "align.pairs"))
        out.append(Mutation(base, "undefined reference", ("align", "synthetic", "models"), ["nope"],
                            "align.synthetic.models"))
    return out


def wrong_types(base: str, config: dict) -> list[Mutation]:
    return [Mutation(base, kind, path, wrong, dotted(path))
            for path, value in nodes(config) for kind, wrong in wrong_values(config, path, value)]


PARSED = {base: load_yaml(path) for base, path in BASES.items()}


def all_mutations() -> list[Mutation]:
    certain, typed_ones = [], []
    for base, config in PARSED.items():
        certain += structural(base, config) + references(base, config)
        typed_ones += wrong_types(base, config)
    return certain + random.Random(SEED).sample(typed_ones, min(SAMPLED, len(typed_ones)))


def apply(mutation: Mutation) -> dict:
    config = copy.deepcopy(PARSED[mutation.base])
    parent = config
    for key in mutation.path[:-1]:
        parent = parent.setdefault(key, {}) if isinstance(parent, dict) else parent[key]
    parent[mutation.path[-1]] = copy.deepcopy(mutation.value)
    return config


MUTATIONS = all_mutations()


def test_the_fuzz_is_large_and_covers_every_kind():
    assert len(MUTATIONS) >= 200
    kinds = {m.kind for m in MUTATIONS}
    assert {"unknown key", "unknown parameter", "remote code", "undefined reference", "seeds list reference",
            "text", "number", "bool", "float", "negative", "null", "list", "mapping",
            "mapping for list", "list for mapping"} <= kinds
    names = " ".join(m.names for m in MUTATIONS if m.kind == "unknown key")
    for inside in (".params.bogus_key", ".config.bogus_key", ".columns.bogus_key", ".freeze.bogus_key",
                   ".files.bogus_key", ".heads.bogus_key", ".synthetic.bogus_key"):
        assert inside in names


@pytest.mark.parametrize("base", sorted(BASES))
def test_the_bases_are_valid(base):
    validate_config(copy.deepcopy(PARSED[base]))


@pytest.mark.parametrize("mutation", MUTATIONS, ids=str)
def test_every_mutation_is_a_config_error_naming_its_key(mutation):
    config = apply(mutation)
    with pytest.raises(ConfigError) as caught:
        validate_config(config)
    assert f"'{mutation.names}" in str(caught.value), f"{mutation}: the message does not name the key:\n{caught.value}"
