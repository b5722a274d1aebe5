"""The measures' working-memory budget (reprsim.metrics.memory) changes how the n×n measures compute, never
what: the Gram form of CKA tiled over layers, mutual k-NN from neighbour lists a block of rows at a time,
the unbiased linear CKA in feature form; and the SLURM profile routes pair jobs to a GPU only when asked."""

import numpy as np
import pytest
import torch
from conftest import REPO
from test_cka import gram_tolerance

from reprsim.inference.resampling import half_samples
from reprsim.metrics import cka as cka_module
from reprsim.metrics import knn, memory, permutation, subsample


@pytest.fixture(scope="module")
def stacks():
    rng = np.random.default_rng(7)
    latent = rng.normal(size=(48, 3))
    Xs = torch.tensor(np.stack([latent @ rng.normal(size=(3, 6)) + s * rng.normal(size=(48, 6)) + 2.0
                                for s in (0.3, 1.0, 3.0)]))
    Ys = torch.tensor(np.stack([latent @ rng.normal(size=(3, 5)) + s * rng.normal(size=(48, 5))
                                for s in (0.5, 2.0)]))
    return Xs, Ys


def tiny_budget_gb(n: int, grams: float) -> float:
    """A budget of `grams` n×n float64 matrices (and half of one more, against rounding), in GiB."""
    return (grams + 0.5) * 8 * n * n / memory.GIB


def test_the_budget_is_restored_and_must_be_positive():
    before = memory.working_bytes()
    with memory.budget(0.5) as inside:
        assert inside == memory.working_bytes() == memory.GIB // 2
        with memory.budget(None):
            assert memory.working_bytes() == memory.GIB // 2
    assert memory.working_bytes() == before
    with pytest.raises(ValueError, match="> 0"), memory.budget(0):
        pass


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
@pytest.mark.parametrize("estimator", ["biased", "unbiased"])
def test_the_tiled_gram_form_gives_the_stacked_values(stacks, kernel, estimator, monkeypatch):
    Xs, Ys = stacks
    n = Xs.shape[1]
    stacked = cka_module._gram_form(Xs, Ys, kernel, estimator, 1.0)
    assert not cka_module.gram_plan(3, 2, n, kernel)["tiled"]
    held = []
    real = cka_module._grams
    monkeypatch.setattr(cka_module, "_grams", lambda Zs, layers, *a: held.append(len(list(layers))) or real(Zs, layers, *a))
    for grams in (1, 4):  # below one layer's need (1 held); 3 layers held beside one of the other side
        held.clear()
        with memory.budget(tiny_budget_gb(n, grams + cka_module.GRAM_SCRATCH[kernel])):
            plan = cka_module.gram_plan(3, 2, n, kernel)
            tiled = cka_module._gram_form(Xs, Ys, kernel, estimator, 1.0)
        assert plan["tiled"] and max(held) == plan["held"] <= max(1, grams - 1) and sum(held) == plan["builds"]
        # the same Grams, summed in blocks of other shapes: apart by rounding (X's rows are shifted by 2.0, which the
        # unbiased estimator's sums cancel)
        torch.testing.assert_close(tiled, stacked, rtol=0, atol=gram_tolerance(Xs, Ys, kernel, estimator))


def test_the_unbiased_linear_cka_has_a_feature_form_equal_to_the_gram_form(stacks):
    Xs, Ys = stacks
    feature = cka_module._feature_space_linear(cka_module.centre(Xs), cka_module.centre(Ys), "unbiased")
    gram = cka_module._gram_form(Xs, Ys, "linear", "unbiased", 1.0)
    torch.testing.assert_close(feature, gram, rtol=0, atol=1e-10)
    values, meta = cka_module.cka_layers(Xs, Ys, estimator="unbiased")  # n > d and cheaper: the feature form
    assert meta["form"] == "feature"
    torch.testing.assert_close(values, gram, rtol=0, atol=1e-10)


def test_mutual_knn_from_neighbour_lists_equals_the_neighbour_matrices(stacks):
    Xs, Ys = stacks
    n, k = Xs.shape[1], 4
    dense = (knn.neighbours(Xs, k).flatten(1) @ knn.neighbours(Ys, k).flatten(1).T) / (k * n)
    perms = permutation.permutations(n, 3, 0, Xs.device)
    indices = half_samples(n, 3, 0)
    rows = [torch.as_tensor(i) for i in indices]
    results = []
    for gb in (None, tiny_budget_gb(n, 0.3)):  # whole similarity matrices, then blocks of rows
        with memory.budget(gb):
            results.append((knn.mutual_knn_layers(Xs, Ys, k)[0],
                            permutation.null_draws("mutual_knn", Xs, Ys, perms, None, k=k)[0][:, 0],
                            subsample.replicate_draws("mutual_knn", Xs, Ys, indices, None, k=k)[0][:, 0]))
    for values, null, replicates in results:
        assert torch.equal(values, dense)
        for draw, p in zip(null, perms):  # the permuted-neighbours route is recomputing on permuted rows
            assert np.array_equal(draw, knn.mutual_knn_layers(Xs, Ys[:, p], k)[0].numpy())
        for replicate, idx in zip(replicates, rows):
            assert np.array_equal(replicate, knn.mutual_knn_layers(Xs[:, idx], Ys[:, idx], k)[0].numpy())
    assert all(np.array_equal(a, b) for a, b in zip(results[0][1:], results[1][1:]))


def load_profile():
    import yte

    with open(REPO / "profiles" / "slurm" / "config.yaml") as handle:
        return yte.process_yaml(handle, require_use_yte=True)


def test_the_profile_routes_pair_jobs_to_the_gpu_only_when_asked(monkeypatch):
    monkeypatch.setenv("REPRSIM_SLURM_GPU_PARTITION", "a100")
    monkeypatch.delenv("REPRSIM_SLURM_PAIRS_ON_GPU", raising=False)
    assert "compare_pair" not in load_profile()["set-resources"]
    monkeypatch.setenv("REPRSIM_SLURM_PAIRS_ON_GPU", "1")
    profile = load_profile()
    routed = profile["set-resources"]
    assert routed["compare_pair"]["gpu"] == 1 and routed["compare_pair"]["slurm_partition"] == "'a100'"
    # a group job's jobs share one partition: every rule of the pair jobs' group goes along
    group = profile["groups"]["compare_pair"]
    for rule in (r for r, g in profile["groups"].items() if g == group):
        assert routed[rule]["slurm_partition"] == "'a100'", rule
        assert "gpu" not in routed[rule] or rule in ("compare_pair", "model_terms")


def test_the_pair_rules_ask_for_a_gpu_only_on_cuda():
    text = (REPO / "rules" / "compare.smk").read_text()
    for name in ("model_terms", "compare_pair"):
        rule = text.split(f"rule {name}:")[1].split("\nrule ")[0]
        assert "**PAIR_GPU" in rule.split("resources:")[1].split("conda:")[0], name
    assert 'PAIR_GPU = {"gpu": 1} if config["similarity"]["device"] == "cuda" else {}' in text
