"""Tests generated from the measure registry (reprsim.measure_registry): every measure's declarations checked.

- each declared invariance holds, applied to either argument, on random anisotropic inputs with a mean;
- each undeclared one fails on some input (the declaration is tight, not merely safe);
- identical inputs give the declared value; values lie in the declared range;
- declared symmetry holds, and an asymmetric measure is asymmetric on some input;
- the permutation null of independent inputs centres on their value (|value − null mean| within 4 null sds),
  and a measure that ignores the row correspondence has its value as its null;
- the schema and the CLI say what the registry says (the guide's measures reference: test_docs_reference.py).
"""

import math

import numpy as np
import pytest

import rounding
from reprsim.cli import main
from reprsim.config import SCHEMA_PATH, load_yaml
from reprsim.metrics import compute, null
from reprsim.measure_registry import INVARIANCES, MEASURES

# small-n settings: k below the half of 60 rows; minibatch CKA in batches of 20
PARAMS = {"cka_minibatch": {"batch_size": 20}, "mutual_knn": {"k": 5}, "jaccard_knn": {"k": 5},
          "second_order_cosine": {"k": 5}, "rank_similarity": {"k": 5}, "cknna": {"k": 5}}
NAMES = sorted(MEASURES)
TOLERANCE = 1e-7


def _params(name: str) -> dict:
    return PARAMS.get(name, {})


def _inputs(seed: int, n: int = 60, d_x: int = 6, d_y: int = 5, related: bool = True):
    """X anisotropic with a mean away from zero; Y a noisy linear image of X (or independent of it)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d_x)) @ (rng.normal(size=(d_x, d_x)) + np.diag(np.linspace(0.5, 3, d_x))) + 2.0
    source = X if related else rng.normal(size=(n, d_x))
    Y = np.tanh(source @ rng.normal(size=(d_x, d_y)) / 3) + 0.3 * rng.normal(size=(n, d_y)) + 1.0
    return X, Y


def _transform(kind: str, Z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    d = Z.shape[1]
    if kind == "PU":
        return Z[:, rng.permutation(d)]
    if kind == "OT":
        Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
        return Z @ Q
    if kind == "IS":
        return 3.7 * Z
    if kind == "IL":
        return Z @ (rng.normal(size=(d, d)) + 2 * np.eye(d))
    if kind == "TR":
        return Z + rng.normal(scale=2.0, size=d)
    raise AssertionError(kind)


def _value(name: str, X, Y) -> float:
    return compute(name, X, Y, **_params(name)).value


def _changes(name: str, kind: str, seed: int) -> list[float]:
    """|value after − value before| with the transform on X, then on Y."""
    X, Y = _inputs(seed)
    rng = np.random.default_rng(100 + seed)
    before = _value(name, X, Y)
    return [abs(_value(name, _transform(kind, X, rng), Y) - before),
            abs(_value(name, X, _transform(kind, Y, rng)) - before)]


def _cases(declared: bool):
    return [(name, kind) for name in NAMES for kind in INVARIANCES
            if (kind in MEASURES[name].declared(_params(name))) == declared]


@pytest.mark.parametrize("name,kind", _cases(True))
def test_declared_invariance_holds(name, kind):
    for seed in (0, 1):
        X, Y = _inputs(seed)
        scale = max(1.0, abs(_value(name, X, Y)))
        assert max(_changes(name, kind, seed)) <= TOLERANCE * scale, f"{name} is not invariant to {kind}"


@pytest.mark.parametrize("name,kind", _cases(False))
def test_undeclared_invariance_fails_somewhere(name, kind):
    """The declaration is tight: the measure changes under the transform on some input."""
    assert max(max(_changes(name, kind, seed)) for seed in (0, 1, 2)) > 1e-5, \
        f"{name} looks invariant to {kind} ({INVARIANCES[kind]}), which its registry entry does not declare"


def _identical_tolerance(name: str, X: np.ndarray) -> float:
    """How far from its declared value a measure of X against itself may be, on any BLAS kernel: its terms are
    sums of n·d products (tests/rounding.py); a root of their cancellation loses half the digits; a measure that
    whitens or solves for X's directions (the registry's rows_per_dimension: it needs n > c·d) carries X's
    condition number; an unbounded distance is in X's own units."""
    n, d = X.shape
    centred = X - X.mean(axis=0)
    if root := rounding.root_at_identity(name, n, d):
        return root
    singular = np.linalg.svd(centred, compute_uv=False)
    condition = singular[0] / singular[-1] if MEASURES[name].rows_per_dimension else 1.0
    scale = np.linalg.norm(centred) if math.isinf(MEASURES[name].range[1]) else 1.0
    return rounding.products(n * d, scale=scale, condition=condition)


