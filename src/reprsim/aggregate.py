"""Summaries across all pair tables: model distances (Brown et al.) and localization scores (Wu et al.)."""

from __future__ import annotations

import pandas as pd

from reprsim.metrics.distance import model_distance


def model_distances(pairs: pd.DataFrame, label: str, depths: dict[str, int]) -> dict[int, pd.DataFrame]:
    """Per depth, the symmetric matrix sqrt(Σ_l arccos(CKA(X_l, Y_l))²) between models of that depth.

    Uses the rows of measure `label` with layer_a == layer_b; models of different depth
    have no aligned layers and are not compared. Layers where CKA is undefined (NaN: a layer
    whose rows are all one vector, such as BERT's first token at the embedding layer) are
    left out of the sum.
    """
    rows = pairs[(pairs["measure"] == label) & (pairs["layer_a"] == pairs["layer_b"])]
    matrices = {}
    for depth in sorted(set(depths.values())):
        names = sorted(m for m, d in depths.items() if d == depth)
        if len(names) < 2:
            continue
        matrix = pd.DataFrame(0.0, index=names, columns=names)
        for (a, b), group in rows.groupby(["model_a", "model_b"]):
            if a in names and b in names and a != b:
                value = model_distance(group.sort_values("layer_a")["value"].dropna().clip(-1, 1))
                matrix.loc[a, b] = matrix.loc[b, a] = value
        matrices[depth] = matrix
    return matrices


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


def first_label(measures: dict, name: str) -> str | None:
    """The first configured label whose measure is `name`."""
    return next((label for label, spec in measures.items() if spec["measure"] == name), None)
