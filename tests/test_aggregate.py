"""Summaries over pair tables: model distances and the localization score, on hand-made tables."""

import numpy as np
import pandas as pd
import pytest

from reprsim.aggregate import localization_scores, model_distances


def rows(measure, model_a, model_b, values, direction="symmetric"):
    return [{"measure": measure, "model_a": model_a, "model_b": model_b, "layer_a": i, "layer_b": j,
             "direction": direction, "value": v} for (i, j), v in np.ndenumerate(np.asarray(values, float))]


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