@pytest.mark.parametrize("name", NAMES)
def test_identical_inputs_give_the_declared_value(name):
    X, _ = _inputs(3)
    assert _value(name, X, X) == pytest.approx(MEASURES[name].identical, abs=_identical_tolerance(name, X))


@pytest.mark.parametrize("name", NAMES)
def test_values_lie_in_the_declared_range(name):
    low, high = MEASURES[name].range
    for seed in range(3):
        for related in (True, False):
            X, Y = _inputs(seed, related=related)
            value = _value(name, X, Y)
            assert low - 1e-9 <= value <= high + 1e-9, f"{name} = {value} outside [{low}, {high}]"


@pytest.mark.parametrize("name", NAMES)
def test_symmetry_is_as_declared(name):
    gaps = []
    for seed in range(3):
        X, Y = _inputs(seed, d_x=6, d_y=6)
        gaps.append(abs(_value(name, X, Y) - _value(name, Y, X)))
    if MEASURES[name].symmetric:
        assert max(gaps) < 1e-9
    else:
        assert max(gaps) > 1e-6


@pytest.mark.parametrize("name", NAMES)
def test_row_correspondence_is_as_declared(name):
    """A measure that uses the correspondence changes when Y's rows are shuffled; one that does not, does not."""
    X, Y = _inputs(4)
    shuffled = Y[np.random.default_rng(0).permutation(len(Y))]
    gap = abs(_value(name, X, shuffled) - _value(name, X, Y))
    assert (gap > 1e-6) == MEASURES[name].correspondence


@pytest.mark.parametrize("name", NAMES)
def test_null_of_independent_inputs_centres_on_their_value(name):
    X, Y = _inputs(5, n=80, related=False)
    result = null(name, X, Y, n_permutations=60, seed=1, **_params(name))
    mean, sd = result.meta["null_mean"], result.meta["null_std"]
    if MEASURES[name].correspondence:
        assert sd > 0 and abs(result.value - mean) <= 4 * sd, f"{name}: {result.value} vs null {mean} ± {sd}"
    else:  # no correspondence to break: the null is the value itself
        assert sd == pytest.approx(0.0, abs=1e-12) and mean == pytest.approx(result.value, abs=1e-12)


def test_at_least_twenty_measures_with_every_property():
    assert len(MEASURES) >= 20
    for spec in MEASURES.values():
        assert spec.kind in ("similarity", "distance") and spec.reference and spec.cost and spec.rows
        assert spec.range[0] <= spec.identical <= spec.range[1]
        assert spec.identical == (spec.range[0] if spec.kind == "distance" else spec.identical)
        assert not math.isnan(spec.work(872, 384, 7, 7))


def test_schema_names_every_measure_and_its_params():
    schema = load_yaml(SCHEMA_PATH)
    enum = schema["properties"]["measures"]["additionalProperties"]["properties"]["measure"]["enum"]
    assert sorted(enum) == NAMES
    params = schema["$defs"]["measure_params"]
    assert {name: set(spec["properties"]) for name, spec in params.items()} == \
        {name: set(spec.params) for name, spec in MEASURES.items()}


def test_cli_lists_every_measure(capsys):
    assert main(["measures"]) == 0
    printed = capsys.readouterr().out
    for name in NAMES:
        assert f"\n{name} " in printed
    assert f"{len(MEASURES)} measures" in printed


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("name", NAMES)
def test_cuda_values_equal_cpu_values(name):
    """Every measure runs on CUDA tensors (the assignment and transport steps on the host) with the CPU's value."""
    import torch

    X, Y = _inputs(6)
    on_gpu = compute(name, torch.as_tensor(X, device="cuda"), torch.as_tensor(Y, device="cuda"), **_params(name))
    assert on_gpu.value == pytest.approx(_value(name, X, Y), rel=1e-8, abs=1e-10)
    assert on_gpu.meta["device"].startswith("cuda")
