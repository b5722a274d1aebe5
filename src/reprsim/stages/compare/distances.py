"""Model distances (Brown et al. 2023, eq. 2) between models of equal depth, from the pair tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from reprsim.inference.resampling import interval
from reprsim.metrics.distance import model_distance
from reprsim.tables.layers import model_depths

COLUMNS = ["dataset", "representation", "measure", "depth", "model_a", "model_b", "distance", "ci_low", "ci_high"]


def _distance(values: pd.Series) -> float:
    """Layers where CKA is undefined (NaN: a layer whose rows are all one vector, such as BERT's
    first token at the embedding layer) are left out of the sum."""
    return model_distance(values.dropna().clip(-1, 1))


def model_distances(pairs: pd.DataFrame, label: str, depths: dict[str, int]) -> dict[int, pd.DataFrame]:
    """Per depth, the symmetric matrix sqrt(Σ_l arccos(CKA(X_l, Y_l))²) between models of that depth.

    Uses the rows of measure `label` with layer_a == layer_b (one dataset and representation);
    models of different depth have no aligned layers and are not compared.
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
                matrix.loc[a, b] = matrix.loc[b, a] = _distance(group.sort_values("layer_a")["value"])
        matrices[depth] = matrix
    return matrices


def model_distance_table(pairs: pd.DataFrame, label: str, replicates: pd.DataFrame,
                         confidence: float = 0.95) -> pd.DataFrame:
    """:func:`model_distances` as tidy rows, per dataset and representation: every ordered pair of
    models of equal depth (each model with itself at distance 0 included), with the half-sample
    interval of the distance (the distance computed in every replicate, reprsim.inference.resampling)."""
    rows = []
    for (dataset, representation), table in pairs.groupby(["dataset", "representation"]):
        reps = replicates[(replicates["dataset"] == dataset) & (replicates["representation"] == representation)
                          & (replicates["measure"] == label) & (replicates["layer_a"] == replicates["layer_b"])]
        for depth, matrix in model_distances(table, label, model_depths(table)).items():
            for a in matrix.index:
                for b in matrix.columns:
                    low = high = 0.0
                    if a != b:
                        low, high = _interval(matrix.loc[a, b], reps, *sorted((a, b)), confidence)
                    rows.append((dataset, representation, label, depth, a, b, float(matrix.loc[a, b]), low, high))
    return pd.DataFrame(rows, columns=COLUMNS)


def _interval(distance: float, replicates: pd.DataFrame, a: str, b: str, confidence: float) -> tuple[float, float]:
    rows = replicates[(replicates["model_a"] == a) & (replicates["model_b"] == b)]
    if rows.empty:
        return np.nan, np.nan
    per_replicate = rows.pivot_table(index="replicate", columns="layer_a", values="value", dropna=False)
    draws = np.array([_distance(values) for _, values in per_replicate.iterrows()])
    return interval(distance, draws, int(rows["n"].iloc[0]), int(rows["m"].iloc[0]), confidence)
