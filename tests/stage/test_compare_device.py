"""A pair job on its device: the stacks converted once (the CPU path gives the rows it gave before, when
each measure converted the stored arrays itself), the memory budget changes no value, CUDA agrees with
the CPU, and a job that asks for CUDA where SLURM gave it no GPU says how to route it."""

import json

import numpy as np
import pandas as pd
import pytest
import rounding
import torch
from conftest import write_pooled_store

from reprsim.inference.resampling import half_samples
from reprsim.metrics._inputs import constant_layers
from reprsim.metrics.pair_engine import measure_rows
from reprsim.stages.compare.pairs import compare_pair, pair_device

N_TEST, N_TRAIN = 60, 10
MEASURES = {
    "linear_cka": {"measure": "cka", "params": {"kernel": "linear", "estimator": "biased"}},
    "unbiased_cka": {"measure": "cka", "params": {"kernel": "linear", "estimator": "unbiased"}},
    "rbf_cka": {"measure": "cka", "params": {"kernel": "rbf", "estimator": "biased", "threshold": 1.0}},
    "svcca": {"measure": "svcca", "params": {"threshold": 0.99, "pca_dims": 4}},
    "pwcca": {"measure": "pwcca", "params": {"direction": "min", "pca_dims": 4}, "null_permutations": 4},
    "neuronsim": {"measure": "neuronsim", "resamples": 5},
    "mutual_knn": {"measure": "mutual_knn", "params": {"k": 5}},
    "procrustes": {"measure": "procrustes"},
}
# few draws: these tests compare paths, not chance levels
CHANCE, INTERVALS = {"permutations": 6, "seed": 0}, {"resamples": 8, "confidence": 0.95, "seed": 0}
BOUNDED = ("linear_cka", "unbiased_cka", "rbf_cka", "mutual_knn")  # the measures the budget concerns
NUMBERS = ["value", "null_mean", "null_std", "null_p", "ci_low", "ci_high"]


def write_store(path, name, pooled):
    return write_pooled_store(path, name, pooled, N_TRAIN, N_TEST)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    rng = np.random.default_rng(3)
    rows = N_TRAIN + N_TEST
    latent = rng.normal(size=(rows, 3))
    a = np.stack([latent @ rng.normal(size=(3, 7)) + s * rng.normal(size=(rows, 7)) for s in (0.2, 1.0, 3.0)])
    b = np.stack([latent @ rng.normal(size=(3, 6)) + s * rng.normal(size=(rows, 6)) for s in (0.5, 2.0)])
    a[0] = rng.normal(size=7)  # one constant layer (BERT's CLS token at the embedding layer): NaN rows
    return {"a": write_store(root / "a.zarr", "a", a.astype(np.float32)),
            "b": write_store(root / "b.zarr", "b", b.astype(np.float32)), "arrays": (a, b)}


def run(stores, measures=MEASURES, **options):
    return compare_pair(stores["a"], stores["b"], representation="mean", split="test", measures=measures,
                        chance=CHANCE, intervals=INTERVALS, **options)


@pytest.fixture(scope="module")
def on_cpu(stores):
    return run(stores, device="cpu")


def test_the_cpu_path_gives_the_rows_of_measures_fed_the_stored_arrays(stores, on_cpu):
    table, _ = on_cpu
    Xs, Ys = (x[:, N_TRAIN:].astype(np.float32) for x in stores["arrays"])
    statistics = {"chance": CHANCE, "intervals": INTERVALS, "indices": half_samples(N_TEST, 8, 0)}
    rows = []
    for label, spec in MEASURES.items():
        rows += measure_rows(label, spec, Xs, Ys, constant_layers(Xs), constant_layers(Ys), statistics, [])
    expected = pd.DataFrame(rows)
    pd.testing.assert_frame_equal(table[expected.columns].reset_index(drop=True), expected)
    metas = [json.loads(m) for m in table["meta"]]
    assert {m.get("device") for m in metas} == {"cpu", None} and {m.get("dtype") for m in metas} == {"float32", None}
    assert table["value"].isna().sum() == 6 * 2 + 2 * 2 * 2  # layer 0 of a: 2 pairs, twice for an asymmetric measure


def test_a_small_memory_budget_changes_no_value(stores, on_cpu):
    """1.5 n×n matrices: RBF CKA one layer's Gram at a time, mutual k-NN a block of rows at a time."""
    table, replicates = (frame[frame["measure"].isin(BOUNDED)] for frame in on_cpu)
    small, small_replicates = run(stores, {label: MEASURES[label] for label in BOUNDED}, device="cpu",
                                  max_memory_gb=1.5 * 8 * N_TEST**2 / 2**30)
    # other blocks sum in another order: each of CKA's (at most five) HSIC terms is a sum of n² products whose sizes
    # add up to at most ‖K‖‖L‖ (Cauchy–Schwarz), so a value, and a mean, spread or quantile of values, is within a
    # few γ_n² of its exact value on any kernel: 16 γ_n² between two runs. Mutual k-NN's neighbour sets are equal
    # (the k-th and (k+1)-th similarities of these rows differ by ≥ 2e-4)
    tolerance = rounding.products(N_TEST**2, scale=16)
    np.testing.assert_allclose(small[NUMBERS].to_numpy(), table[NUMBERS].to_numpy(), rtol=0, atol=tolerance)
    np.testing.assert_allclose(small_replicates["value"], replicates["value"], rtol=0, atol=tolerance)


def test_cuda_in_a_slurm_job_without_a_gpu_says_how_to_route_pair_jobs(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(RuntimeError, match="REPRSIM_SLURM_PAIRS_ON_GPU"):
        pair_device("cuda")
    assert pair_device("cpu").type == "cpu" and pair_device("auto").type == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_agrees_with_cpu(stores, on_cpu):
    table, replicates = on_cpu
    on_gpu, gpu_replicates = run(stores, device="cuda")
    np.testing.assert_allclose(on_gpu[NUMBERS].to_numpy(), table[NUMBERS].to_numpy(), rtol=0, atol=1e-6)
    np.testing.assert_allclose(gpu_replicates["value"], replicates["value"], rtol=0, atol=1e-6)
    devices = {json.loads(m).get("device") for m in on_gpu["meta"]} - {None}
    assert devices and all(d.startswith("cuda") for d in devices)
