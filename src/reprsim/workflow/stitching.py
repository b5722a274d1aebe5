"""The stitching jobs a configuration asks for (torch-free: the DAG and the config check use it): the stitching
stage's (`stitching`), and the universality study's functional sense (`universality.function`, :func:`function_plan`).

A configured pair [a, b] is stitched both ways, a into b and b into a, and each model into itself
(the self-stitch baseline); `pairs: null` pairs every two models fine-tuned on the same dataset and
every two causal LMs pretrained (source pretrain) on the same dataset. A pretraining's checkpoints are left
out of the default pairs (they would multiply the jobs; name them in `pairs`), and so are masked LMs, which
language-modelling stitching cannot score: it predicts the next token, which a masked LM's bidirectional
attention would see. The functional sense stitches every level's, the floor's and the other seeds' models into each
reference seed of another seed, and each reference seed into itself, under the references' own objective.
"""

from __future__ import annotations

import json
from itertools import combinations
from typing import Iterator, NamedTuple

from reprsim.design.relations import cross_seed

TRAINED = {"finetune": "classification", "pretrain": "language_modeling"}


class StitchJob(NamedTuple):
    dataset: str
    bottom: str  # f, model_a
    top: str  # g, model_b
    objective: str


def _masked(spec: dict) -> bool:
    return spec.get("source") == "pretrain" and spec.get("objective") == "masked"


def default_pairs(models: dict) -> list[tuple[str, str]]:
    """Every two models trained the same way (fine-tuned, or pretrained as causal LMs) on the same dataset,
    checkpoints left out."""
    kept = {name: spec for name, spec in models.items() if "checkpoint" not in spec and not _masked(spec)}
    return [(a, b) for a, b in combinations(sorted(kept), 2)
            if kept[a].get("source") in TRAINED and kept[a].get("source") == kept[b].get("source")
            and kept[a].get("dataset") == kept[b].get("dataset")]


def _resolve(settings: dict, models: dict, a: str, b: str) -> tuple[str | None, str | None, list[str]]:
    """(dataset, objective, problems) of the pair [a, b]."""
    problems = []
    sources = {models[a].get("source"), models[b].get("source")}
    objective = settings.get("objective", "auto")
    if objective == "auto":
        kinds = {TRAINED.get(source) for source in sources}
        objective = kinds.pop() if len(kinds) == 1 and None not in kinds else None
        if objective is None:
            problems.append(f"stitching.pairs [{a}, {b}]: objective auto needs two fine-tuned models (classification) "
                            f"or two pretrained ones (language_modeling); these are {' and '.join(sorted(map(str, sources)))}: "
                            "set stitching.objective")
    if objective == "language_modeling":
        for name in sorted({a, b}):
            if _masked(models[name]):
                problems.append(f"stitching.pairs [{a}, {b}]: {name} is a masked LM (objective masked); language "
                                "modelling stitching scores the next token, which its bidirectional attention sees")
    dataset = settings.get("dataset")
    if dataset is None:
        own = {models[a].get("dataset"), models[b].get("dataset")}
        dataset = own.pop() if len(own) == 1 and None not in own else None
        if dataset is None:
            problems.append(f"stitching.pairs [{a}, {b}]: the models were not trained on one dataset ({sorted(map(str, own))}); "
                            "set stitching.dataset")
    return dataset, objective, problems


def stitching_problems(config: dict) -> Iterator[str]:
    settings = config.get("stitching")
    if not settings:
        return
    models, datasets = config.get("models", {}), config.get("datasets", {})
    for pair in settings.get("pairs") or []:
        for name in pair:
            if name not in models:
                yield (f"key 'stitching.pairs' names {name!r}, which is not a model in this config; "
                       f"defined models: {', '.join(sorted(models))}")
    if settings.get("dataset") is not None and settings["dataset"] not in datasets:
        yield (f"key 'stitching.dataset' is {settings['dataset']!r}, which is not a dataset in this config; "
               f"defined datasets: {', '.join(sorted(datasets))}")
    if any(name not in models for pair in settings.get("pairs") or [] for name in pair):
        return
    pairs = settings["pairs"] if settings.get("pairs") is not None else default_pairs(models)
    for a, b in pairs:
        yield from _resolve(settings, models, a, b)[2]


def stitch_jobs(config: dict) -> list[StitchJob]:
    """Every (dataset, bottom, top, objective) job, self-stitches included, each once, sorted."""
    settings = config.get("stitching")
    if not settings:
        return []
    models = config["models"]
    pairs = settings["pairs"] if settings.get("pairs") is not None else default_pairs(models)
    jobs = set()
    for a, b in pairs:
        dataset, objective, problems = _resolve(settings, models, a, b)
        if problems:
            raise ValueError("; ".join(problems))
        for bottom, top in {(a, b), (b, a), (a, a), (b, b)}:
            jobs.add(StitchJob(dataset, bottom, top, objective))
    return sorted(jobs)


