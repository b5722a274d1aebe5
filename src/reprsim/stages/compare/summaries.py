"""Summaries across all pair tables: the mean per model pair, localization scores (Wu et al. 2020)."""

from __future__ import annotations

import pandas as pd

from reprsim.inference.resampling import beyond_chance, interval
from reprsim.tables.layers import layer_pairs, model_depths

KEYS = ["dataset", "representation", "model_a", "model_b"]


def matching_layers(pairs: pd.DataFrame) -> pd.DataFrame:
    """Rows of distinct models at matching layers: the same relative depth (reprsim.tables.layers), so
    models of different depth are compared too."""
    depths = model_depths(pairs)
    models = pairs[["model_a", "model_b"]].drop_duplicates()
    models = models[models["model_a"] != models["model_b"]]
    matched = pd.DataFrame(
        [(a, b, la, lb) for a, b in models.itertuples(index=False)
         for la, lb in layer_pairs(depths[a], depths[b], "matching")],
        columns=["model_a", "model_b", "layer_a", "layer_b"])
    return pairs.merge(matched, on=["model_a", "model_b", "layer_a", "layer_b"])


def pair_summary(pairs: pd.DataFrame, replicates: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per dataset, representation, pair of distinct models, measure and direction: the mean over
    matching layers with its half-sample interval (the mean taken in every replicate), the mean
    of the layers' null means, whether the interval excludes it on the side of agreement, the
    weakest (largest) permutation p-value among the layers, and the first warning."""
    matched = matching_layers(pairs)
    group = [*KEYS, "measure", "direction"]
    summary = matched.groupby(group).agg(
        kind=("kind", "first"), n_layers=("value", "size"), mean_over_matching_layers=("value", "mean"),
        null_mean=("null_mean", "mean"), largest_null_p=("null_p", "max"), n=("n", "first"),
        warning=("warning", lambda w: next((x for x in w if x), ""))).reset_index()
    layers = matched[[*group, "layer_a", "layer_b"]]
    per_replicate = (replicates.merge(layers, on=list(layers.columns))
                     .groupby([*group, "replicate"]).agg(value=("value", "mean"), n=("n", "first"), m=("m", "first"))
                     .reset_index())
    estimates = summary.set_index(group)["mean_over_matching_layers"]
    bounds = []
    for key, rows in per_replicate.groupby(group):
        estimate = estimates.loc[key]
        bounds.append((*key, *interval(estimate, rows["value"].to_numpy(), int(rows["n"].iloc[0]),
                                       int(rows["m"].iloc[0]), confidence)))
    summary = summary.merge(pd.DataFrame(bounds, columns=[*group, "ci_low", "ci_high"]), on=group, how="left")
    summary["beyond_chance"] = beyond_chance(summary["kind"], summary["ci_low"], summary["ci_high"],
                                             summary["null_mean"])
    return summary


def localization_scores(pairs: pd.DataFrame, neuronsim_label: str, svcca_label: str) -> pd.DataFrame:
    """Wu et al. (2020, §5): per layer, mean neuronsim to every other layer minus mean SVCCA to it.

    "Other layers" are all layers of all models in the tables except the layer itself;
    neuronsim is taken in the direction from the scored layer's neurons. One score per dataset
    and representation.
    """
    def directed(label: str) -> pd.Series:
        rows = pairs[pairs["measure"] == label]
        forward = rows[rows["direction"].isin(["a->b", "symmetric"])]
        backward = rows[rows["direction"].isin(["b->a", "symmetric"])]
        as_source = pd.concat([
            forward.rename(columns={"model_a": "model", "layer_a": "layer", "model_b": "other_model",
                                    "layer_b": "other_layer"}),
            backward.rename(columns={"model_b": "model", "layer_b": "layer", "model_a": "other_model",
                                     "layer_a": "other_layer"}),
        ])[["dataset", "representation", "model", "layer", "other_model", "other_layer", "value"]]
        as_source = as_source[(as_source["model"] != as_source["other_model"])
                              | (as_source["layer"] != as_source["other_layer"])]
        # a self pair (model with itself) lists each layer pair twice; keep one
        as_source = as_source.drop_duplicates(["dataset", "representation", "model", "layer", "other_model",
                                               "other_layer"])
        return as_source.groupby(["dataset", "representation", "model", "layer"])["value"].mean()

    neuron, distributed = directed(neuronsim_label), directed(svcca_label)
    scores = pd.DataFrame({"localization": neuron - distributed, "neuronsim_mean": neuron,
                           "svcca_mean": distributed}).reset_index()
    return scores.sort_values(["dataset", "representation", "model", "layer"]).reset_index(drop=True)
