"""Models given as stored activations (config `source: activations`, "brought" models): which configured models
they are, what part of the workflow they can take part in, the files a brought split consists of and the layers and
width its headers declare.

Standard library only: the rules (rules/common.smk, rules/extract.smk), the config check and `reprsim plan` use it
whenever the DAG is built. Reading, validating and importing the files is the extract stage's
(reprsim.stages.extract.brought).

A brought model has no network: it takes part in the pairs of its own pooling (a pooled representation: mean, cls
or last) on its own dataset, in the aligners of that representation, and in nothing that runs or reads a network
(NO_NETWORK).
"""

from __future__ import annotations

import ast
import json
import os
import re
import struct
import zipfile
from collections.abc import Iterable, Mapping

ACTIVATIONS = "activations"  # the model source
# per split: a directory of .npy files, an .npz, a .safetensors file, or a Zarr store in reprsim's own layout
FORMATS = ("npy", "npz", "safetensors", "zarr")
LAYER = re.compile(r"layer_(0|[1-9][0-9]*)")  # layer_0, layer_1, ... (no leading zeros)
ROW_IDS = "row_ids"
# where a brought model cannot take part, as the config check names it: each needs the network itself
NO_NETWORK = {
    "finetune": "fine-tuning (as the base of models.{model}, source: finetune)",
    "tokenizer": "a borrowed tokenizer (models.{model}.tokenizer)",
    "stitching": "model stitching (stitching.pairs)",
    "attention": "attention similarity (similarity.attention.pairs: it has no attention maps)",
    "tokens": "token-level CKA (similarity.tokens.pairs: it has no token states)",
    "word": "word-level representation pairs (similarity.word.pairs: it has no word states)",
    "monotonicity": "grounding's monotonicity and layer-test models (grounding.monotonicity_models)",
    "deletion": "grounding's deletion models (grounding.deletion.models)",
    "prediction": "grounding's prediction models (grounding.prediction.models)",
    "universality": "a universality study (universality: it has no recipe and no quality in a meta.json)",
}


def is_brought(spec: Mapping) -> bool:
    return spec.get("source") == ACTIVATIONS


def brought_models(models: Mapping[str, Mapping]) -> list[str]:
    """The brought models' names, sorted."""
    return sorted(name for name, spec in models.items() if is_brought(spec))


def takes_part(models: Mapping[str, Mapping], name: str, representation: str | None = None,
               dataset: str | None = None) -> bool:
    """Whether model `name` can be compared at `representation` (None: any) on `dataset` (None: any): a brought
    model only at its pooling and on its dataset, every other model everywhere."""
    spec = models[name]
    if not is_brought(spec):
        return True
    return (representation is None or representation == spec["pooling"]) and (
        dataset is None or dataset == spec["dataset"])


def taking_part(models: Mapping[str, Mapping], pairs: Iterable, representation: str | None = None,
                dataset: str | None = None) -> list[tuple[str, str]]:
    """The `pairs` whose two models both take part (:func:`takes_part`)."""
    return [tuple(pair) for pair in pairs
            if all(takes_part(models, name, representation, dataset) for name in pair)]


def with_store(models: Mapping[str, Mapping], names: Iterable[str], dataset: str) -> list[str]:
    """Those of `names` that have an activation store on `dataset` (an extracted dataset: every model with a
    network, and the brought models of that dataset)."""
    return [name for name in names if takes_part(models, name, dataset=dataset)]


def network_models(models: Mapping[str, Mapping], names: Iterable[str] | None = None) -> list[str]:
    """Those of `names` (default: every model) that have a network."""
    return [name for name in (models if names is None else names) if not is_brought(models[name])]


# ----------------------------------------------------------------- the files of one brought split
def format_from_name(path: str | os.PathLike) -> str | None:
    """The format a brought split's name says (.npz, .safetensors, .zarr), or None."""
    name = os.fspath(path).rstrip("/\\")
    return next((kind for suffix, kind in ((".npz", "npz"), (".safetensors", "safetensors"), (".zarr", "zarr"))
                 if name.endswith(suffix)), None)


