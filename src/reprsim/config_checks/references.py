"""Names that must refer to something the configuration defines, and settings that contradict each other: the
cross-reference checks in their order, with the models the aligners and token pairs name and the models derived from
themselves."""

from __future__ import annotations

from collections.abc import Iterator

from reprsim.config_checks.architectures import FROM_CONFIG, _architecture_errors
from reprsim.config_checks.brought import _brought_errors
from reprsim.config_checks.detail import _detail_errors
from reprsim.config_checks.grounding import _grounding_errors
from reprsim.config_checks.labels import _unlabelled_errors
from reprsim.workflow.stitching import stitching_problems


def _reference_errors(config: dict, distance_named: bool, written: dict[str, str],
                      model_configs: bool = True) -> Iterator[str]:
    """Names that must refer to something the config defines, and settings that contradict each other.

    distance_named: the user set report.distance_measure (its default may name no measure: no distances).
    written: expanded model name -> the name the config gives it (see _expand_seeds).
    """
    datasets = config.get("datasets", {})
    models = config.get("models", {})
    for kind, names in (("dataset", datasets), ("model", models)):
        for name in names:
            if "__" in name:
                yield f"{kind} name {name!r} contains '__', which reprsim reserves to join pair names"
    for name, spec in models.items():
        source, key = spec.get("source"), f"models.{written.get(name, name)}"
        if source == "pretrain" and spec.get("dataset") not in datasets:
            yield (
                f"key '{key}.dataset' is {spec.get('dataset')!r}, which is not a "
                f"dataset in this config; defined datasets: {', '.join(sorted(datasets))}"
            )
        if source == "finetune":
            if spec.get("base") not in models:
                yield (
                    f"key '{key}.base' is {spec.get('base')!r}, which is not a model in "
                    f"this config; defined models: {', '.join(sorted(models))}"
                )
            if spec.get("dataset") not in datasets:
                yield (
                    f"key '{key}.dataset' is {spec.get('dataset')!r}, which is not a "
                    f"dataset in this config; defined datasets: {', '.join(sorted(datasets))}"
                )
        if source == "finetune" and spec.get("steps") is not None and spec.get("epochs") is not None:
            yield f"{key}: give steps or epochs, not both (steps {spec['steps']}, epochs {spec['epochs']})"
        tokenizer = spec.get("tokenizer")
        if source in FROM_CONFIG and isinstance(tokenizer, dict):
            trained_on = tokenizer.get("train", {}).get("dataset")
            if trained_on not in datasets:
                yield (
                    f"key '{key}.tokenizer.train.dataset' is {trained_on!r}, which is not a dataset "
                    f"in this config; defined datasets: {', '.join(sorted(datasets))}"
                )
        elif source in FROM_CONFIG and tokenizer not in models:
            yield (
                f"key '{key}.tokenizer' is {tokenizer!r}, which is not a model "
                f"in this config; defined models: {', '.join(sorted(models))}"
            )
    for name in config.get("extraction", {}).get("datasets", None) or []:
        if name not in datasets:
            yield (
                f"key 'extraction.datasets' names {name!r}, which is not a dataset in this config; "
                f"defined datasets: {', '.join(sorted(datasets))}"
            )
    distance = config.get("report", {}).get("distance_measure")
    measures = config.get("measures", {})
    if distance_named and distance not in measures:
        yield (f"key 'report.distance_measure' is {distance!r}, which is not a measure in this config; "
               f"defined measures: {', '.join(sorted(measures))}")
    if distance in measures and measures[distance]["measure"] != "cka":
        yield f"key 'report.distance_measure' is {distance!r}, a {measures[distance]['measure']} measure; it must name a cka measure"
    yield from _align_errors(config.get("align", {}), models)
    yield from _token_pair_errors(config, models)
    yield from _detail_errors(config, models, measures)
    brought = list(_brought_errors(config, models, datasets))
    yield from brought
    if not any("stitching.pairs" in problem for problem in brought):  # else each pair's objective would be refused too
        yield from stitching_problems(config)
    extracted = config.get("extraction", {}).get("splits", [])
    wanted = {"similarity.split": config.get("similarity", {}).get("split")}
    align = config.get("align", {})
    splits = align.get("splits", {})
    if align.get("enabled"):
        wanted.update({f"align.splits.{role}": splits.get(role) for role in ("fit", "select", "score")})
    for key, split in wanted.items():
        if split is not None and split not in extracted:
            yield (
                f"key '{key}' is {split!r}, but activations are extracted only for "
                f"extraction.splits = {extracted}; add it there"
            )
    if align.get("enabled") and splits.get("score") in (splits.get("fit"), splits.get("select")):
        yield (
            f"key 'align.splits.score' is {splits['score']!r}, the same split the aligners are "
            "fit or selected on; scores must come from held-out rows"
        )
    if config.get("finetune_eval", {}).get("layer_views"):
        extraction = config.get("extraction", {})
        on = extraction.get("datasets") or list(datasets)
        for name, spec in models.items():
            if spec.get("source") == "finetune" and spec.get("dataset") in datasets and spec["dataset"] not in on:
                yield (f"finetune_eval.layer_views compares {name} with its base on its dataset "
                       f"{spec['dataset']!r}, which extraction.datasets leaves out; add it there or set "
                       "finetune_eval.layer_views: false")
        if any(spec.get("source") == "finetune" for spec in models.values()) and "cls" not in extraction.get("poolings", []):
            yield "finetune_eval.layer_views compares CLS representations; add 'cls' to extraction.poolings"
    yield from _grounding_errors(config, datasets, models)
    yield from _unlabelled_errors(config, datasets, models)
    yield from _cycle_errors(models)
    if model_configs:
        yield from _architecture_errors(models)


