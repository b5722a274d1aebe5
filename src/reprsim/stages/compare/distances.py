"""Model distances (Brown et al. 2023, eq. 2) between models of equal depth, from the pair tables."""

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


def model_depths(pairs: pd.DataFrame) -> dict[str, int]:
    """Each model's number of blocks: its deepest layer in the pair tables (layer 0 = embeddings)."""
    layers = pd.concat([pairs[["model_a", "layer_a"]].set_axis(["model", "layer"], axis=1),
                        pairs[["model_b", "layer_b"]].set_axis(["model", "layer"], axis=1)])
    return layers.groupby("model")["layer"].max().astype(int).to_dict()


def model_distance_table(pairs: pd.DataFrame, label: str) -> pd.DataFrame:
    """:func:`model_distances` as tidy rows (measure, depth, model_a, model_b, distance), every
    ordered pair of models of equal depth, each model with itself (distance 0) included."""
    rows = [{"measure": label, "depth": depth, "model_a": a, "model_b": b, "distance": float(matrix.loc[a, b])}
            for depth, matrix in model_distances(pairs, label, model_depths(pairs)).items()
            for a in matrix.index for b in matrix.columns]
    return pd.DataFrame(rows, columns=["measure", "depth", "model_a", "model_b", "distance"])
