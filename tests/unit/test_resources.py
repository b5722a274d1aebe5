"""Job resources (reprsim.workflow.resources): worked values of the formulas on hand-made facts,
scaling with Snakemake's `attempt`, the MIN_MINUTES floor, and the fine-tuning step count."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
import yaml

from reprsim.workflow import facts, job_costs, pair_work, plan
from reprsim.workflow import resources as r
from reprsim.workflow.measures import with_draws

# A MiniLM-sized model (meta.json facts): 22.7M parameters, 6 layers, 384 wide.
SMALL = {"n_parameters": 22_700_000, "n_layers": 6, "hidden_size": 384}
EXTRACTION = {"splits": ["train", "validation"], "max_examples": None, "batch_size": 32, "max_length": 128}
SPEC = {"source": "finetune", "base": "small", "batch_size": 32, "max_length": 128}  # no steps, no epochs
# Zarr attributes of two stores: the small model, and a 12-layer 768-wide one.
STORE_A = {"n_examples": 2000, "n_layers": 6, "hidden_size": 384, "split_sizes": {"train": 1128, "validation": 872}}
STORE_B = {"n_examples": 2000, "n_layers": 12, "hidden_size": 768, "split_sizes": {"train": 1128, "validation": 872}}
ALIGN = {
    "aligners": {"ridge": {"aligner": "ridge", "params": {}},  # closed form: 3 passes
                 "inn": {"aligner": "inn", "params": {"epochs": 20}},  # 20
                 "mlp": {"aligner": "mlp", "params": {}}},  # 100 by default
    "layers": "matching",
    "synthetic": {"map_seeds": [0, 1, 2], "layers": [-1, -2]},
}


# ----------------------------------------------------------------- worked values
def test_constants():
    assert (r.MODEL_FLOPS, r.MIN_MINUTES) == (1e12, 5)
    assert r.CORE_FLOPS == pair_work.CORE_FLOPS
    assert plan.DEFAULT_STEPS == 300


def test_extract():
    # 2000 + weights 2*4*22.7 = 181.6 + activations 3*4*7*32*128*384/1e6 = 132.120576 -> 2313.72
    assert r.extract_mem_mb(SMALL, EXTRACTION, 1) == 2313
    assert r.extract_mem_mb(SMALL, EXTRACTION, 2) == 4627  # int(4627.44)
    # 2 * 22.7e6 * 100000 rows * 128 tokens = 5.8112e14 FLOPs = 581.12 s = 9.685 min; + 5 -> 14.69
    assert r.minutes(r.extract_seconds(SMALL, 100_000, EXTRACTION), 1) == 15
    assert r.minutes(r.extract_seconds(SMALL, 100_000, EXTRACTION), 2) == 30  # ceil(29.37)


def test_split_rows_caps_each_split():
    sizes = {"train": 67_349, "validation": 872, "test": 1821}
    assert r.split_rows(sizes, ["train", "validation"]) == 68_221
    assert r.split_rows(sizes, ["train", "validation"], cap=1000) == 1000 + 872
    assert r.split_rows(sizes, ["validation", "unknown"]) == 872  # a missing split has no rows
    assert r.split_rows(sizes, ["train", "test"], cap=None) == 69_170


def test_finetune():
    # 2500 + weights 4*4*22.7 = 363.2 + activations 12*4*7*32*128*384/1e6 = 528.482304 -> 3391.68
    assert r.finetune_mem_mb(SMALL, SPEC, 1) == 3391
    assert r.finetune_mem_mb(SMALL, SPEC, 2) == 6783  # int(6783.36)
    # 300 default steps * 32 * 128 = 1228800 tokens; 872 validation rows * 128 = 111616 tokens;
    # 22.7e6 * (6 * 1228800 + 2 * 111616) = 1.7243e14 FLOPs = 172.4 s = 2.874 min; + 5 -> 7.87
    assert r.minutes(r.finetune_seconds(SMALL, SPEC, 67_349, 872), 1) == 8
    assert r.minutes(r.finetune_seconds(SMALL, SPEC, 67_349, 872), 2) == 16  # ceil(15.75)
    # the evaluation pass alone (no step): 2 * 22.7e6 * 1e6 rows * 128 = 5.8112e15 FLOPs = 96.85 min; + 5
    assert r.minutes(r.finetune_seconds(SMALL, SPEC | {"steps": 0}, 67_349, 1_000_000), 1) == 102


def test_finetune_runtime_counts_epochs_as_ceil_of_epochs_times_rows_over_batch():
    # A model whose one step (10 rows of 100 tokens) costs 6 * 1e10 * 1000 = 6e13 FLOPs: one minute.
    huge = {"n_parameters": 10**10, "n_layers": 1, "hidden_size": 1}
    spec = {"epochs": 1, "batch_size": 10, "max_length": 100}
    # 1 epoch of 11 rows in batches of 10: ceil(1.1) = 2 steps (not 1), 2 minutes + 5
    assert r.minutes(r.finetune_seconds(huge, spec, 11, 0), 1) == 7
    assert r.minutes(r.finetune_seconds(huge, spec, 10, 0), 1) == 6  # exactly one step
    assert r.minutes(r.finetune_seconds(huge, spec | {"epochs": 2.5}, 11, 0), 1) == 5 + 3  # ceil(2.75)
    assert r.minutes(r.finetune_seconds(huge, spec | {"steps": 4}, 11, 0), 1) == 5 + 4  # steps win over epochs


def test_evaluation_memory():
    # head inputs 2*4*7*(872 + 2000)*384/1e6 = 61.759488; weights 181.6;
    # one batch of 64: 3*4*7*64*128*384/1e6 = 264.241152; 2000 + ... = 2507.60
    assert r.evaluation_mem_mb(SMALL, 872, 2000, 128, 64, 1) == 2507
    # no heads: 2000 + 181.6 + 264.241152 + 2*4*7*872*384/1e6 (18.751488) = 2464.59
    assert r.evaluation_mem_mb(SMALL, 872, 0, 128, 64, 1) == 2464


def test_head_train_rows():
    heads = {"enabled": True, "max_train_examples": 2000}
    assert r.head_train_rows(67_349, heads) == 2000
    assert r.head_train_rows(500, heads) == 500
    assert r.head_train_rows(67_349, {"enabled": True, "max_train_examples": None}) == 67_349
    assert r.head_train_rows(67_349, {"enabled": False, "max_train_examples": 2000}) == 0
    assert r.head_train_rows(67_349, {}) == 0
    assert r.head_train_rows(67_349, None) == 0


def test_truncation_and_skip_runtime():
    # heads: 10000 + 2 * (10000 + 2000) = 34000 passes; 2 * 22.7e6 * 34000 * 128 = 1.9758e14 FLOPs
    # = 197.6 s = 3.293 min; + 5 -> 8.29
    assert r.minutes(r.truncation_seconds(SMALL, 10_000, 2000, 128), 1) == 9
    # no heads: 10000 passes, 5.8112e13 FLOPs = 0.969 min; + 5 -> 5.97
    assert r.minutes(r.truncation_seconds(SMALL, 10_000, 0, 128), 1) == 6
    # 1 + 6*7/2 = 22 spans; 2 * 22.7e6 * 872 * 22 * 128 = 1.1148e14 FLOPs = 1.858 min; + 5 -> 6.86
    assert r.minutes(r.skip_seconds(SMALL, 872, 128), 1) == 7
    assert r.minutes(r.skip_seconds(SMALL, 872, 128), 2) == 14  # ceil(13.72)
    # 10000 rows: 2 * 22.7e6 * 10000 * 22 * 128 = 1.2785e15 FLOPs = 21.31 min; + 5 -> 26.31
    assert r.minutes(r.skip_seconds(SMALL, 10_000, 128), 1) == 27


def test_compare():
    # widths (6+1)*384 = 2688 and (12+1)*768 = 9984; 2000 rows, 872 compared (validation)
    assert r.pair_sizes(STORE_A, STORE_B, "validation") == (2000, 872, [2688, 9984])
    # 2000 + 3*8*2000*12672/1e6 (608.256) + 4*8*872**2/1e6 (24.332288) = 2632.59
    assert r.compare_mem_mb(STORE_A, STORE_B, "validation", 1) == 2632
    # a Gram-form measure may fill similarity.max_memory_gb, but needs no more than every layer's Grams and a
    # copy each: 2 * 8 * 872**2 * (6 + 12 + 2) / 1e6 = 243.32 MB here; 2000 + 608.256 + 243.323 = 2851.58
    assert r.compare_mem_mb(STORE_A, STORE_B, "validation", 1, gram_budget_gb=8) == 2851
    # 8,720 rows: every layer's would be 24,330 MB, so the budget binds: 2000 + 608.256 + 8 * 1073.7 = 11197.86
    more = {**STORE_A, "split_sizes": {**STORE_A["split_sizes"], "validation": 8720}}
    assert r.compare_mem_mb(more, STORE_B, "validation", 1, gram_budget_gb=8) == 11197
    # a measure on conditioned features: a conditioned copy of both stacks (8*2000*12672/1e6 = 202.752 MB) and its
    # own sides' Grams: 2000 + 4*202.752 + 2*243.323 = 3297.65
    assert r.compare_mem_mb(STORE_A, STORE_B, "validation", 1, gram_budget_gb=8, conditioned=True) == 3297


# ----------------------------------------------------------------- pair jobs: routes counted (pair_work)
DEFAULT_CKA = {"measure": "cka", "params": {"kernel": "linear", "estimator": "biased"}}


def test_linear_cka_routes_worked_example():
    """Two 7-layer models, 872 rows, 30 permutations and 30 half-samples (the default run's MiniLM pair)."""
    work = dict((part, (flops, nbytes)) for part, flops, nbytes in pair_work.pair_work(DEFAULT_CKA, 7, 384, 7, 384,
                                                                                      872, 30, 30))
    grams = 872 * 872
    assert work["value"] == (2 * 49 * grams, 8 * 14 * grams)  # 74.5 MFLOP; both sides' Grams read once
    # every permutation gathers one side's 7 Grams' upper triangles (read + write) and multiplies them with the other
    # side's (read once)
    half = 872 * 873 / 2
    assert work["null: permuted Grams"] == (0, 30 * 2 * 8 * 7 * half)
    assert work["null: inner products"] == (30 * 2 * 49 * half, 30 * 8 * 7 * half + 8 * 7 * half)
    # per X layer: its products with Y's 7 Grams (elementwise) and their sums over each half-sample (1 + 2R)
    assert work["interval: masked products"] == (49 * grams * 61, 8 * 7 * grams * 15)
    terms = dict((part, (f, b)) for part, f, b in pair_work.terms_work(DEFAULT_CKA, 7, 384, 872, 30))
    assert terms["Grams"] == (2 * 7 * grams * 384, 8 * 7 * grams * 2)


def test_the_floor_is_each_primitive_at_its_binding_rate():
    work = [("compute", 4e10, 1e9), ("memory", 1e9, 3e10)]
    assert pair_work.floor_seconds(work, flops=2e10, bandwidth=1e10) == pytest.approx(2.0 + 3.0)


def test_a_pair_job_prices_measures_at_floor_times_the_measured_ratio():
    shape = (7, 384, 7, 384, 872)
    linear = {**DEFAULT_CKA, "null_permutations": 30, "resamples": 30}
    alone = pair_work.pair_seconds({"a": linear}, *shape)
    floor = pair_work.floor_seconds(pair_work.pair_work(linear, *shape, 30, 30))
    assert alone == pytest.approx(pair_work.ACHIEVED["gram"] * floor)
    # the unbiased estimator with as many or fewer draws reuses the biased one's products; more draws cost more
    unbiased = {"measure": "cka", "params": {"estimator": "unbiased"}, "null_permutations": 20, "resamples": 30}
    assert pair_work.pair_seconds({"a": linear, "b": unbiased}, *shape) == pytest.approx(alone)
    assert pair_work.pair_seconds({"a": linear, "b": {**unbiased, "null_permutations": 40}}, *shape) > alone


def test_the_gpu_constants_are_those_fitted_to_the_gpu_measurements():
    """GPU_DRAW_SECONDS and GPU_SPEEDUP refit from GPU_MEASURED (the default's measures, with their draws, at its
    shape and row counts); a GPU pair job is its draws' fixed cost plus the one-core estimate sped up."""
    default = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "config.yaml").read_text())
    measures = with_draws(default, dict(default["measures"]))
    Lx, dx, Ly, dy = pair_work.GPU_MEASURED["shape"]
    points = [(pair_work.draw_pairs(measures, Lx, Ly), pair_work.pair_seconds(measures, Lx, dx, Ly, dy, n), seconds)
              for n, seconds in pair_work.GPU_MEASURED["seconds"].items()]
    fixed, speedup = pair_work.fit_gpu(points)
    assert fixed == pytest.approx(pair_work.GPU_DRAW_SECONDS, rel=0.01)
    assert speedup == pytest.approx(pair_work.GPU_SPEEDUP, rel=0.01)
    for n, seconds in pair_work.GPU_MEASURED["seconds"].items():
        assert pair_work.pair_seconds(measures, Lx, dx, Ly, dy, n, gpu=True) == pytest.approx(seconds, rel=0.01)
    # one point, or points that do not grow with the estimate, determine nothing
    assert pair_work.fit_gpu(points[:1]) is None
    assert pair_work.fit_gpu([(d, c, 1.0) for d, c, _ in points]) is None


