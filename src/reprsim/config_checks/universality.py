"""The universality study's section: one factor at a time over models of this configuration, its dimension placebo,
the pairs it reads (`similarity.pairs: study`), and the warning for measures that treat different widths
differently."""

from __future__ import annotations

from collections.abc import Iterator

from reprsim.config_checks.brought import _no_network
from reprsim.design.dimension_placebo import dimension_placebos, model_width
from reprsim.design.relations import study_errors, study_pairs
from reprsim.workflow.brought import NO_NETWORK, brought_models
from reprsim.workflow.stitching import function_problems


def _study_errors(config: dict) -> Iterator[str]:
    """A universality study must vary one factor at a time (reprsim.design.relations.study_errors) over models of this config;
    `similarity.pairs: study` becomes the list of the pairs it reads (reprsim.design.relations.study_pairs)."""
    study, similarity = config.get("universality"), config["similarity"]
    if study is not None:
        brought = set(brought_models(config["models"]))
        named = [*study["reference"], *study["floor"],
                 *(m for levels in study["factors"].values() for models in levels.values() for m in models)]
        refused = [name for name in dict.fromkeys(named) if name in brought]
        for name in refused:
            yield _no_network("universality", name, NO_NETWORK["universality"])
        if not refused:
            yield from study_errors(config["models"], study)
        yield from _placebo_errors(config["models"], study)
        yield from function_problems(config)
        for label in study.get("measures") or []:
            if label not in config["measures"]:
                yield (f"key 'universality.measures' names {label!r}, which is not a label of `measures`; defined: "
                       f"{', '.join(config['measures'])}")
        if study.get("dataset") is not None and study["dataset"] not in config["datasets"]:
            yield f"key 'universality.dataset' is {study['dataset']!r}, which is not a dataset in this config"
    if similarity.get("pairs") == "study":
        if study is None:
            yield "key 'similarity.pairs' is 'study', but the config has no `universality` study to take the pairs from"
        else:
            similarity["pairs"] = [list(pair) for pair in study_pairs(config["models"], study)]


def _placebo_errors(models: dict, study: dict) -> Iterator[str]:
    """A dimension placebo reduces the reference seeds to fewer dimensions than they have: each width asked for must
    be below the reference's width, and without widths some width level must be narrower."""
    asked = study.get("dimension_placebo")
    if not asked or any(name not in models for name in study["reference"]):
        return
    full = model_width(models, study["reference"][0])
    if full is None:
        yield ("key 'universality.dimension_placebo' is set, but the reference's width is unknown: its models' "
               "`config` gives none of n_embd, hidden_size, d_model, nor does a hub model's `recipe` declare its width")
        return
    wide = [dims for dims in asked.get("widths") or [] if dims >= full]
    if wide:
        yield (f"key 'universality.dimension_placebo.widths' has {', '.join(map(str, wide))}, not below the "
               f"reference's width {full}: a placebo reduces the reference seeds to fewer dimensions")
    elif not dimension_placebos(models, study):
        yield (f"key 'universality.dimension_placebo' is set, but no width level is narrower than the reference "
               f"({full}; widths as the models' `config` or `recipe` gives them): give `widths`, or a narrower width level")


class StudyDimensionWarning(UserWarning):
    """A universality study's measure treats models of different widths differently (docs/numerics.md §13c)."""


def study_dimension_warnings(config: dict) -> list[str]:
    """A universality study whose models differ in width, with a measure whose `pca_dims` is not below the
    narrowest: the narrow models' layers enter whole while the wider ones' are cut to `pca_dims` principal
    directions, so a width level and the reference seeds are measured differently. Widths are read where the
    models' `config` gives them."""
    study = config.get("universality")
    if not isinstance(study, dict):
        return []
    named = [*study.get("reference", []), *study.get("floor", [])]
    named += [m for levels in (study.get("factors") or {}).values() for models in levels.values() for m in models]
    widths = {}
    for name in dict.fromkeys(named):
        width = model_width(config.get("models") or {}, name)
        if width is not None:
            widths[name] = width
    if len(set(widths.values())) < 2:
        return []
    narrowest = min(widths, key=widths.get)
    out = []
    for label, spec in (config.get("measures") or {}).items():
        pca_dims = (spec.get("params") or {}).get("pca_dims")
        if isinstance(pca_dims, int) and pca_dims >= widths[narrowest]:
            out.append(f"measures.{label} ({spec['measure']}): pca_dims {pca_dims} is not below the narrowest study "
                       f"model's width ({narrowest}: {widths[narrowest]}), so its layers enter whole while the "
                       f"{max(widths.values())}-wide ones are cut to {pca_dims} principal directions: a width level "
                       f"and the seeds are measured differently; set pca_dims below {widths[narrowest]}")
    return out