# ---- the universality study's functional sense (universality.function) ----------------------------------------
class FunctionPlan(NamedTuple):
    """The stitch jobs of a study's functional sense: every level's, the floor's and the other reference seeds'
    models into each reference model of another seed (reprsim.design.relations.cross_seed), and each reference seed into
    itself; `left_out`: level label -> why its models are not stitched."""

    objective: str | None
    jobs: list[StitchJob]
    left_out: dict[str, str]


def _tokenizer_identity(models: dict, name: str, seen: tuple = ()) -> str:
    """What tokenizes a model's text, followed through the model it borrows its tokenizer from or the base it was
    fine-tuned from (a checkpoint carries its run's spec, tokenizer included)."""
    spec = models.get(name, {})
    for key in ("tokenizer", "base"):
        value = spec.get(key)
        if isinstance(value, str) and value in models and value not in seen:
            return _tokenizer_identity(models, value, (*seen, name))
        if key == "tokenizer" and value is not None:
            return json.dumps(value, sort_keys=True)
    return json.dumps({key: spec.get(key) for key in ("source", "id", "revision", "path", "package")
                       if spec.get(key) is not None}, sort_keys=True)


def function_problems(config: dict) -> Iterator[str]:
    """Why the study's functional sense cannot be measured: references not all trained one way the stitching can
    score (pretrained causal LMs, or fine-tuned classifiers), or a floor model that tokenizes otherwise."""
    study = config.get("universality") or {}
    if not study.get("function"):
        return
    models = config["models"]
    sources = {name: models[name].get("source") for name in study["reference"] if name in models}
    kinds = {TRAINED.get(source) for source in sources.values()}
    masked = [name for name in sources if _masked(models[name])]
    if None in kinds or len(kinds) > 1 or masked:
        listing = ", ".join(f"{name} (source {source}{', objective masked' if name in masked else ''})"
                            for name, source in sources.items())
        yield ("key 'universality.function' is set, but its stitching scores each reference model on its own task: "
               "the references must all be causal LMs pretrained by the workflow (source pretrain, next-token loss) "
               f"or all fine-tuned classifiers (source finetune); they are {listing}")
    if not all(name in models for name in [*study["reference"], *study["floor"]]):
        return
    tokenizer = _tokenizer_identity(models, study["reference"][0])
    for name in study["floor"]:
        if _tokenizer_identity(models, name) != tokenizer:
            yield (f"key 'universality.function' is set, but the floor model {name} tokenizes otherwise than the "
                   f"reference {study['reference'][0]}: stitching passes the stream token by token")


def function_settings(config: dict) -> dict:
    """The stitch script's settings for the functional sense's jobs (scripts/stitch.py; their cost, job_costs): the
    section's map and training, one seed, under the references' own objective, scored on the study's similarity
    split, into every layer of the reference model (layers "reference")."""
    function = config["universality"]["function"]
    objective = TRAINED.get(config["models"][config["universality"]["reference"][0]].get("source"))
    return {**{key: function[key] for key in ("steps", "batch_size", "optimizer", "max_examples", "init_tokens",
                                              "heldout", "start")},
            "phi": [function["phi"]], "layers": "reference", "objective": objective,
            "split": config["similarity"]["split"], "seeds": [0], "max_length": None, "context": None,
            "chance_permutations": 100}


def function_plan(config: dict, dataset: str, placebo_levels=()) -> FunctionPlan:
    """The functional sense's stitch jobs on `dataset` (the study's), and the levels left out (the dimension
    placebo's `placebo_levels` among them: a reduced copy has no network)."""
    study = config.get("universality") or {}
    if not study.get("function") or any(True for _ in function_problems(config)):
        return FunctionPlan(None, [], {})
    models, reference = config["models"], list(study["reference"])
    objective = TRAINED[models[reference[0]]["source"]]
    tokenizer = _tokenizer_identity(models, reference[0])

    def why_not(name: str) -> str | None:
        if _tokenizer_identity(models, name) != tokenizer:
            return f"{name} tokenizes otherwise than the reference (stitching passes the stream token by token)"
        if objective == "language_modeling" and _masked(models[name]):
            return (f"{name} is a masked LM: next-token stitching would let its bidirectional attention see the "
                    "token it predicts")
        return None

    couples = cross_seed(models, reference, reference) + [(r, r) for r in reference]
    couples += cross_seed(models, study["floor"], reference)
    left_out = {f"dimension/{level}": "a reduced copy has no network to stitch" for level in placebo_levels}
    for factor, levels in study["factors"].items():
        for level, names in levels.items():
            reasons = [reason for reason in map(why_not, names) if reason]
            if reasons:
                left_out[f"{factor}/{level}"] = reasons[0]
            else:
                couples += cross_seed(models, names, reference)
    jobs = {StitchJob(dataset, bottom, top, objective) for bottom, top in couples}
    return FunctionPlan(objective, sorted(jobs), left_out)