def test_a_models_terms_price_each_family_once_and_store_grams_only_while_small():
    linear = {**DEFAULT_CKA, "null_permutations": 30, "resamples": 30}
    unbiased = {"measure": "cka", "params": {"estimator": "unbiased"}}
    svcca = {"measure": "svcca", "params": {"pca_dims": 64}}
    pwcca = {"measure": "pwcca", "params": {"pca_dims": 64}}
    one = pair_work.terms_seconds({"a": linear}, 7, 384, 872, 30)
    assert one == pytest.approx(pair_work.TERMS_ACHIEVED["gram"] * pair_work.floor_seconds(
        pair_work.terms_work(linear, 7, 384, 872, 30)))
    # both CKA estimators read one set of Grams; SVCCA and PWCCA cut their bases from one SVD per layer
    assert pair_work.terms_seconds({"a": linear, "b": unbiased}, 7, 384, 872, 30) == pytest.approx(one)
    bases = pair_work.terms_seconds({"s": svcca}, 7, 384, 872, 30)
    assert pair_work.terms_seconds({"s": svcca, "p": pwcca}, 7, 384, 872, 30) == pytest.approx(bases)
    # stored: 7 centred Grams of 872 rows (42.6 MB) and the half-sample terms; at 10,000 rows the Grams (5.6 GB)
    # are left to the pair jobs, which rebuild them from the stack
    half = 8 * (7 * 872 + 7 + 30 * 7 * 436 + 30 * 7)
    assert pair_work.terms_bytes({"a": linear}, 7, 384, 872, 30) == 8 * 7 * 872**2 + half
    assert pair_work.terms_bytes({"a": linear}, 7, 384, 10_000, 30) == 8 * (7 * 10_000 + 7 + 30 * 7 * 5000 + 30 * 7)
    assert pair_work.terms_bytes({"a": linear, "b": unbiased}, 7, 384, 872, 30) == 8 * 7 * 872**2 + half
    # SVCCA's bases are cut by its variance threshold, PWCCA's are not: two sets of (n, 64) bases and (64, d) maps
    assert pair_work.terms_bytes({"s": svcca, "p": pwcca}, 7, 384, 872, 30) == 2 * 8 * 7 * (872 * 64 + 64 * 384)


