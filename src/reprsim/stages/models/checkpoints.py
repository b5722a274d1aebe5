"""A pretrained model's checkpoints as models of their own (rule checkpoint_model).

A pretraining job with `checkpoints: [k, ...]` saves the model after step k into `<its dir>/checkpoints/<k>/`
(:mod:`reprsim.stages.models.pretrain`); the configuration lists each as model `{name}@{k}`, whose spec is the
parent's without `checkpoints` and with `checkpoint: k` (reprsim.config). Copying the saved directory out
makes it a model like any other, read by extraction and every later stage. Torch-free: the copy is files only.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from reprsim.io.datasets import read_meta
from reprsim.io.outputs import atomic_directory

SEPARATOR = "@"  # a configured name cannot hold it (the schema's names), so {name}@{k} names no other model


def checkpoint_name(parent: str, step: int) -> str:
    return f"{parent}{SEPARATOR}{step}"


def checkpoint_spec(spec: dict, step: int) -> dict:
    """The spec of the checkpoint after `step` of a pretrained model of `spec`: the parent's without its
    checkpoints list, with `checkpoint: step` (as reprsim.config expands it), so that the checkpoints of seed
    siblings at one step are seed siblings themselves."""
    return {**{key: value for key, value in spec.items() if key != "checkpoints"}, "checkpoint": int(step)}


def copy_checkpoint(parent_dir: str | Path, name: str, spec: dict, out_dir: str | Path) -> dict[str, Any]:
    """Copy the checkpoint `spec["checkpoint"]` that the pretrained model in `parent_dir` saved into `out_dir`
    (atomically), as model `name`. Refuses one saved for another spec (a parent made under other settings).
    Returns its meta.json."""
    step = int(spec["checkpoint"])
    source = Path(parent_dir) / "checkpoints" / str(step)
    if not source.is_dir():
        saved = sorted((p.name for p in (Path(parent_dir) / "checkpoints").glob("*") if p.name.isdigit()), key=int)
        raise FileNotFoundError(f"model {name!r}: {source} does not exist; the pretrained model in {parent_dir} saved "
                                f"checkpoints at steps {', '.join(saved) or 'none'}: remake it with checkpoints "
                                f"including {step}")
    meta = read_meta(source)
    if meta.get("spec") != spec or meta.get("name") != name:
        raise ValueError(f"model {name!r}: the checkpoint in {source} was saved as {meta.get('name')!r} with spec "
                         f"{meta.get('spec')}, not {spec}: remake its pretrained model")
    with atomic_directory(out_dir) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True)
    print(f"{name}: step {step} of {meta['steps']}, validation cross-entropy {meta['validation_cross_entropy']:.4f} "
          f"(unigram {meta['unigram_cross_entropy']:.4f}), copied from {source}", flush=True)
    return meta
