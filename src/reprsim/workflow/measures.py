"""Which measures each pair job computes, by representation (rules/compare.smk, rules/finetune.smk's layer views,
reprsim.workflow.job_costs). Torch-free: the rules use it whenever the DAG is built."""

from __future__ import annotations

from collections.abc import Mapping

VIEWS = "cls"  # the representation of the layer views' pair jobs (finetune_eval.layer_views)


def _linear_biased(spec: Mapping) -> bool:
    params = spec.get("params") or {}
    return (spec["measure"] == "cka" and params.get("kernel", "linear") == "linear"
            and params.get("estimator", "biased") == "biased")


def view_label(config: Mapping) -> str:
    """The label of the layer views' measure: the config's first biased linear CKA, else `linear_cka`."""
    return next((label for label, spec in config["measures"].items() if _linear_biased(spec)), "linear_cka")


def view_measures(config: Mapping) -> dict[str, dict]:
    """The layer views' one measure (Phang et al.'s linear CKA), with the configured label's draws if it has one."""
    label = view_label(config)
    return {label: config["measures"].get(label) or {
        "measure": "cka", "params": {"kernel": "linear", "estimator": "biased"}, "null_permutations": None,
        "resamples": None}}


def pair_measures(config: Mapping, representation: str) -> dict[str, dict]:
    """The measures of one representation's pair jobs: similarity.word picks those run at word level and may set
    their permutation and resample counts (n words costs more than n sentences); the layer views' CLS-token pairs,
    when "cls" is not a compared representation, compute their one measure."""
    if representation == VIEWS and VIEWS not in config["similarity"]["representations"]:
        return view_measures(config)
    if representation != "word":
        return dict(config["measures"])
    word = config["similarity"]["word"]
    counts = {key: word[source] for key, source in (("null_permutations", "permutations"),
                                                    ("resamples", "resamples")) if word[source] is not None}
    return {label: {**spec, **counts} for label, spec in config["measures"].items()
            if word["measures"] is None or label in word["measures"]}


def with_draws(config: Mapping, measures: Mapping[str, Mapping]) -> dict[str, dict]:
    """Each measure's null permutations and half-samples, the similarity section's where it names none."""
    similarity = config["similarity"]
    return {label: {**spec, "null_permutations": spec.get("null_permutations") or similarity["chance"]["permutations"],
                    "resamples": spec.get("resamples") or similarity["intervals"]["resamples"]}
            for label, spec in measures.items()}