def test_compare_runtime_counts_only_the_compared_rows_and_grows_with_them():
    config = {"similarity": {"split": "validation", "chance": {"permutations": 30}, "intervals": {"resamples": 30},
                             "representations": ["mean"], "device": "cpu"}, "measures": {"cka": DEFAULT_CKA}}

    class Facts:
        def __init__(self, stores):
            self.stores = stores

        def store(self, dataset, model):
            return self.stores[model]

    w = {"dataset": "d", "representation": "mean", "model_a": "a", "model_b": "b"}
    base = job_costs.compare_seconds(Facts({"a": STORE_A, "b": STORE_B}), config, w)
    many = STORE_A | {"n_examples": 100_000}  # rows of other splits cost nothing
    assert job_costs.compare_seconds(Facts({"a": many, "b": STORE_B}), config, w) == base
    more = {**STORE_A, "split_sizes": {**STORE_A["split_sizes"], "validation": 8720}}
    assert job_costs.compare_seconds(Facts({"a": more, "b": STORE_B}), config, w) > 50 * base  # O(n²) routes


def test_align():
    assert r.aligner_passes(ALIGN) == 3 + 20 + 100
    assert r.aligner_passes({}) == 0
    # pair: depths 7 and 13, matching -> 13 layer pairs; width 384 + 768 = 1152; 2000 rows;
    # 2*6*2000*1152**2*13*123 = 5.0929e13 FLOPs = 0.849 min; + 5 -> 5.85
    assert r.minutes(r.align_seconds(STORE_A, STORE_B, ALIGN), 1) == 6
    # all layer pairs: 7 * 13 = 91 -> 3.5650e14 FLOPs = 5.942 min; + 5 -> 10.94
    assert r.minutes(r.align_seconds(STORE_A, STORE_B, ALIGN | {"layers": "all"}), 1) == 11
    # synthetic: 3 map seeds * 2 layers = 6 fits on a 20000-row 768-wide store mapped onto itself:
    # 2*6*20000*1536**2*6*123 = 4.1788e14 FLOPs = 6.965 min; + 5 -> 11.96
    assert r.minutes(r.align_seconds(STORE_B | {"n_examples": 20_000}, r.SYNTHETIC, ALIGN), 1) == 12
    # defaults of the synthetic settings: one seed, one layer -> 1/6 of the above = 1.161 min
    assert r.minutes(r.align_seconds(STORE_B | {"n_examples": 20_000}, None, ALIGN | {"synthetic": {}}), 1) == 7
    # memory: a pair job's is the compare job's; synthetic 2000 + 3*8*2000*2*384/1e6 = 2036.86
    assert r.align_mem_mb(STORE_A, STORE_B, "validation", 1) == r.compare_mem_mb(STORE_A, STORE_B, "validation", 1)
    assert r.align_mem_mb(STORE_A, None, "validation", 1) == 2036


