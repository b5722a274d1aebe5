"""Device selection for GPU rules: `auto` takes CUDA when present, else CPU."""

from __future__ import annotations

import os

import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(requested: str = "auto") -> torch.device:
    """Map the config's `device` to a torch device, failing clearly when CUDA is asked for but absent."""
    if requested not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {requested!r}")
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "config asks for device: cuda but torch sees no CUDA device "
            f"(torch {torch.__version__}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
        )
    return torch.device(requested)


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return "cpu"
