"""How the configured models are related, from their specs (config `models`, after validation):
recipes, seed siblings, each fine-tuned model's base, and groups of related models. Torch-free: the
workflow's rules use it when the DAG is built."""

from __future__ import annotations

import json
from typing import Mapping

Specs = Mapping[str, Mapping]


def recipe(spec: Mapping, without: tuple[str, ...] = ()) -> str:
    """A model's recipe: its spec but the seed (and the keys `without`), as canonical JSON. Models with equal
    recipes and different seeds are seed siblings."""
    return json.dumps({key: value for key, value in spec.items() if key not in ("seed", "seeds", *without)},
                      sort_keys=True, default=str)


def seed_families(specs: Specs, models: list[str]) -> list[list[str]]:
    """`models` grouped into seed siblings of one recipe (:func:`recipe`), largest family first (ties: in the order
    of `models`)."""
    families: dict[str, list[str]] = {}
    for model in models:
        families.setdefault(recipe(specs.get(model, {})), []).append(model)
    return sorted(families.values(), key=len, reverse=True)


def seed_pairs(specs: Specs) -> list[tuple[str, str]]:
    """Unordered pairs of models whose specs differ only in `seed` (random initialisations of one
    architecture and config; fine-tunings of one base with one recipe). Models without a seed
    (hub, local, package) have no seed siblings."""
    seeded = sorted(name for name, spec in specs.items() if "seed" in spec)
    return [(a, b) for i, a in enumerate(seeded) for b in seeded[i + 1:]
            if recipe(specs[a]) == recipe(specs[b]) and specs[a]["seed"] != specs[b]["seed"]]


def finetuned_from(specs: Specs) -> dict[str, str]:
    """Fine-tuned model -> its base."""
    return {name: spec["base"] for name, spec in sorted(specs.items()) if spec.get("source") == "finetune"}


def groups(specs: Specs) -> dict[str, frozenset[str]]:
    """Model -> its group: the models connected to it by seed siblinghood or by fine-tuning (a base
    and everything fine-tuned from it, their seed siblings, ...). A model with no relative is alone."""
    parent = {name: name for name in specs}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    links = seed_pairs(specs) + [(model, base) for model, base in finetuned_from(specs).items() if base in specs]
    for a, b in links:
        parent[root(a)] = root(b)
    members: dict[str, set[str]] = {}
    for name in specs:
        members.setdefault(root(name), set()).add(name)
    return {name: frozenset(members[root(name)]) for name in specs}