# ----------------------------------------------------------------- attempt and floor
def every_estimate(attempt: int) -> dict[str, int]:
    return {
        "extract_mem_mb": r.extract_mem_mb(SMALL, EXTRACTION, attempt),
        "extract_runtime": r.minutes(r.extract_seconds(SMALL, 100_000, EXTRACTION), attempt),
        "finetune_mem_mb": r.finetune_mem_mb(SMALL, SPEC, attempt),
        "finetune_runtime": r.minutes(r.finetune_seconds(SMALL, SPEC | {"epochs": 3}, 67_349, 872), attempt),
        "evaluation_mem_mb": r.evaluation_mem_mb(SMALL, 872, 2000, 128, 64, attempt),
        "truncation_runtime": r.minutes(r.truncation_seconds(SMALL, 872, 2000, 128), attempt),
        "skip_runtime": r.minutes(r.skip_seconds(SMALL, 872, 128), attempt),
        "compare_mem_mb": r.compare_mem_mb(STORE_A, STORE_B, "validation", attempt),
        "compare_runtime": r.minutes(pair_work.pair_seconds({"cka": {**DEFAULT_CKA, "null_permutations": 30,
                                                                      "resamples": 30}}, 7, 384, 13, 768, 872),
                                     attempt),
        "align_mem_mb": r.align_mem_mb(STORE_A, STORE_B, "validation", attempt),
        "align_mem_mb synthetic": r.align_mem_mb(STORE_A, None, "validation", attempt),
        "align_runtime": r.minutes(r.align_seconds(STORE_A, STORE_B, ALIGN), attempt),
        "align_runtime synthetic": r.minutes(r.align_seconds(STORE_A, None, ALIGN), attempt),
    }