def _align_errors(align: dict, models: dict) -> Iterator[str]:
    """The models the aligner stage names (the schema checks the aligners' parameters)."""
    if not align.get("enabled"):
        return
    named = [("align.pairs", name) for pair in align.get("pairs") or [] for name in pair]
    named += [("align.synthetic.models", name) for name in align.get("synthetic", {}).get("models", [])]
    for key, name in named:
        if name not in models:
            yield f"key '{key}' names {name!r}, which is not a model in this config; defined models: {', '.join(sorted(models))}"
    for pair in align.get("pairs") or []:
        if len(pair) == 2 and pair[0] == pair[1]:
            yield f"key 'align.pairs' pairs {pair[0]!r} with itself; name two different models"


def _token_pair_errors(config: dict, models: dict) -> Iterator[str]:
    """similarity.tokens: the models it pairs, and the token-level states it reads. Whether two models share a
    tokenizer shows only in their stores, so the job refuses a pair that does not."""
    tokens = config.get("similarity", {}).get("tokens")
    if not tokens:
        return
    if not config.get("extraction", {}).get("tokens"):
        yield ("similarity.tokens needs extraction.tokens: true (token-level hidden states in the stores); "
               "set extraction.tokens: true or similarity.tokens: null")
    for pair in tokens.get("pairs") or []:
        for name in pair:
            if name not in models:
                yield (f"key 'similarity.tokens.pairs' names {name!r}, which is not a model in this config; "
                       f"defined models: {', '.join(sorted(models))}")


def _cycle_errors(models: dict) -> Iterator[str]:
    """A model derived (through base or tokenizer) from itself can never be built."""
    def parents(name: str) -> list[str]:
        spec = models.get(name, {})
        # a trained tokenizer ({train: ...}) depends on a dataset, not on a model
        return [p for p in (spec.get("base"), spec.get("tokenizer")) if isinstance(p, str) and p in models]

    for start in models:
        seen, stack = set(), [(start, [start])]
        while stack:
            node, trail = stack.pop()
            for parent in parents(node):
                if parent == start:
                    yield f"model {start!r} depends on itself: {' -> '.join(trail + [parent])}"
                    stack = []
                    break
                if parent not in seen:
                    seen.add(parent)
                    stack.append((parent, trail + [parent]))
