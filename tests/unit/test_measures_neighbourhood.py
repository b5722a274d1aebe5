"""Neighbourhood (Jaccard k-NN, second-order cosine, rank similarity) and statistics (magnitude,
concentricity, uniformity) measures against loop transcriptions of their papers' formulas."""

import math

import numpy as np
import pytest
import torch

from reprsim.metrics.knn import mutual_knn_layers, neighbours
from reprsim.metrics.neighbourhood import jaccard_knn_layers, rank_similarity_layers, second_order_cosine_layers
from reprsim.metrics.statistics import (
    concentricity_difference_layers,
    magnitude_difference_layers,
    uniformity_difference_layers,
)

NEIGHBOURHOOD = [jaccard_knn_layers, second_order_cosine_layers, rank_similarity_layers]
STATISTICS = [magnitude_difference_layers, concentricity_difference_layers, uniformity_difference_layers]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return torch.from_numpy(rng.normal(size=(2, 40, 6))), torch.from_numpy(rng.normal(size=(3, 40, 5)) + 0.5)


def _cos(a, b):
    return float(a @ b) / (math.sqrt(float(a @ a)) * math.sqrt(float(b @ b)))


def _nearest(Z, k):
    """Row i's k most cosine-similar other rows, most similar first."""
    n = len(Z)
    lists = []
    for i in range(n):
        others = sorted((j for j in range(n) if j != i), key=lambda j: -_cos(Z[i], Z[j]))
        lists.append(others[:k])
    return lists


def jaccard_loop(X, Y, k):
    total = 0.0
    for a, b in zip(_nearest(X, k), _nearest(Y, k)):
        total += len(set(a) & set(b)) / len(set(a) | set(b))
    return total / len(X)


def second_order_loop(X, Y, k):
    total = 0.0
    for i, (a, b) in enumerate(zip(_nearest(X, k), _nearest(Y, k))):
        union = sorted(set(a) | set(b))
        v = np.array([_cos(X[i], X[j]) for j in union])
        w = np.array([_cos(Y[i], Y[j]) for j in union])
        total += _cos(v, w)
    return total / len(X)


def rank_loop(X, Y, k):
    total = 0.0
    for a, b in zip(_nearest(X, k), _nearest(Y, k)):
        shared = set(a) & set(b)
        if not shared:
            continue
        s = 0.0
        for j in shared:
            r, r2 = a.index(j) + 1, b.index(j) + 1
            s += 2 / ((1 + abs(r - r2)) * (r + r2))
        total += s / sum(1 / m for m in range(1, len(shared) + 1))
    return total / len(X)


def magnitude_loop(X, Y):
    def magnitude(Z):
        mean = [sum(Z[i][c] for i in range(len(Z))) / len(Z) for c in range(Z.shape[1])]
        return math.sqrt(sum(m * m for m in mean))

    return abs(magnitude(X) - magnitude(Y))


def concentricity_loop(X, Y):
    def concentricity(Z):
        mean = Z.sum(axis=0) / len(Z)
        return sum(_cos(Z[i], mean) for i in range(len(Z))) / len(Z)

    return abs(concentricity(X) - concentricity(Y))


def uniformity_loop(X, Y, t=2.0):
    def uniformity(Z):
        unit = [z / math.sqrt(float(z @ z)) for z in Z]
        n = len(Z)
        terms = []
        for i in range(n):
            for j in range(i + 1, n):
                terms.append(math.exp(-t * float((unit[i] - unit[j]) @ (unit[i] - unit[j]))))
        return math.log(sum(terms) / len(terms))

    return abs(uniformity(X) - uniformity(Y))


LOOPS = [
    (jaccard_knn_layers, jaccard_loop, {"k": 5}),
    (jaccard_knn_layers, jaccard_loop, {"k": 10}),
    (second_order_cosine_layers, second_order_loop, {"k": 5}),
    (second_order_cosine_layers, second_order_loop, {"k": 10}),
    (rank_similarity_layers, rank_loop, {"k": 5}),
    (rank_similarity_layers, rank_loop, {"k": 10}),
    (magnitude_difference_layers, magnitude_loop, {}),
    (concentricity_difference_layers, concentricity_loop, {}),
    (uniformity_difference_layers, uniformity_loop, {}),
    (uniformity_difference_layers, uniformity_loop, {"t": 0.5}),
]