@pytest.mark.parametrize("attempt", [2, 3])
def test_every_estimate_grows_in_proportion_to_attempt(attempt):
    once, again = every_estimate(1), every_estimate(attempt)
    for name, value in once.items():
        assert isinstance(again[name], int), name
        # int() and ceil() round once, so `attempt` times the first estimate is off by less than `attempt`
        assert abs(again[name] - attempt * value) < attempt, (name, value, again[name])


def test_a_job_with_no_work_asks_for_the_floor():
    empty = {"n_examples": 0, "n_layers": 6, "hidden_size": 384, "split_sizes": {}}
    for attempt in (1, 3):
        floor = r.MIN_MINUTES * attempt
        assert r.minutes(r.extract_seconds(SMALL, 0, EXTRACTION), attempt) == floor
        assert r.minutes(r.finetune_seconds(SMALL, SPEC | {"steps": 0}, 100, 0), attempt) == floor
        assert r.minutes(r.truncation_seconds(SMALL, 0, 0, 128), attempt) == floor
        assert r.minutes(r.skip_seconds(SMALL, 0, 128), attempt) == floor
        assert r.minutes(pair_work.pair_seconds({"cka": DEFAULT_CKA}, 7, 384, 7, 384, 0), attempt) == floor
        assert r.minutes(r.align_seconds(STORE_A, STORE_B, {"aligners": {}}), attempt) == floor
    # the least work rounds up to a whole minute beyond the floor
    assert r.minutes(r.extract_seconds(SMALL, 1, EXTRACTION), 1) == r.MIN_MINUTES + 1


