"""CKNNA (reprsim.metrics.cknna) against platonic-rep's own function, a loop transcription of its formula, and the
properties the formula implies: identical inputs give 1, rotations and scalings of the rows change nothing, k = n − 1
is the unbiased linear CKA of the unit rows, the two directions are the reference with its arguments swapped."""

import math

import numpy as np
import pytest
import torch

from reprsim.metrics import compute, compute_layers, null
from reprsim.metrics.api import directed_layers
from reprsim.metrics.cknna import cknna_both_layers, cknna_layers
from reprsim.metrics.memory import budget

EPSILON = 1e-6  # the reference's cknna adds it to its denominator; reprsim does not


def cases() -> dict:
    """name -> (X, Y, k), seeded (the inputs the reference values below were computed on)."""
    out = {}
    rng = np.random.default_rng(20240513)
    X = rng.normal(size=(40, 8)) @ (rng.normal(size=(8, 8)) + np.diag(np.linspace(0.5, 3, 8))) + 1.5
    Y = np.tanh(X @ rng.normal(size=(8, 6)) / 4) + 0.3 * rng.normal(size=(40, 6))
    out["related n=40 k=5"] = (X, Y, 5)
    rng = np.random.default_rng(7)
    X = rng.normal(size=16) + rng.normal(size=(64, 16)) * np.exp(rng.normal(size=(64, 1)))  # spread varies: hub rows
    Y = X @ rng.normal(size=(16, 12)) / 4 + rng.normal(size=(64, 12))
    out["hubs n=64 k=10"] = (X, Y, 10)
    rng = np.random.default_rng(11)
    X = rng.normal(size=(36, 5)) + 0.5
    X[24:] = X[:12] + 1e-6 * rng.normal(size=(12, 5))  # near-duplicate rows
    Y = X[:, :4] ** 2 + 0.5 * rng.normal(size=(36, 4))
    out["near-duplicates n=36 k=4"] = (X, Y, 4)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(24, 6)) + 1.0
    Y = X @ rng.normal(size=(6, 3)) + rng.normal(size=(24, 3))
    out["every other row n=24 k=23"] = (X, Y, 23)
    return out


# platonic-rep (github.com/minyoungg/platonic-rep) metrics.py at commit dcd76ba3c950c1b197a2ae8b1c6713535c94ecf9,
# AlignmentMetrics.cknna(A, B, topk=k) at its defaults (distance_agnostic=False, unbiased=True), run in float64 on
# A, B = torch.nn.functional.normalize(X or Y, p=2, dim=-1) as its measure_alignment.compute_score does
# (normalize=True): cknna(A, B), cknna(B, A), cknna(A, A), cknna(B, B).
REFERENCE = {
    "related n=40 k=5": (0.4450690366662584, 0.44486796849580196, 0.9999813466240541, 0.9999820613658273),
    "hubs n=64 k=10": (0.17439619864334663, 0.16798264630016405, 0.9999477026399912, 0.9999687305230711),
    "near-duplicates n=36 k=4": (0.33105672042274686, 0.33138056549241146, 0.9999821086684171, 0.9999859726950087),
    "every other row n=24 k=23": (0.42797897627967807, 0.42797897627967807, 0.9999792819356014, 0.9999881225338788),
}


def without_epsilon(forward: float, backward: float, self_x: float, self_y: float) -> tuple[float, float]:
    """The reference's two directions without its 1e-6: it returns c / (√(h_x·h_y) + ε), and on identical inputs
    h / (h + ε), so h = ε·r / (1 − r) and the value without ε is c / √(h_x·h_y) = r · (1 + ε / √(h_x·h_y))."""
    h_x, h_y = (EPSILON * r / (1 - r) for r in (self_x, self_y))
    factor = 1 + EPSILON / math.sqrt(h_x * h_y)
    return forward * factor, backward * factor


@pytest.mark.parametrize("name", list(REFERENCE))
def test_equals_platonic_reps_cknna_without_its_epsilon(name):
    X, Y, k = cases()[name]
    expected = without_epsilon(*REFERENCE[name])
    both = cknna_both_layers(X[None], Y[None], k=k)[0][:, 0, 0].tolist()
    assert both == pytest.approx(list(expected), abs=1e-10)
    # the epsilon alone separates them: ~1e-5 relative here
    assert abs(both[0] - REFERENCE[name][0]) < 1e-3 * abs(both[0])


def _loop_cknna(X: np.ndarray, Y: np.ndarray, k: int) -> float:
    """The formula of reprsim.metrics.cknna's docstring, with loops over rows and n × n matrices."""
    n = len(X)

    def kernel_and_marks(Z):
        unit = Z / np.linalg.norm(Z, axis=1, keepdims=True)
        K = unit @ unit.T
        marks = np.zeros((n, n))
        for i in range(n):
            others = [j for j in range(n) if j != i]
            for j in sorted(others, key=lambda j: -K[i, j])[:k]:
                marks[i, j] = 1.0
        return K, marks

    def hsic(A, B):
        trace = sum(A[i, j] * B[j, i] for i in range(n) for j in range(n) if i != j)
        middle = sum(A[i, j] * B[j, m] for i in range(n) for j in range(n) for m in range(n))
        return (trace + A.sum() * B.sum() / ((n - 1) * (n - 2)) - 2 * middle / (n - 2)) / (n * (n - 3))

    K, MK = kernel_and_marks(X)
    L, ML = kernel_and_marks(Y)
    both = MK * ML
    return hsic(K * both, L * both) / math.sqrt(hsic(K * MK, K * MK) * hsic(L * ML, L * ML))


