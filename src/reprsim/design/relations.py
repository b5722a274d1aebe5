"""How the configured models are related, from their specs (config `models`, after validation):
recipes, seed siblings, each fine-tuned model's base, and groups of related models. Torch-free: the
workflow's rules use it when the DAG is built."""

from __future__ import annotations

import json
from typing import Mapping

Specs = Mapping[str, Mapping]
# spec keys that are not part of how a model is trained: its seed (siblings differ in it) and the checkpoints the
# training job also keeps (what is saved, not how it trains)
NOT_RECIPE = ("seed", "seeds", "checkpoints")


def recipe(spec: Mapping, without: tuple[str, ...] = ()) -> str:
    """A model's recipe: its spec but the seed (and the keys `without`), as canonical JSON. Models with equal
    recipes and different seeds are seed siblings."""
    return json.dumps({key: value for key, value in spec.items() if key not in (*NOT_RECIPE, *without)},
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


# The factors of variation a universality study varies one at a time, and the spec keys that carry each: a
# pretrained model's config by its GPT-2 or transformers field name, its data, objective and training time; a hub
# model's declared `recipe` entries. The head count is width (of attention) at a fixed depth.
FACTORS = ("width", "depth", "data", "objective", "training_time")
FACTOR_KEYS = {
    **{f"config.{field}": "width" for field in ("n_embd", "hidden_size", "n_inner", "intermediate_size", "n_head",
                                                 "num_attention_heads", "d_model")},
    **{f"config.{field}": "depth" for field in ("n_layer", "num_hidden_layers", "num_layers")},
    "dataset": "data", "objective": "objective", "mask_probability": "objective",
    "checkpoint": "training_time", "steps": "training_time",
    **{f"recipe.{factor}": factor for factor in FACTORS}, "recipe.step": "training_time",
}

# spec keys a level may change beside its factor, as a declared confound: a BERT's masked LM (blocks bert) changes
# the architecture together with the objective (key -> the factor it may come with, what it changes, its value
# where a spec leaves it out)
CONFOUNDS = {"blocks": ("objective", "the architecture (a BERT's blocks: post-LayerNorm, token types)", "gpt2")}


def _tokenizer_of(specs: Specs, name: str):
    """The tokenizer a model uses, followed through the models it borrows it from: two models that borrow one
    trained tokenizer by different names share it."""
    chosen, seen = specs.get(name, {}).get("tokenizer"), {name}
    while isinstance(chosen, str) and chosen in specs and chosen not in seen and "tokenizer" in specs[chosen]:
        seen.add(chosen)
        chosen = specs[chosen]["tokenizer"]
    return chosen


def _flat(specs: Specs, name: str) -> dict[str, str]:
    """A model's spec as flat keys (config.n_embd, recipe.seed, ...) -> canonical JSON values; the tokenizer
    resolved (:func:`_tokenizer_of`); seed and checkpoints left out (:data:`NOT_RECIPE`)."""
    flat = {}
    for key, value in specs[name].items():
        # a hub model's id and revision name it; what it was trained on and how is only what its `recipe` declares
        hub_name = specs[name].get("source") == "hf" and key in ("id", "revision")
        if key in NOT_RECIPE or key == "tokenizer" or hub_name:
            continue
        if key in ("config", "recipe") and isinstance(value, Mapping):
            flat.update({f"{key}.{field}": json.dumps(v, sort_keys=True, default=str) for field, v in value.items()
                         if not (key == "recipe" and field == "seed")})
        else:
            flat[key] = json.dumps(value, sort_keys=True, default=str)
    if "tokenizer" in specs[name]:
        flat["tokenizer"] = json.dumps(_tokenizer_of(specs, name), sort_keys=True, default=str)
    return flat


def differences(specs: Specs, model: str, reference: str) -> dict[str, tuple[str | None, str | None]]:
    """Spec keys (flat, :func:`_flat`) in which `model` differs from `reference`: key -> (reference's value,
    model's value), None where a spec lacks the key; between two hub models only the `recipe` entries both
    declare."""
    a, b = _flat(specs, reference), _flat(specs, model)
    keys = set(a) | set(b)
    if specs[model].get("source") == specs[reference].get("source") == "hf":
        # two hub models: what both cards state (an entry one card does not state cannot be compared)
        keys = {key for key in keys if key in a and key in b}
    return {key: (a.get(key), b.get(key)) for key in sorted(keys) if a.get(key) != b.get(key)}


def model_seed(specs: Specs, name: str):
    """A model's seed: its spec's `seed`, or a hub model's declared `recipe.seed`; None without one."""
    spec = specs.get(name, {})
    return spec.get("seed", (spec.get("recipe") or {}).get("seed"))


def study_errors(specs: Specs, study: Mapping) -> list[str]:
    """What keeps `study` (config `universality`) from varying one factor at a time: the reference must be seed
    siblings of one recipe (two or more, distinct seeds), and every model of a factor's level must differ from the
    reference in that factor's keys (:data:`FACTOR_KEYS`) and in nothing else."""
    problems = []
    named = [*study["reference"], *study["floor"],
             *(m for levels in study["factors"].values() for models in levels.values() for m in models)]
    unknown = sorted({m for m in named if m not in specs})
    if unknown:
        return [f"universality names {', '.join(map(repr, unknown))}, not model(s) of this config; defined models: "
                f"{', '.join(sorted(specs))}"]
    reference = study["reference"]
    first = reference[0]
    for other in reference[1:]:
        extra = differences(specs, other, first)
        if extra:
            problems.append(f"universality.reference: {other!r} is no seed sibling of {first!r}: it differs in "
                            + _listed(extra))
    seeds = [model_seed(specs, m) for m in reference]
    if None in seeds or len(set(map(str, seeds))) < len(seeds):
        problems.append(f"universality.reference: the seed siblings need distinct seeds; got {dict(zip(reference, seeds))}")
    for factor, levels in study["factors"].items():
        for level, models in levels.items():
            for model in models:
                found = differences(specs, model, first)
                where = f"universality.factors.{factor}.{level}: model {model!r}"
                if not found:
                    problems.append(f"{where} does not differ from the reference {first!r} (in {factor} or anything)")
                    continue
                extra = {key: values for key, values in found.items()
                         if FACTOR_KEYS.get(key) != factor and CONFOUNDS.get(key, ("",))[0] != factor}
                if extra:
                    problems.append(f"{where} differs from the reference {first!r} in more than {factor}: "
                                    + _listed(extra))
    return problems


def also_changes(specs: Specs, model: str, reference: str) -> str:
    """What a level's `model` changes beside its factor as a declared confound (:data:`CONFOUNDS`), in words with
    the values ("the architecture (…): blocks gpt2 -> bert"); "" where it changes its factor only."""
    said = []
    for key, (a, b) in differences(specs, model, reference).items():
        if key in CONFOUNDS:
            _, what, left_out = CONFOUNDS[key]
            said.append(f"{what}: {key} {json.loads(a) if a else left_out} -> {json.loads(b) if b else left_out}")
    return "; ".join(said)


def _listed(found: Mapping[str, tuple]) -> str:
    def kind(key: str) -> str:
        if key in FACTOR_KEYS:
            return FACTOR_KEYS[key]
        return f"allowed with {CONFOUNDS[key][0]} only" if key in CONFOUNDS else "not a factor"
    return "; ".join(f"{key} ({kind(key)}: {a} -> {b})" for key, (a, b) in found.items())


def cross_seed(specs: Specs, models, reference) -> list[tuple[str, str]]:
    """(model, reference model) couples of different seeds: a model sharing its seed with a reference model may
    share its initialisation or its trajectory (a checkpoint of the same run), which no change of factor undoes."""
    return [(m, r) for m in models for r in reference
            if m != r and (model_seed(specs, m) is None or str(model_seed(specs, m)) != str(model_seed(specs, r)))]


def competence_checkpoints(specs: Specs, study: Mapping) -> dict[tuple[str, str], dict[int, list[str]]]:
    """(factor, level) -> {step: the level's models at that checkpoint}, for each level (training time aside: its
    levels are checkpoints) whose every model saved that checkpoint (spec `checkpoints`; the configuration names the
    saved model {model}@{step}): the candidates for comparing the level at the reference's competence."""
    found = {}
    for factor, levels in study["factors"].items():
        if factor == "training_time":
            continue
        for level, models in levels.items():
            saved = [set(specs.get(m, {}).get("checkpoints") or []) for m in models]
            steps = sorted(set.intersection(*saved)) if saved else []
            named = {step: [f"{m}@{step}" for m in models] for step in steps
                     if all(f"{m}@{step}" in specs for m in models)}
            if named:
                found[(factor, level)] = named
    return found


def study_pairs(specs: Specs, study: Mapping) -> list[tuple[str, str]]:
    """The model pairs a universality study compares (sorted names, each once): the reference's seed siblings, the
    floor and every level's models against the reference models of other seeds, and, for training time, each
    level's models among themselves (the cross-seed similarity at that checkpoint); a level's checkpoints
    (:func:`competence_checkpoints`) against the reference models of other seeds, as the level."""
    reference = list(study["reference"])
    pairs = {tuple(sorted(p)) for p in cross_seed(specs, reference, reference)}
    pairs |= {tuple(sorted(p)) for p in cross_seed(specs, study["floor"], reference)}
    for factor, levels in study["factors"].items():
        for models in levels.values():
            pairs |= {tuple(sorted(p)) for p in cross_seed(specs, models, reference)}
            if factor == "training_time":
                pairs |= {tuple(sorted(p)) for p in cross_seed(specs, models, models)}
    for steps in competence_checkpoints(specs, study).values():
        for models in steps.values():
            pairs |= {tuple(sorted(p)) for p in cross_seed(specs, models, reference)}
    return sorted(pairs)