# ----------------------------------------------------------------- training steps
def test_training_steps_precedence():
    assert plan.training_steps({"steps": 7, "epochs": 3, "batch_size": 10}, 100) == 7  # steps over epochs
    assert plan.training_steps({"steps": None, "epochs": 3, "batch_size": 10}, 101) == 31  # ceil(30.3)
    assert plan.training_steps({"epochs": 0.5, "batch_size": 32}, 100) == 2  # ceil(1.5625)
    assert plan.training_steps({"epochs": 1, "batch_size": 32}, 0) == 1  # at least one step
    assert plan.training_steps({"batch_size": 32}, 100) == plan.DEFAULT_STEPS == 300
    assert plan.training_steps({"steps": None, "epochs": None, "batch_size": 32}, 100) == 300


def test_resources_use_only_the_standard_library():
    """The rules import these whenever the DAG is built: no third-party import, not even numpy."""
    for module in (r, plan, facts, job_costs):
        tree = ast.parse(Path(module.__file__).read_text())
        top = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names}
        top |= {node.module.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module}
        assert top <= set(sys.stdlib_module_names) | {"reprsim"}, (module.__name__, top)


def test_stitch():
    # 6 maps, 100 steps of 8 x 128 tokens: 102,400 * (2 * 22.7e6 + 6 * 6 * 22.7e6) = 8.8330e13 FLOPs; evaluation
    # 1,000 rows: 128,000 * 2 * (22.7e6 + 7 * 22.7e6) = 4.6490e13; 1.3482e14 / 1e12 = 134.8 s = 2.25 min; + 5 -> 7.25
    assert r.stitch_seconds(SMALL, SMALL, 6, 100, 8, 128, 1000) == pytest.approx(134.82, abs=0.01)
    assert r.minutes(r.stitch_seconds(SMALL, SMALL, 6, 100, 8, 128, 1000), 1) == 8


def test_the_cost_model_knows_when_grams_do_not_fit_in_memory():
    """pair_work's rule is the metrics' (restated there: a pair job's code inputs stay free of the cost model);
    beyond it a CKA measure is priced as recomputed per draw."""
    from reprsim.metrics import memory
    from reprsim.metrics.cka import grams_fit

    for n, gb in ((872, 8.0), (7680, 8.0), (7680, 16.0), (7680, 28.0)):
        with memory.budget(gb):
            assert pair_work.grams_fit(13, 13, n, gb) == grams_fit((13, n, 768), (13, n, 768))
    linear = {**DEFAULT_CKA, "null_permutations": 20, "resamples": 20}
    work = pair_work.pair_work(linear, 13, 768, 13, 768, 7680, 20, 20, memory_gb=8)
    assert all(part.endswith("cross products") for part, _, _ in work)
    assert not any(part.endswith("cross products") for part, _, _ in pair_work.pair_work(linear, 13, 768, 13, 768,
                                                                                         7680, 20, 20, memory_gb=28))


