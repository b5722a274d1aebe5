"""How much work a configured job does, as the workflow plans it: torch-free, so the rules can
ask whenever the DAG is built (the fine-tuning stage imports the same function)."""

from __future__ import annotations

import math

DEFAULT_STEPS = 300  # fine-tuning steps when a model spec gives neither `steps` nor `epochs`


def training_steps(spec: dict, n_train: int) -> int:
    """`steps` when given, else `epochs` passes over the train split, else DEFAULT_STEPS."""
    if spec.get("steps") is not None:
        return int(spec["steps"])
    if spec.get("epochs") is not None:
        return max(1, math.ceil(float(spec["epochs"]) * n_train / int(spec["batch_size"])))
    return DEFAULT_STEPS
