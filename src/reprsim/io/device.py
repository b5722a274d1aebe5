"""Device selection for GPU rules: `auto` takes CUDA when present (in a SLURM job: the GPU SLURM
allocated it, CUDA_VISIBLE_DEVICES), else CPU."""

from __future__ import annotations

import os

import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(requested: str = "auto") -> torch.device:
    """Map the config's `device` to a torch device, failing clearly when CUDA is asked for but absent."""
    if requested not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {requested!r}")
    if requested == "auto":
        if slurm_allocated_no_gpu():
            return torch.device("cpu")
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "config asks for device: cuda but torch sees no CUDA device "
            f"(torch {torch.__version__}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
        )
    return torch.device(requested)


def slurm_allocated_no_gpu() -> bool:
    """Whether this runs in a SLURM job that was allocated no GPU.

    SLURM sets CUDA_VISIBLE_DEVICES to the GPUs it allocated a job (so torch's cuda:0 is the
    job's own GPU) and leaves it unset when it allocated none; where devices are not fenced
    off by cgroups torch would then see, and use, GPUs that belong to other jobs.
    """
    return "SLURM_JOB_ID" in os.environ and "CUDA_VISIBLE_DEVICES" not in os.environ


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return "cpu"
