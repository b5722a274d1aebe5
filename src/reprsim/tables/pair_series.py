"""The pair tables as one series per measure label, higher = more similar: a distance negated, an asymmetric
measure's two directions averaged, cell by cell and replicate by replicate (replicate r of every pair job rests on
the same rows, reprsim.inference.resampling). The findings (every claim under every measure, the measures' agreement) and the
universality study read the pair tables this way."""

from __future__ import annotations

import pandas as pd

CELL = ["model_a", "model_b", "layer_a", "layer_b"]
BLOCK = ["dataset", "representation"]


def oriented(pairs: pd.DataFrame, replicates: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pair tables with one symmetric, similarity-oriented series per measure label (see the module's
    docstring): columns BLOCK + CELL + measure, value (and replicate, n, m for the replicates). A cell whose
    direction is undefined (NaN) is undefined in the series."""
    sign = pairs.groupby("measure")["kind"].first().map({"similarity": 1.0, "distance": -1.0})
    if sign.isna().any():
        raise ValueError(f"pairs.parquet: measure(s) {sorted(sign[sign.isna()].index)} have a kind other than "
                         "similarity or distance")

    def one_series(frame: pd.DataFrame, keys: list[str], extra: list[str]) -> pd.DataFrame:
        frame = frame.assign(value=frame["value"].to_numpy(float) * frame["measure"].map(sign).to_numpy())
        grouped = frame.groupby(keys, sort=False)
        # the mean of both directions, NaN when either is NaN (a plain groupby mean would skip it)
        total = grouped["value"].sum(min_count=1)
        defined = grouped["value"].count()
        rows = grouped["value"].size()
        value = total.where(defined == rows) / rows
        result = value.rename("value").reset_index()
        for column in extra:
            result[column] = grouped[column].first().to_numpy()
        return result

    keys = [*BLOCK, *CELL, "measure"]
    series = one_series(pairs, keys, ["n"])
    replicate_series = one_series(replicates, [*keys, "replicate"], ["n", "m"])
    return series, replicate_series