def test_every_layer_pair_and_direction_matches_the_loop_transcription():
    rng = np.random.default_rng(1)
    Xs = rng.normal(size=(2, 18, 5)) + 0.5
    Ys = np.stack([np.tanh(Xs[0] @ rng.normal(size=(5, 4))), rng.normal(size=(18, 4)), Xs[1, :, :4] + 0.1])
    values = cknna_both_layers(Xs, Ys, k=4)[0].numpy()
    for i in range(2):
        for j in range(3):
            assert values[0, i, j] == pytest.approx(_loop_cknna(Xs[i], Ys[j], 4), abs=1e-12)
            assert values[1, i, j] == pytest.approx(_loop_cknna(Ys[j], Xs[i], 4), abs=1e-12)


def test_identical_inputs_give_one_in_both_directions():
    for name, (X, _, k) in cases().items():
        assert cknna_both_layers(X[None], X[None], k=k)[0].numpy() == pytest.approx(1.0, abs=1e-14), name


def test_rotations_and_positive_row_scalings_change_nothing_translations_do():
    X, Y, k = cases()["related n=40 k=5"]
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    value = compute("cknna", X, Y, k=k).value
    rows = np.exp(rng.normal(size=(40, 1)))  # a cosine kernel: each row's own positive scale cancels
    assert compute("cknna", 3.7 * X @ Q, rows * Y, k=k).value == pytest.approx(value, abs=1e-12)
    assert abs(compute("cknna", X + rng.normal(size=8), Y, k=k).value - value) > 1e-3


def test_k_n_minus_1_is_the_unbiased_linear_cka_of_the_unit_rows():
    """Every other row marked: M is all ones off the diagonal, HSIC₁ ignores the diagonal, so CKNNA is HSIC₁'s CKA
    of the cosine kernels, symmetric, and so reprsim's unbiased linear CKA of the rows scaled to unit norm."""
    X, Y, k = cases()["every other row n=24 k=23"]
    unit = [Z / np.linalg.norm(Z, axis=1, keepdims=True) for Z in (X, Y)]
    forward, backward = cknna_both_layers(X[None], Y[None], k=k)[0][:, 0, 0].tolist()
    assert forward == pytest.approx(compute("cka", *unit, estimator="unbiased").value, abs=1e-12)
    assert backward == pytest.approx(forward, abs=1e-12)


def test_the_directions_are_the_arguments_swapped_and_differ():
    X, Y, k = cases()["hubs n=64 k=10"]
    directed = directed_layers("cknna", X[None], Y[None], k=k).values[:, 0, 0]
    assert directed[1] == pytest.approx(compute("cknna", Y, X, k=k).value, abs=1e-14)
    assert directed[0] == pytest.approx(compute("cknna", X, Y, k=k).value, abs=1e-14)
    assert abs(directed[0] - directed[1]) > 1e-3


def test_a_small_memory_budget_searches_a_row_at_a_time_with_the_same_values():
    X, Y, k = cases()["hubs n=64 k=10"]
    whole = cknna_layers(X[None], Y[None], k=k)[0]
    with budget(1e-9):
        assert torch.allclose(cknna_layers(X[None], Y[None], k=k)[0], whole, rtol=0, atol=1e-14)


def test_the_null_of_independent_inputs_sits_above_zero_and_the_value_within_it():
    """Chance is not 0: shuffled rows still share some neighbours, and each mutual pair they share counts."""
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(80, 6)), rng.normal(size=(80, 5))
    result = null("cknna", X, Y, n_permutations=40, seed=3, k=5)
    assert result.meta["null_route"] == "permuted-neighbours"
    assert result.meta["null_mean"] > 3 * result.meta["null_std"] / math.sqrt(40)
    assert abs(result.value - result.meta["null_mean"]) < 4 * result.meta["null_std"]


def test_a_negative_self_term_gives_nan_with_its_reason():
    """Five rows, k = 3: few of X's neighbour pairs are mutual and its self term HSIC₁(K∘M, K∘M) is −0.0079; the
    reference divides by √(h·h) and returns −0.99987 for (X, X) (−1 but for its 1e-6)."""
    X = np.array([[-2, 0, 1], [2, 1, 3], [0, 3, 2], [1, 3, -1], [1, -2, 0]], dtype=float)
    result = compute_layers("cknna", X[None], X[None], k=3)
    assert np.isnan(result.values).all() and "self term" in result.meta["nan_reason"]


@pytest.mark.parametrize("k, n, message", [(1, 10, "2 ≤ k < n"), (10, 10, "2 ≤ k < n"), (True, 10, "integer"),
                                           (2.0, 10, "integer"), (2, 3, "n ≥ 4")])
def test_bad_k_and_too_few_rows_are_refused(k, n, message):
    X = np.random.default_rng(0).normal(size=(n, 3))
    with pytest.raises(ValueError, match=message):
        cknna_layers(X[None], X[None], k=k)


def test_an_all_zero_row_is_refused():
    X = np.random.default_rng(0).normal(size=(10, 3))
    X[4] = 0
    with pytest.raises(ValueError, match="X layer 0 row 4 is all zeros"):
        cknna_layers(X[None], np.ones((1, 10, 2)), k=3)