def source_format(path: str | os.PathLike) -> str:
    """The format of a brought split's `path`, from its name (:func:`format_from_name`) or, for a directory,
    its content (zarr.json or .zgroup: a Zarr store; else a directory of .npy files). ValueError for anything
    else, naming the accepted formats."""
    path = os.fspath(path)
    named = format_from_name(path)
    if named is not None:
        return named
    if os.path.isdir(path):
        if any(os.path.isfile(os.path.join(path, marker)) for marker in ("zarr.json", ".zgroup")):
            return "zarr"
        return "npy"
    what = "a file" if os.path.isfile(path) else "no file or directory (yet)"
    raise ValueError(f"{path} is {what} of no accepted format; give a directory of layer_<l>.npy files and "
                     "row_ids.npy, an .npz or a .safetensors file holding arrays of those names, or a Zarr store "
                     "(*.zarr) in reprsim's activation-store layout")


def source_files(path: str | os.PathLike, pooling: str) -> list[str]:
    """The files a brought split is read from, as the import rule declares them (so a changed file re-imports):
    the file itself; a directory's .npy files; a Zarr store's root metadata and the arrays read (pooled/<pooling>,
    examples/split, examples/row). A path that does not exist (yet) or has no accepted format is declared as it
    is (Snakemake names it when missing; the import names what is wrong)."""
    path = os.fspath(path)
    try:
        kind = source_format(path)
    except ValueError:
        return [path]
    if kind in ("npz", "safetensors") or not os.path.isdir(path):
        return [path]
    if kind == "npy":
        found = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".npy"))
        return found or [path]
    files = [os.path.join(path, marker) for marker in ("zarr.json", ".zgroup", ".zattrs")
             if os.path.isfile(os.path.join(path, marker))]
    for array in (f"pooled/{pooling}", "examples/split", "examples/row"):
        for root, _, names in os.walk(os.path.join(path, *array.split("/"))):
            files += [os.path.join(root, name) for name in names]
    return sorted(files) or [path]


def _npy_shape(handle) -> tuple[int, ...]:
    """The shape in an .npy header (numpy's format: magic, version, header length, a dict literal)."""
    if handle.read(6) != b"\x93NUMPY":
        raise ValueError("not an .npy file")
    major = handle.read(2)[0]
    length = struct.unpack("<H" if major == 1 else "<I", handle.read(2 if major == 1 else 4))[0]
    return tuple(ast.literal_eval(handle.read(length).decode("latin1"))["shape"])


def declared_shape(path: str | os.PathLike, pooling: str) -> tuple[int, int]:
    """(layers, width) that a brought split's headers declare, without reading its values (`reprsim plan`);
    ValueError or OSError where they cannot be read."""
    path = os.fspath(path)
    kind = source_format(path)
    shapes: dict[str, tuple[int, ...]] = {}
    if kind == "npy":
        for name in os.listdir(path):
            if LAYER.fullmatch(name.removesuffix(".npy")):
                with open(os.path.join(path, name), "rb") as handle:
                    shapes[name.removesuffix(".npy")] = _npy_shape(handle)
    elif kind == "npz":
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                if LAYER.fullmatch(name.removesuffix(".npy")):
                    with archive.open(name) as handle:
                        shapes[name.removesuffix(".npy")] = _npy_shape(handle)
    elif kind == "safetensors":
        with open(path, "rb") as handle:
            header = json.loads(handle.read(struct.unpack("<Q", handle.read(8))[0]))
        shapes = {name: tuple(entry["shape"]) for name, entry in header.items() if LAYER.fullmatch(name)}
    else:
        with open(os.path.join(path, "pooled", pooling, "zarr.json")) as handle:
            layers, _, width = json.load(handle)["shape"]
        return int(layers), int(width)
    if not shapes:
        raise ValueError(f"{path} declares no layer_<l> arrays")
    return len(shapes), int(next(iter(shapes.values()))[-1])
