"""The stitching jobs a configuration asks for (torch-free: the DAG and the config check use it).

A configured pair [a, b] is stitched both ways, a into b and b into a, and each model into itself
(the self-stitch baseline); `pairs: null` pairs every two models fine-tuned on the same dataset and
every two causal LMs pretrained (source pretrain) on the same dataset. A pretraining's checkpoints are left
out of the default pairs (they would multiply the jobs; name them in `pairs`), and so are masked LMs, which
language-modelling stitching cannot score: it predicts the next token, which a masked LM's bidirectional
attention would see.
"""

from __future__ import annotations

from itertools import combinations
from typing import Iterator, NamedTuple

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