@pytest.mark.parametrize("measure, loop, params", LOOPS, ids=lambda x: getattr(x, "__name__", str(x)))
def test_batched_equals_loop_transcription(measure, loop, params, data):
    Xs, Ys = data
    values, meta = measure(Xs, Ys, **params)
    assert values.shape == (2, 3) and values.dtype == torch.float64
    for i in range(2):
        for j in range(3):
            assert values[i, j].item() == pytest.approx(loop(Xs[i].numpy(), Ys[j].numpy(), **params), abs=1e-10)
    assert all(meta[key] == value for key, value in params.items())


@pytest.mark.parametrize("measure", NEIGHBOURHOOD + STATISTICS)
def test_identical_inputs(measure, data):
    Xs, _ = data
    values, _ = measure(Xs, Xs)
    best = 0.0 if measure in STATISTICS else 1.0
    assert torch.allclose(values.diagonal(), torch.full((2,), best, dtype=torch.float64), atol=1e-12)


def _circle(degrees):
    radians = np.deg2rad(degrees)
    return torch.from_numpy(np.stack([np.cos(radians), np.sin(radians)], axis=1))[None]


def test_worked_neighbourhood_examples():
    # Angles 0, 10, 30, 70 degrees: 2 nearest (most similar first) [1,2], [0,2], [1,0], [2,1].
    X = _circle([0, 10, 30, 70])
    # Rows 1 and 2 swapped in place: [2,1], [2,0], [0,1], [1,2] — the same sets, every shared pair of ranks
    # swapped: s_i = (2/(2·3) + 2/(2·3)) / H_2 = (2/3) / (3/2) = 4/9.
    swapped = _circle([0, 30, 10, 70])
    assert jaccard_knn_layers(X, swapped, k=2)[0].item() == pytest.approx(1.0)
    assert rank_similarity_layers(X, swapped, k=2)[0].item() == pytest.approx(4 / 9)
    # Row 2 moved to 50 degrees: [1,2], [0,2], [3,1], [2,1]; overlaps 2, 2, 1, 2 → Jaccard (1+1+1/3+1)/4.
    moved = _circle([0, 10, 50, 70])
    assert jaccard_knn_layers(X, moved, k=2)[0].item() == pytest.approx(5 / 6)
    # k = 1, angles 0, 60, 90 vs 0, 90, 60: U_0 = {1, 2}, v_0 = (cos 60, cos 90) = (1/2, 0), v'_0 = (0, 1/2):
    # cosine 0; rows 1 and 2 have one neighbour of similarity cos 30 in both: cosine 1. Mean 2/3.
    # (ReSi's distances would give v_0 = (1/2, 1), v'_0 = (1, 1/2): 0.8, and 0.8 + 2 over 3.)
    value = second_order_cosine_layers(_circle([0, 60, 90]), _circle([0, 90, 60]), k=1)[0]
    assert value.item() == pytest.approx(2 / 3)


def test_worked_statistics_examples():
    X = torch.tensor([[[1.0, 0.0], [3.0, 0.0]]], dtype=torch.float64)  # mean (2, 0)
    Y = torch.tensor([[[0.0, 1.0], [0.0, -1.0], [0.0, 0.0]]], dtype=torch.float64)  # mean 0 (other n: fine)
    assert magnitude_difference_layers(X, Y)[0].item() == pytest.approx(2.0)
    # (1,0), (0,1): mean (1/2, 1/2), each row at 45 degrees to it; (1,0), (2,0): all along the mean.
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64)
    Y = torch.tensor([[[1.0, 0.0], [2.0, 0.0]]], dtype=torch.float64)
    assert concentricity_difference_layers(X, Y)[0].item() == pytest.approx(1 - 1 / math.sqrt(2))
    # (1,0), (-1,0), (0,1): squared distances 4, 2, 2; (1,0), (2,0), (3,0) normalise to one point: u = 0.
    X = torch.tensor([[[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64)
    Y = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]], dtype=torch.float64)
    expected = -math.log((math.exp(-8) + 2 * math.exp(-4)) / 3)
    assert uniformity_difference_layers(X, Y)[0].item() == pytest.approx(expected)
    # Far-apart raw rows would underflow (ReSi's −log n); on the sphere they do not.
    assert uniformity_difference_layers(1e6 * X, Y)[0].item() == pytest.approx(expected)


