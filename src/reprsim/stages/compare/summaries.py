"""Summaries across all pair tables: the mean per model pair, localization scores (Wu et al. 2020)."""

from __future__ import annotations

import pandas as pd


def pair_summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per pair of distinct models, measure and direction: the mean over layers with the same index,
    the mean of their nulls and the weakest (largest) permutation p-value among them."""
    measured = pairs[pairs["model_a"] != pairs["model_b"]]
    same_layer = measured[measured["layer_a"] == measured["layer_b"]]
    return same_layer.groupby(["model_a", "model_b", "measure", "direction"]).agg(
        mean_over_matching_layers=("value", "mean"), null_mean=("null_mean", "mean"),
        largest_null_p=("null_p", "max")).reset_index()


def localization_scores(pairs: pd.DataFrame, neuronsim_label: str, svcca_label: str) -> pd.DataFrame:
    """Wu et al. (2020, §5): per layer, mean neuronsim to every other layer minus mean SVCCA to it.

    "Other layers" are all layers of all models in the tables except the layer itself;
    neuronsim is taken in the direction from the scored layer's neurons.
    """
    def directed(label: str) -> pd.DataFrame:
        rows = pairs[pairs["measure"] == label]
        forward = rows[rows["direction"].isin(["a->b", "symmetric"])]
        backward = rows[rows["direction"].isin(["b->a", "symmetric"])]
        as_source = pd.concat([
            pd.DataFrame({"model": forward["model_a"], "layer": forward["layer_a"],
                          "other_model": forward["model_b"], "other_layer": forward["layer_b"],
                          "value": forward["value"]}),
            pd.DataFrame({"model": backward["model_b"], "layer": backward["layer_b"],
                          "other_model": backward["model_a"], "other_layer": backward["layer_a"],
                          "value": backward["value"]}),
        ])
        as_source = as_source[(as_source["model"] != as_source["other_model"])
                              | (as_source["layer"] != as_source["other_layer"])]
        # a self pair (model with itself) lists each layer pair twice; keep one
        as_source = as_source.drop_duplicates(["model", "layer", "other_model", "other_layer"])
        return as_source.groupby(["model", "layer"])["value"].mean()

    neuron, distributed = directed(neuronsim_label), directed(svcca_label)
    scores = (neuron - distributed).rename("localization").reset_index()
    scores["neuronsim_mean"] = neuron.reindex(pd.MultiIndex.from_frame(scores[["model", "layer"]])).to_numpy()
    scores["svcca_mean"] = distributed.reindex(pd.MultiIndex.from_frame(scores[["model", "layer"]])).to_numpy()
    return scores.sort_values(["model", "layer"]).reset_index(drop=True)
