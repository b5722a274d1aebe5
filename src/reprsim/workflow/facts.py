"""What the resource model needs to know about a job's inputs: rows per split of a dataset, a model's size,
a store's shape.

`FileFacts` reads them from the files the workflow writes (a dataset's meta.json, a model's meta.json and
config.json, a Zarr store's zarr.json); for an input not produced yet it raises a FileNotFoundError naming
that input, which Snakemake shows as <TBD> and evaluates again when the job is ready. `reprsim plan` uses
the predicting subclass in reprsim.workflow.predicted, so that both ask the same questions of the same
formulas. Standard library only: the rules build one whenever the DAG is built.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Mapping

from reprsim.workflow import paths
from reprsim.workflow.resources import pretrain_facts


def not_produced_yet(path: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, "not produced yet", str(path))


def read_json(path: str) -> dict:
    with open(path) as handle:
        return json.load(handle)


class FileFacts:
    """Facts of the results tree under the working directory, for the workflow in `config`."""

    def __init__(self, config: Mapping):
        self.config = config

    def dataset_sizes(self, dataset: str) -> dict[str, int]:
        """Rows per split of a prepared dataset: its meta.json's `sizes`."""
        directory = paths.DATASET.format(dataset=dataset)
        path = os.path.join(directory, "meta.json")
        if not os.path.exists(path):
            raise not_produced_yet(directory)
        return read_json(path)["sizes"]

    def model(self, name: str) -> dict:
        """meta.json of model `name` (n_parameters, n_layers, hidden_size). A fine-tuned model has its base's
        architecture, so before it exists (a group job that also trains it, a dry run) its base's facts stand
        in; a pretrained model's are estimated from its spec. Missing: the error names `name`'s directory,
        the input of the job that asked."""
        asked = paths.MODEL.format(model=name)
        while True:
            path = os.path.join(paths.MODEL.format(model=name), "meta.json")
            if os.path.exists(path):
                return read_json(path)
            spec = self.config["models"][name]
            if spec["source"] == "pretrain":
                try:
                    vocab_size = self.vocab_size(spec)
                except FileNotFoundError as missing:  # a borrowed tokenizer's model: not this job's input
                    raise not_produced_yet(asked) from missing
                return {**pretrain_facts(spec, vocab_size), "spec": spec}
            if spec["source"] != "finetune":
                return self.missing_model(name, asked)
            name = spec["base"]

    def missing_model(self, name: str, asked: str) -> dict:
        raise not_produced_yet(asked)

    def vocab_size(self, spec: Mapping) -> int:
        """A pretrained model's vocabulary: at most its trained tokenizer's vocab_size, or the vocab_size in
        the config.json of the model whose tokenizer it borrows."""
        tokenizer = spec["tokenizer"]
        if isinstance(tokenizer, dict):
            return tokenizer["train"]["vocab_size"]
        directory = paths.MODEL.format(model=tokenizer)
        path = os.path.join(directory, "config.json")
        if not os.path.exists(path):
            return self.missing_vocabulary(tokenizer, directory)
        return read_json(path)["vocab_size"]

    def missing_vocabulary(self, model: str, directory: str) -> int:
        raise not_produced_yet(directory)

    def store(self, dataset: str, model: str) -> dict:
        """A Zarr store's attributes (n_examples, n_layers, hidden_size, split_sizes)."""
        store_path = paths.STORE.format(dataset=dataset, model=model)
        path = os.path.join(store_path, "zarr.json")
        if not os.path.exists(path):
            return self.missing_store(dataset, model, store_path)
        return read_json(path)["attributes"]

    def missing_store(self, dataset: str, model: str, store_path: str) -> dict:
        raise not_produced_yet(store_path)
