"""The files a model directory must hold (save_pretrained layout, safetensors weights only), checked
without loading anything: the materialise stage checks a source directory with it, the model loaders
a materialised one before loading, and `reprsim verify` every model of a results tree. Torch-free.
"""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"  # sharded weights: parameter -> shard file
PICKLED = ("pytorch_model.bin", "pytorch_model.bin.index.json")  # never loaded: unpickling runs code
# any of these lets AutoTokenizer load (save_pretrained always writes tokenizer_config.json)
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "vocab.txt", "vocab.json", "spiece.model",
                   "tokenizer.model")


def weight_files(directory: str | Path) -> list[Path]:
    """The safetensors files holding the weights: the one file, or the shards the index names."""
    directory = Path(directory)
    index = directory / WEIGHTS_INDEX
    if index.is_file():
        shards = json.loads(index.read_text())["weight_map"].values()
        return [directory / name for name in sorted(set(shards))]
    return [directory / WEIGHTS]


def safetensors_problem(path: Path) -> str | None:
    """What is wrong with a safetensors file, judged from its header: missing, truncated, or not safetensors.

    Layout: an 8-byte little-endian header length, a JSON header giving each tensor's byte range,
    then the data, which must end exactly where the last range ends.
    """
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    try:
        with open(path, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if 8 + length > size:
                return f"truncated: {size} bytes, shorter than its {length}-byte header"
            header = json.loads(handle.read(length))
        end = max((entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"), default=0)
    except (struct.error, ValueError, KeyError, TypeError, IndexError) as error:
        return f"not a safetensors file ({type(error).__name__}: {error})"
    expected = 8 + length + end
    if size < expected:
        return f"truncated: {size} bytes where its header describes {expected}"
    if size > expected:
        return f"{size - expected} bytes beyond the {expected} its header describes"
    return None


def weights_problems(directory: str | Path) -> list[tuple[Path, str]]:
    """(file, problem) for the weights of the model directory: none found (the directory is named),
    pickled only, or a damaged file."""
    directory = Path(directory)
    if not (directory / WEIGHTS).is_file() and not (directory / WEIGHTS_INDEX).is_file():
        pickled = [name for name in PICKLED if (directory / name).is_file()]
        problem = (f"no safetensors weights, only {pickled[0]} (a pickle, which reprsim never loads)"
                   if pickled else f"no weights ({WEIGHTS} or {WEIGHTS_INDEX})")
        return [(directory, problem)]
    try:
        files = weight_files(directory)
    except (ValueError, KeyError, AttributeError) as error:
        return [(directory / WEIGHTS_INDEX, f"not a valid shard index ({type(error).__name__}: {error})")]
    return [(path, problem) for path in files if (problem := safetensors_problem(path))]


def tokenizer_problems(directory: str | Path) -> list[tuple[Path, str]]:
    directory = Path(directory)
    if any((directory / name).is_file() for name in TOKENIZER_FILES):
        return []
    return [(directory, f"no tokenizer files (any of {', '.join(TOKENIZER_FILES)})")]


def config_problems(directory: str | Path) -> list[tuple[Path, str]]:
    path = Path(directory) / CONFIG
    return [] if path.is_file() else [(path, "missing")]


def model_problems(directory: str | Path) -> list[tuple[Path, str]]:
    """(file, problem) for everything a model directory lacks: config.json, weights, tokenizer."""
    return config_problems(directory) + weights_problems(directory) + tokenizer_problems(directory)


def locate_package_model(package: str, subdir: str | None = None) -> Path:
    """The model directory inside installed package `package` (found by its config.json)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"Python package {package!r} is not installed; install it (e.g. pip install "
            f"{package.replace('_', '-')}) or use another model source"
        )
    root = Path(list(spec.submodule_search_locations)[0])
    if subdir:
        candidate = root / subdir
        if not (candidate / "config.json").is_file():
            raise FileNotFoundError(f"{candidate} has no config.json; check 'subdir'")
        return candidate
    found = sorted(p.parent for p in root.rglob("config.json") if (p.parent / "tokenizer_config.json").exists())
    if not found:
        raise FileNotFoundError(f"no model directory (config.json + tokenizer) inside package {package!r} at {root}")
    return found[0]