def test_jaccard_and_rank_relate_to_mutual_knn_overlaps(data):
    Xs, Ys = data
    k = 5
    overlap = torch.stack([(neighbours(X[None], k) * neighbours(Ys, k)).sum(dim=-1) for X in Xs])  # (2, 3, n)
    assert torch.allclose(jaccard_knn_layers(Xs, Ys, k=k)[0], (overlap / (2 * k - overlap)).mean(dim=-1))
    assert torch.allclose(mutual_knn_layers(Xs, Ys, k=k)[0], (overlap / k).mean(dim=-1))
    assert (jaccard_knn_layers(Xs, Ys, k=k)[0] <= mutual_knn_layers(Xs, Ys, k=k)[0]).all()
    # k = 1: m_i ∈ {0, 1}, so m/(2−m) = m/1, and a shared single neighbour has rank 1 in both (s_i = 1).
    knn = mutual_knn_layers(Xs, Ys, k=1)[0]
    assert torch.allclose(jaccard_knn_layers(Xs, Ys, k=1)[0], knn)
    assert torch.allclose(rank_similarity_layers(Xs, Ys, k=1)[0], knn)


def test_invariances(data):
    Xs, Ys = data
    rng = np.random.default_rng(1)
    Q = torch.from_numpy(np.linalg.qr(rng.normal(size=(6, 6)))[0])
    P = torch.eye(6, dtype=torch.float64)[rng.permutation(6)]
    rows = torch.from_numpy(rng.uniform(0.5, 2.0, size=(40, 1)))
    shifted = Xs + 3.0
    for measure in NEIGHBOURHOOD:
        base = measure(Xs, Ys)[0]
        for transformed in (Xs @ Q, Xs @ P, 3.0 * Xs, rows * Xs):
            assert torch.allclose(measure(transformed, Ys)[0], base, atol=1e-12)
        assert not torch.allclose(measure(shifted, Ys)[0], base)
    # Statistics: rotations and unit permutations always; scaling for concentricity and uniformity (rows
    # on the sphere); none under translation; Y's rows in any order.
    for measure, scale_free in zip(STATISTICS, [False, True, True]):
        base = measure(Xs, Ys)[0]
        for transformed in (Xs @ Q, Xs @ P):
            assert torch.allclose(measure(transformed, Ys)[0], base, atol=1e-12)
        assert torch.allclose(measure(3.0 * Xs, Ys)[0], base, atol=1e-12) == scale_free
        assert not torch.allclose(measure(shifted, Ys)[0], base)
        assert torch.allclose(measure(Xs, Ys[:, torch.randperm(40)])[0], base, atol=1e-12)


@pytest.mark.parametrize("measure", NEIGHBOURHOOD)
@pytest.mark.parametrize("k", [0, -1, 40, 41, 2.5, True, "5"])
def test_bad_k_is_named(measure, k, data):
    with pytest.raises(ValueError, match="k must be"):
        measure(*data, k=k)


@pytest.mark.parametrize("t", [0, -1.0, math.inf, math.nan, True, "2"])
def test_bad_t_is_named(t, data):
    with pytest.raises(ValueError, match="t must be"):
        uniformity_difference_layers(*data, t=t)


def test_undefined_inputs_are_named(data):
    Xs, Ys = data
    zero_row = Xs.clone()
    zero_row[1, 7] = 0.0
    for measure in NEIGHBOURHOOD + [concentricity_difference_layers, uniformity_difference_layers]:
        with pytest.raises(ValueError, match="layer 1 row 7 is all zeros"):
            measure(zero_row, Ys)
    with pytest.raises(ValueError, match="same rows"):
        jaccard_knn_layers(Xs, Ys[:, :30])
    with pytest.raises(ValueError, match="zero mean row"):
        concentricity_difference_layers(torch.tensor([[[1.0, 2.0], [-1.0, -2.0]]], dtype=torch.float64), Ys)
    with pytest.raises(ValueError, match="at least 2 rows"):
        uniformity_difference_layers(Xs[:, :1], Ys)
    # Orthogonal rows: every row's similarities to its neighbours are 0, so v_i = 0.
    basis = torch.eye(3, dtype=torch.float64)[None]
    with pytest.raises(ValueError, match="second_order_cosine: row 0 is orthogonal"):
        second_order_cosine_layers(basis, basis, k=1)