# ----------------------------------------------------------------- partition time limits
def test_a_time_limit_is_read_in_minutes_or_as_slurm_writes_it():
    for value, minutes in [("2880", 2880), ("2-00:00:00", 2880), ("48:00:00", 2880), ("1-12", 2160),
                           ("0-0:30", 30), ("90:30", 91), (" 60 ", 60)]:
        assert r.slurm_minutes(value) == minutes, value
    for value in ("", "infinite", "UNLIMITED"):
        assert r.slurm_minutes(value) is None
    for value in ("2d", "1:2:3:4", "0", "-5", "1-2:3:4:5"):
        with pytest.raises(ValueError):
            r.slurm_minutes(value)
    assert r.time_limits({}) == {"cpu": None, "gpu": None}
    assert r.time_limits({"REPRSIM_SLURM_GPU_TIME_LIMIT": "2-00:00:00"}) == {"cpu": None, "gpu": 2880}
    with pytest.raises(ValueError, match="REPRSIM_SLURM_CPU_TIME_LIMIT='two days'"):
        r.time_limits({"REPRSIM_SLURM_CPU_TIME_LIMIT": "two days"})


def test_jobs_go_to_the_partition_the_profile_sends_them_to():
    assert r.partition(True, "gpu", {}) == "gpu" and r.partition(False, None, {}) == "cpu"
    # pair and terms jobs: the CPU partition, even asking for a GPU, unless REPRSIM_SLURM_PAIRS_ON_GPU
    assert r.partition(True, "pairs", {}) == "cpu"
    assert r.partition(False, "terms", {"REPRSIM_SLURM_PAIRS_ON_GPU": "yes"}) == "gpu"


def test_the_retries_runtime_is_capped_at_the_limit():
    seconds = 27 * 3600  # a fine-tuning of 27 h
    asked = [r.minutes(seconds, attempt) for attempt in (1, 2, 3)]
    assert asked == [1625, 3250, 4875]
    assert [r.capped_minutes(seconds, attempt, 2880) for attempt in (1, 2, 3)] == [1625, 2880, 2880]
    assert [r.capped_minutes(seconds, attempt, None) for attempt in (1, 2, 3)] == asked


def test_the_rules_runtime_is_capped_at_its_partitions_limit(monkeypatch):
    """rules/resources.smk, as Snakemake loads it: each rule's runtime capped at the limit of its partition."""
    monkeypatch.setenv("REPRSIM_SLURM_GPU_TIME_LIMIT", "2-00:00:00")
    monkeypatch.setenv("REPRSIM_SLURM_CPU_TIME_LIMIT", "60")
    monkeypatch.delenv("REPRSIM_SLURM_PAIRS_ON_GPU", raising=False)
    monkeypatch.setattr(job_costs, "COSTS", {rule: (cost[0], lambda facts, config, wildcards: 27 * 3600.0)
                                             for rule, cost in job_costs.COSTS.items()})
    source = Path(__file__).resolve().parents[2] / "rules" / "resources.smk"

    def load() -> dict:
        # what resources.smk takes from the Snakefile's shared namespace: json (common.smk) and a pair job's model
        # pairs (compare.smk's block_pairs)
        namespace = {"config": {}, "json": json, "block_pairs": lambda wildcards: "[]"}
        exec(compile(source.read_text(), str(source), "exec"), namespace)
        return namespace

    rules = load()
    wildcards = {}
    assert [rules["finetune_runtime"](wildcards, [], attempt) for attempt in (1, 2, 3)] == [1625, 2880, 2880]
    assert rules["compare_runtime"](wildcards, [], 1) == rules["terms_runtime"](wildcards, [], 2) == 60
    monkeypatch.setenv("REPRSIM_SLURM_PAIRS_ON_GPU", "1")  # pair jobs in the GPU partition: its limit
    assert load()["compare_runtime"](wildcards, [], 2) == 2880
    monkeypatch.setenv("REPRSIM_SLURM_GPU_TIME_LIMIT", "two days")
    with pytest.raises(ValueError, match="REPRSIM_SLURM_GPU_TIME_LIMIT"):
        load()


def test_the_gpu_measurements_are_the_recorded_gpu_checks():
    """GPU_MEASURED is the rate step of the GPU check kept in the guide (docs/recorded-run/gpu-check.json)."""
    recorded = json.loads((Path(__file__).resolve().parents[2] / "docs" / "recorded-run" / "gpu-check.json")
                          .read_text())
    rate = recorded["results"]["rate"]
    assert pair_work.GPU_MEASURED["seconds"] == {int(n): rate[n]["cuda_seconds"] for n in ("872", "3000")}
    assert pair_work.GPU_MEASURED["device"] in recorded["device"]
    assert [rate[n]["rows"] for n in ("872", "3000")] == [872, 3000]
