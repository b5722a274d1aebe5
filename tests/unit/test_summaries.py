"""Summaries over pair tables: model distances and the localization score, on hand-made tables."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reprsim.stages.compare.distances import model_distance_table, model_distances
from reprsim.stages.compare.summaries import localization_scores, pair_summary


def rows(measure, model_a, model_b, values, direction="symmetric"):
    return [{"dataset": "d", "representation": "mean", "measure": measure, "model_a": model_a, "model_b": model_b,
             "layer_a": i, "layer_b": j, "direction": direction, "kind": "similarity", "value": v, "n": 100,
             "warning": ""} for (i, j), v in np.ndenumerate(np.asarray(values, float))]


def replicates_of(table, shifts):
    """Replicate r of every row: its value + shifts[r] (n = 100 rows, m = 50 per replicate)."""
    return pd.concat([table.assign(replicate=r, value=table["value"] + shift, m=50) for r, shift in enumerate(shifts)])


def test_model_distance_is_brown_eq2_and_groups_by_depth():
    table = pd.DataFrame(
        rows("cka", "a", "b", [[0.5, 0.0], [0.0, 1.0]]) + rows("cka", "a", "a", np.eye(2))
        + rows("cka", "a", "c", np.ones((2, 4)))
    )
    matrices = model_distances(table, "cka", {"a": 1, "b": 1, "c": 3})
    assert list(matrices) == [1]  # c has no partner of its depth
    assert matrices[1].loc["a", "b"] == pytest.approx(np.arccos(0.5))  # sqrt(arccos(.5)² + arccos(1)²)
    assert matrices[1].loc["b", "a"] == matrices[1].loc["a", "b"] and matrices[1].loc["a", "a"] == 0


def test_model_distance_leaves_out_undefined_layers():
    table = pd.DataFrame(rows("cka", "a", "b", [[np.nan, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.0]]))
    distance = model_distances(table, "cka", {"a": 2, "b": 2})[2].loc["a", "b"]
    assert distance == pytest.approx(np.hypot(np.arccos(0.5), np.arccos(0.0)))


def test_localization_score_by_hand():
    # one model, two layers: neuronsim 0->1 = 0.9, 1->0 = 0.5; svcca(0,1) = 0.7
    table = pd.DataFrame(
        rows("neuronsim", "m", "m", [[1.0, 0.9], [0.5, 1.0]], direction="a->b")
        + rows("neuronsim", "m", "m", [[1.0, 0.5], [0.9, 1.0]], direction="b->a")
        + rows("svcca", "m", "m", [[1.0, 0.7], [0.7, 1.0]])
    )
    scores = localization_scores(table, "neuronsim", "svcca").set_index("layer")
    assert scores.loc[0, "localization"] == pytest.approx(0.9 - 0.7)
    assert scores.loc[1, "localization"] == pytest.approx(0.5 - 0.7)


def test_model_distance_table_is_tidy_and_takes_depths_from_the_pairs():
    table = pd.DataFrame(rows("cka", "a", "b", [[0.5, 0.0], [0.0, 1.0]]) + rows("cka", "a", "c", np.ones((2, 4))))
    reps = replicates_of(table, np.zeros(20))
    tidy = model_distance_table(table, "cka", reps).set_index(["model_a", "model_b"])
    assert set(tidy.index) == {("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")}  # c: 3 blocks, no partner
    assert (tidy["depth"] == 1).all() and (tidy["measure"] == "cka").all()
    assert tidy.loc[("b", "a"), "distance"] == pytest.approx(np.arccos(0.5)) and tidy.loc[("a", "a"), "distance"] == 0
    # replicates equal to the estimate: an interval of zero width around it
    assert tidy.loc[("a", "b"), "ci_low"] == pytest.approx(np.arccos(0.5))
    assert tidy.loc[("a", "b"), "ci_high"] == pytest.approx(np.arccos(0.5))


def test_pair_summary_means_over_matching_layers_with_an_interval_from_the_replicates():
    table = pd.DataFrame(rows("cka", "a", "b", [[0.4, 0.0], [0.0, 0.8]]) + rows("cka", "a", "a", np.eye(2))
                         + rows("cka", "a", "c", [[0.2, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.6]]))
    table["null_mean"], table["null_p"] = 0.1, [0.01, 0.5, 0.5, 0.02] + [0.01] * 4 + [0.01] * 10
    shifts = np.linspace(-0.1, 0.1, 21)
    summary = pair_summary(table, replicates_of(table, shifts)).set_index(["model_a", "model_b"])
    assert set(summary.index) == {("a", "b"), ("a", "c")}  # a model with itself is left out
    row = summary.loc[("a", "b")]
    assert row["mean_over_matching_layers"] == pytest.approx(0.6) and row["n_layers"] == 2
    assert row["null_mean"] == pytest.approx(0.1) and row["largest_null_p"] == pytest.approx(0.02)
    # m = n/2: the replicates' spread is the estimate's; ± t_{20, 0.975} times the sd of 21 even shifts in ±0.1
    half = stats.t.ppf(0.975, 20) * np.std(shifts, ddof=1)
    assert row["ci_low"] == pytest.approx(0.6 - half) and row["ci_high"] == pytest.approx(0.6 + half)
    assert row["beyond_chance"]
    # c has 4 blocks, a 1: a's layers 0 and 1 meet c's layers 0 and 4 (same relative depth)
    assert summary.loc[("a", "c"), "mean_over_matching_layers"] == pytest.approx(0.4)
