"""The models a configuration names in lists: a fine-tuned model's seeds and a pretrained model's checkpoints,
expanded to one model each."""

from __future__ import annotations

from collections.abc import Iterator


def _expand_seeds(config: dict, written: dict[str, str]) -> Iterator[str]:
    """Replace each fine-tuned model with `seeds: [...]` by one model per seed, named {name}-s{seed},
    and note in `written` each one's name in the config (for messages about the key the user wrote).

    Yields a problem when an expanded name collides or another model refers to the list's name.
    """
    models = config["models"]
    expanded = {}
    for name, spec in models.items():
        if spec.get("source") != "finetune" or "seeds" not in spec:
            expanded[name] = spec
            continue
        for seed in spec["seeds"]:
            child = f"{name}-s{seed}"
            if child in models or child in expanded:
                yield f"models.{name}.seeds: the expanded name {child!r} is already a model in this config"
            expanded[child] = {**{k: v for k, v in spec.items() if k != "seeds"}, "seed": seed}
            written[child] = name
    for name, spec in expanded.items():
        for key in ("base", "tokenizer"):
            target = spec.get(key)  # a trained tokenizer ({train: ...}) names no model
            if isinstance(target, str) and target in models and target not in expanded:
                yield (f"key 'models.{written.get(name, name)}.{key}' is {target!r}, a seeds list; name one of its models "
                       f"({', '.join(n for n in expanded if n.startswith(target + '-s'))})")
    config["models"] = expanded


def _expand_checkpoints(config: dict, written: dict[str, str]) -> Iterator[str]:
    """Add, for each pretrained model with `checkpoints: [k, ...]`, a model {name}@{k} per checkpoint: the
    parent's spec without `checkpoints`, with `checkpoint: k` (its seed kept, so the checkpoints of seed siblings
    at one step are seed siblings by reprsim.design.relations.recipe); note in `written` each one's name in the config.

    Yields a problem when a checkpoint is not below the model's steps or an expanded name collides.
    """
    models = config["models"]
    expanded = dict(models)
    for name, spec in models.items():
        if spec.get("source") != "pretrain":
            continue
        for step in spec.get("checkpoints") or []:
            if step >= spec["steps"]:
                yield (f"key 'models.{written.get(name, name)}.checkpoints' has {step}, not below steps = "
                       f"{spec['steps']}: a checkpoint is saved after that step of a run of steps")
                continue
            child = f"{name}@{step}"
            if child in expanded:
                yield f"models.{name}.checkpoints: the expanded name {child!r} is already a model in this config"
                continue
            expanded[child] = {**{k: v for k, v in spec.items() if k != "checkpoints"}, "checkpoint": step}
            written[child] = written.get(name, name)
    config["models"] = expanded
