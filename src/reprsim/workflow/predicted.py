"""Facts of inputs that do not exist yet, predicted for `reprsim plan`: what FileFacts would read once the
workflow has run.

- Datasets: rows per split after the workflow's own carving (split_fractions) and capping (max_examples)
  of the source's rows. A hub dataset's rows come from the catalogue (hub_catalogue.yaml: rows per hub
  split, mean tokens per row), a shipped sample's from SAMPLE_SIZES, a local one's from its files, read by
  the `local_rows` reader the caller passes (the data stage's own reader, so the count is the one prepare
  gets; this package imports no stage).
- Models: a hub model's size from the catalogue; a local or packaged model's from its config.json; a
  random one's from its architecture's defaults and its spec's config; a fine-tuned model has its base's; a
  pretrained one's comes from its spec (resources.pretrain_facts).
- Stores: rows of the extracted splits, the model's depth and width.
What cannot be predicted (a hub model missing from the catalogue, a local path not yet downloaded) raises
UnknownSize naming the model or dataset and the way out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path

from reprsim.io.model_files import locate_package_model
from reprsim.workflow import brought
from reprsim.workflow.facts import FileFacts, read_json
from reprsim.workflow.resources import split_rows

CATALOGUE = Path(__file__).with_name("hub_catalogue.yaml")
SPLITS = ("train", "validation", "test")
SAMPLE_SIZES = {"sst2": {"train": 3000, "validation": 500, "test": 872},  # reprsim/stages/data/samples
                "cola": {"train": 3000, "validation": 500, "test": 500}}
DEFAULT_TOKENS_PER_ROW = 64  # a dataset the catalogue does not list: half the default max_length

# transformers' config defaults of the random-init architectures (model_init.architecture)
ARCHITECTURE_DEFAULTS = {
    "bert": {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072, "vocab_size": 30522,
             "max_position_embeddings": 512},
    "roberta": {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072, "vocab_size": 50265,
                "max_position_embeddings": 514},
    "electra": {"hidden_size": 256, "num_hidden_layers": 12, "intermediate_size": 1024, "vocab_size": 30522,
                "max_position_embeddings": 512},
    "distilbert": {"dim": 768, "n_layers": 6, "hidden_dim": 3072, "vocab_size": 30522,
                   "max_position_embeddings": 512},
    "gpt2": {"n_embd": 768, "n_layer": 12, "vocab_size": 50257, "n_positions": 1024},
    "gpt_neox": {"hidden_size": 6144, "num_hidden_layers": 44, "intermediate_size": 24576, "vocab_size": 50432,
                 "max_position_embeddings": 2048},
}
ALIASES = {  # config.json spellings of the same quantity across architectures
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "n_layers": ("num_hidden_layers", "n_layer", "n_layers"),
    "inner": ("intermediate_size", "n_inner", "d_inner", "hidden_dim"),
    "vocab_size": ("vocab_size",),
    "positions": ("max_position_embeddings", "n_positions"),
}


class UnknownSize(LookupError):
    """A model or dataset whose size cannot be known before it is downloaded."""


@cache
def catalogue() -> dict:
    import yaml

    return yaml.safe_load(CATALOGUE.read_text())


def _first(config: Mapping, key: str, default=None):
    return next((config[k] for k in ALIASES[key] if config.get(k) is not None), default)


def transformer_facts(config: Mapping) -> dict:
    """n_parameters, n_layers, hidden_size and vocab_size of an encoder or decoder from its config.json
    fields: token and position embeddings, and per block attention (4d² + 4d), an MLP (2·d·inner + inner + d)
    and two LayerNorms; heads and poolers are left out (a few d² at most)."""
    width, layers = _first(config, "hidden_size"), _first(config, "n_layers")
    inner = _first(config, "inner") or 4 * width
    vocab, positions = _first(config, "vocab_size", 0), _first(config, "positions", 0)
    block = 4 * width * width + 4 * width + 2 * width * inner + inner + width + 4 * width
    return {"n_parameters": (vocab + positions) * width + layers * block + 2 * width, "n_layers": layers,
            "hidden_size": width, "vocab_size": vocab}


def planned_sizes(raw: Mapping[str, int], spec: Mapping) -> dict[str, int]:
    """Rows per split as prepare_dataset leaves them: splits the source lacks carved from train
    (split_fractions, 0.1 each by default), then train's part (about 1/of of it: parts are equal up to
    repeated texts), then each split capped at max_examples."""
    sizes = {split: int(raw[split]) for split in SPLITS if split in raw}
    if spec["source"] != "sample":
        fractions = spec.get("split_fractions") or {}
        train = sizes["train"]
        for split in SPLITS[1:]:
            if split not in sizes:
                sizes[split] = round(fractions.get(split, 0.1) * train)
                sizes["train"] -= sizes[split]
    if spec.get("part"):
        sizes["train"] = round(sizes["train"] / spec["part"]["of"])
    cap = spec.get("max_examples")
    return {split: min(rows, cap or rows) for split, rows in sizes.items()}


class PredictedFacts(FileFacts):
    """FileFacts that predict what is missing (module docstring). `local_rows(name, spec)`: rows per split of a
    local dataset's files (reprsim.cli passes the data stage's reader); None: local datasets are unknown."""

    def __init__(self, config: Mapping, local_rows: Callable[[str, Mapping], dict[str, int]] | None = None):
        super().__init__(config)
        self.local_rows = local_rows
        self._counted: dict[str, dict[str, int]] = {}  # a local dataset's files are read once per plan, not per job

    def dataset_sizes(self, dataset: str) -> dict[str, int]:
        try:
            return super().dataset_sizes(dataset)
        except FileNotFoundError:
            return planned_sizes(self.source_rows(dataset), self.config["datasets"][dataset])

    def source_rows(self, dataset: str) -> dict[str, int]:
        """Rows per split of the source, before carving and capping."""
        spec = self.config["datasets"][dataset]
        if spec["source"] == "builtin":
            return {"train": spec["n_examples"]}
        if spec["source"] == "sample":
            return SAMPLE_SIZES[spec["name"]]
        if spec["source"] == "local":
            if self.local_rows is None:
                raise UnknownSize(f"dataset {dataset!r}: a local dataset's rows are counted by the data stage's "
                                  "reader, which this caller did not pass (reprsim plan does)")
            if dataset not in self._counted:
                self._counted[dataset] = self.local_rows(dataset, spec)
            return self._counted[dataset]
        entry = self.hub_dataset(dataset)
        return {ours: entry["rows"][theirs] for ours, theirs in spec["splits"].items()}

    def hub_dataset(self, dataset: str) -> dict:
        spec = self.config["datasets"][dataset]
        key = spec["id"] + (f"/{spec['config']}" if spec.get("config") else "")
        entry = catalogue()["datasets"].get(key)
        if entry is None:
            raise UnknownSize(f"dataset {dataset!r}: hub dataset {key} is not in {CATALOGUE.name}, so its size is "
                              "unknown offline; add its rows per split there, or prepare it first (snakemake "
                              f"results/datasets/{dataset})")
        missing = sorted(set(spec["splits"].values()) - set(entry["rows"]))
        if missing:
            raise UnknownSize(f"dataset {dataset!r}: {key} has no split(s) {missing} in {CATALOGUE.name} "
                              f"(it lists {sorted(entry['rows'])}); check datasets.{dataset}.splits")
        return entry

    def tokens_per_row(self, dataset: str) -> float:
        """Mean tokens per row (special tokens included, before truncation), for the stores' size."""
        spec = self.config["datasets"][dataset]
        if spec["source"] == "hf":
            return float(self.hub_dataset(dataset).get("tokens_per_row", DEFAULT_TOKENS_PER_ROW))
        name = spec.get("name") or spec.get("config") or dataset
        return float(catalogue()["local_tokens_per_row"].get(name, DEFAULT_TOKENS_PER_ROW))

    def missing_model(self, name: str, asked: str) -> dict:
        spec = self.config["models"][name]
        if brought.is_brought(spec):
            raise UnknownSize(f"model {name!r} is brought activations (source: activations): it has no network, so "
                              "no model size")
        if spec["source"] == "hf":
            entry = catalogue()["models"].get(spec["id"])
            if entry is None:
                raise UnknownSize(f"model {name!r}: hub model {spec['id']} is not in {CATALOGUE.name}, so its size "
                                  "is unknown offline; add it there (n_parameters, n_layers, hidden_size, vocab_size "
                                  f"from its config.json), or download it first (snakemake {asked})")
            return dict(entry)
        if spec["source"] == "init":
            config = {**ARCHITECTURE_DEFAULTS[spec["architecture"]], **spec.get("config", {})}
            if "vocab_size" not in spec.get("config", {}):
                config["vocab_size"] = self.vocab_size({"tokenizer": spec["tokenizer"]})
            return transformer_facts(config)
        directory = self.local_directory(spec)
        path = os.path.join(directory, "config.json") if directory else None
        if path is None or not os.path.exists(path):
            raise UnknownSize(f"model {name!r}: {spec['source']} model without a readable config.json "
                              f"({path or spec.get('package')}); download or install it first")
        return transformer_facts(read_json(path))

    @staticmethod
    def local_directory(spec: Mapping) -> str | None:
        if spec["source"] == "local":
            return spec["path"]
        try:
            return str(locate_package_model(spec["package"], spec.get("subdir")))
        except (ModuleNotFoundError, FileNotFoundError):
            return None

    def missing_vocabulary(self, model: str, directory: str) -> int:
        return self.model(model)["vocab_size"]

    def missing_store(self, dataset: str, model: str, store_path: str) -> dict:
        extraction = self.config["extraction"]
        sizes = self.dataset_sizes(dataset)
        cap = extraction.get("max_examples")
        spec = self.config["models"][model]
        splits = [s for s in extraction["splits"] if not brought.is_brought(spec) or s in spec["splits"]]
        split_sizes = {split: min(sizes.get(split, 0), cap or sizes.get(split, 0)) for split in splits}
        if brought.is_brought(spec):  # the rows extraction would take of its splits; depth and width from its files
            path = spec["splits"][splits[0]]
            try:
                layers, width = brought.declared_shape(path, spec["pooling"])
            except (OSError, ValueError, KeyError) as error:
                raise UnknownSize(f"model {model!r}: its brought activations {path} cannot be read yet ({error}), so "
                                  "their layers and width are unknown; make or fix them first") from error
            return {"n_examples": sum(split_sizes.values()), "n_layers": layers - 1, "hidden_size": width,
                    "split_sizes": split_sizes, "poolings": [spec["pooling"]], "tokens": False}
        facts = self.model(model)
        return {"n_examples": split_rows(sizes, extraction["splits"], cap), "n_layers": facts["n_layers"],
                "hidden_size": facts["hidden_size"], "split_sizes": split_sizes}

