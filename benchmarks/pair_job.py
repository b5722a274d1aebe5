"""Benchmark: one pair job's compute (rule compare_pair) at the issue's size, measure by measure.

Two correlated synthetic models, 13 layers x 10,000 rows x 768 (float32 as stored, float64 on the device,
converted once as the job does), every measure of a config's `measures:` (config/config.yaml: linear and
unbiased CKA, SVCCA, PWCCA, neuronsim, mutual k-NN) plus procrustes and RBF CKA, each with its permutation
null and half-sample interval as configured, through the pair job's own per-measure function
(reprsim.stages.compare.pairs._measure_rows) under its memory budget (similarity.max_memory_gb).

    python benchmarks/pair_job.py --device cuda                     # the issue's size, on a GPU: measured
    python benchmarks/pair_job.py --threads 1 --rows 1600 --layers 2 --out cpu.json   # a fraction, extrapolated

Per measure it prints seconds and peak memory beyond the stacks (CPU: the process's resident peak,
VmHWM reset per measure, blurred by freed memory unless --exact-rss; CUDA: torch.cuda.max_memory_allocated). A run smaller than
the target (--target-rows/--target-layers, default the issue's) takes the target's routes (the decisions
that depend on n² memory: CKA's Gram limit, the budget counted in n×n matrices) and is extrapolated with a
per-measure cost model: counts of GEMM flops (n·d² per layer and per layer pair, n²·d per Gram built), n×d,
d×d and k×k SVDs, QRs, medians and top-k over n² elements, and elementwise traffic (n·d per layer, n² per
Gram), each priced by timing that primitive on this device at the run's and the target's size; the model is
then scaled by measured / modelled at the run's size (the calibration printed in --out). The last column
prices the target's counts at a GPU's documented FP64 rates and assumed latencies (GPU below): an
assumption, not a measurement. Keep half the rows above the width (--rows > 2 x --width), or linear CKA's
replicates take their Gram form where the target takes its feature form.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import resource
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
import yaml

from reprsim.io.device import describe, resolve_device
from reprsim.io.store import constant_layers
from reprsim.metrics import cka as cka_module
from reprsim.metrics import memory
from reprsim.resampling import half_samples
from reprsim.stages.compare.pairs import _measure_rows, on_device

REPO = Path(__file__).resolve().parents[1]
EXTRA = {"procrustes": {"measure": "procrustes", "null_permutations": 20, "resamples": 20},  # config.yaml's comments
         "rbf_cka": {"measure": "cka", "params": {"kernel": "rbf", "estimator": "biased", "threshold": 1.0}}}
# Assumed GPU (H100 SXM, documented peaks; not measured here): FP64 tensor-core GEMM 67 TFLOP/s (we assume 50
# sustained), FP64 vector 34 TFLOP/s, HBM3 3.35 TB/s (we assume 2.5 sustained). Latency-bound calls: assumed.
GPU = {"gemm_flops": 50e12, "stream_bytes": 2.5e12, "median_keys": 3e9, "svd_thin": 0.05, "svd_small": 1e-3,
       "svdvals": 0.02, "qr": 2e-3, "call": 1e-4}


# ------------------------------------------------------------------------------------------ data
def synthetic(layers: int, rows: int, width: int, seed: int) -> np.ndarray:
    """(layers, rows, width) float32: a latent shared by both models (64 directions with a decaying spectrum,
    as real activations have) seen through each layer's own map, plus noise that grows with depth."""
    shared = np.random.default_rng(0).standard_normal((rows, 64), dtype=np.float32) * np.geomspace(4, 0.2, 64,
                                                                                                 dtype=np.float32)
    rng = np.random.default_rng(seed)
    return np.stack([shared @ rng.standard_normal((64, width), dtype=np.float32) / 8
                     + (0.5 + layer / layers) * rng.standard_normal((rows, width), dtype=np.float32)
                     for layer in range(layers)])


# ---------------------------------------------------------------------------------- cost model
def cost_counts(spec: dict, L: int, n: int, d: int, P: int, R: int, budget_grams: float) -> Counter:
    """Counts of the primitives one measure's values, null (P draws) and interval (R half-samples) take for
    L x L layer pairs of n rows and width d, on the routes taken at the target size (feature forms and
    recomputed draws for CKA beyond its Gram limit; Gram tiles within `budget_grams` n×n matrices)."""
    name, params = spec["measure"], spec.get("params", {})
    A, Q, m = 2 * L, L * L, n // 2
    c = Counter()

    def feature(rows):  # X_lᵀ [Y_1 … Y_L] per X layer and every layer's XᵀX: n·d² per layer pair and per layer
        c["gemm_flops"] += 2 * (Q + A) * rows * d * d
        c["stream"] += 6 * A * rows * d + 2 * Q * d * d
        c["call"] += L

    def gram_form(rows, kernel):
        with memory.budget(budget_grams * 8 * rows * rows / memory.GIB):
            builds = cka_module.gram_plan(L, L, rows, kernel)["builds"]
        c["gemm_flops"] += 2 * builds * rows * rows * d  # X Xᵀ: n²·d per Gram built
        c["stream"] += builds * rows * rows * (12 if kernel == "rbf" else 4) + 2 * Q * rows * rows
        if kernel == "rbf":
            c["median"] += A * rows * rows / 2  # one median of n²/2 pairs per layer and evaluation
            c["stream"] += A * rows * rows * 2
        c["call"] += builds + L

    def built_once(rows, kernel):  # every layer's Gram built once (the gram-permutation and gram-rows routes)
        c["gemm_flops"] += 2 * A * rows * rows * d
        c["stream"] += A * rows * rows * (12 if kernel == "rbf" else 4)
        c["median"] += A * rows * rows / 2 if kernel == "rbf" else 0

    if name == "cka":
        kernel = params.get("kernel", "linear")

        def value(rows):  # the form cka_layers picks at this size (the Gram limit as at the target)
            shape = (L, rows, d)
            if kernel == "linear" and cka_module._feature_form_is_cheaper(shape, shape):
                feature(rows)
            else:
                gram_form(rows, kernel)

        value(n)
        if cka_module.grams_fit((L, n, d), (L, n, d)):  # gram-permutation null, gram-rows replicates
            built_once(n, kernel)
            c["stream"] += P * (3 * L * n * n + Q * n * n)
            built_once(n, kernel)
            c["stream"] += R * (A * 2 * (m * n + m * m) + A * 4 * m * m + Q * m * m)
            c["call"] += P + R
        else:  # recomputed on permuted rows and on half-samples
            for rows, times in ((n, P), (m, R)):
                for _ in range(times):
                    value(rows)
            c["stream"] += P * L * n * d + R * A * m * d
    elif name in ("neuronsim", "procrustes"):  # recomputed: value and null draws at n rows, replicates at n/2
        for rows, times in ((n, 1 + P), (m, R)):
            c["gemm_flops"] += times * 2 * Q * rows * d * d
            c["stream"] += times * (7 * A * rows * d + 3 * Q * d * d)
            c["svdvals"] += times * Q if name == "procrustes" else 0
            c["call"] += times * L
        c["stream"] += P * L * n * d + R * A * m * d  # the permuted and half-sampled copies
    elif name in ("cca", "svcca", "pwcca"):
        k = params.get("pca_dims") or d
        c["svd_thin"] += 3 * A  # each side prepared for the values, the null and the interval
        c["gemm_flops"] += 3 * A * 2 * k * n * d
        c["stream"] += 3 * A * 3 * n * d + P * L * (n * d + n * k) + R * A * (m * k + 3 * m * d)
        c["qr"] += R * A
        c["gemm_flops"] += R * A * 2 * k * m * d
        pair_evaluations = Q * (1 + P + R)
        c["gemm_flops"] += Q * (1 + P) * 2 * n * k * k + Q * R * 2 * m * k * k  # Qxᵀ Qy
        c["svd_small"] += pair_evaluations
        if name == "pwcca":
            c["gemm_flops"] += pair_evaluations * 4 * k * k * d
        c["call"] += pair_evaluations * 10
    elif name == "mutual_knn":
        k = params.get("k", 10)
        c["gemm_flops"] += 3 * A * 2 * n * n * d  # each layer's cosine similarities: value, null, interval
        c["topk"] += 2 * A * n * n + R * A * m * m
        c["stream"] += 3 * A * 3 * n * d + R * A * (m * n + m * m)
        c["compare"] += Q * k * k * (n * (1 + P) + m * R)
        c["call"] += A * (3 + R) + L * (1 + P + R)
    else:
        raise ValueError(f"no cost model for measure {name!r}")
    return c


def time_call(function, repeats: int = 3) -> float:
    """The fastest of `repeats` timed calls after one untimed (a shared machine's other work only slows calls)."""
    function()
    best = math.inf
    for _ in range(repeats):
        sync()
        started = time.perf_counter()
        function()
        sync()
        best = min(best, time.perf_counter() - started)
    return best


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def unit_costs(device, rows: int, d: int, k_cca: int) -> dict:
    """Seconds per unit of each primitive on `device` at `rows` rows (rates: per flop, element, key)."""
    options = {"dtype": torch.float64, "device": device}
    a, b = torch.randn(d, rows, **options), torch.randn(rows, 2 * d, **options)
    stream = torch.randn(rows * d * 4, **options)
    square = torch.randn(rows, rows, **options)
    m = rows // 2
    thin, small, wide = torch.randn(rows, d, **options), torch.randn(k_cca, k_cca, **options), torch.randn(d, d, **options)
    tall = torch.randn(m, k_cca, **options)
    lists = torch.randint(0, rows, (rows, 10), device=device)
    return {
        "gemm_flops": time_call(lambda: a @ b) / (2 * d * rows * 2 * d),
        "stream": time_call(lambda: stream.mul_(1.0000001)) / stream.numel(),
        "topk": time_call(lambda: square.topk(10, dim=-1), 2) / square.numel(),
        "median": time_call(lambda: cka_module._median(square.flatten()[: rows * rows // 2]), 2) / (rows * rows / 2),
        "compare": time_call(lambda: (lists[:, :, None] == lists[:, None, :]).sum()) / (rows * 100),
        "svd_thin": time_call(lambda: torch.linalg.svd(thin, full_matrices=False), 2),
        "svd_small": time_call(lambda: torch.linalg.svd(small, full_matrices=False), 20),
        "svdvals": time_call(lambda: torch.linalg.svdvals(wide), 3),
        "qr": time_call(lambda: torch.linalg.qr(tall), 10),
        "call": 2e-5,  # Python per call (assumed): each pair's small tensors, dicts, a float()
    }


def seconds(counts: Counter, units: dict) -> dict:
    """Seconds per primitive: counts priced by `units` timed at the same rows (a median: of n²/2 keys)."""
    return {key: count * units[key] for key, count in counts.items()}


# peak memory beyond the stacks, as a·S + b·G (S: both float64 stacks, G: one n×n float64 matrix), from the code:
# the feature forms' centred copies and the permuted copy of Y; the CCA family's centred sides and bases and
# the null's permuted copies; k-NN's one layer's similarities and a subset's; RBF CKA's Gram tiles (gram_plan)
PEAK_MODEL = {"cka": (2.5, 0.0), "neuronsim": (2.0, 0.0), "procrustes": (1.5, 0.0), "cca": (3.0, 0.0),
              "svcca": (3.0, 0.0), "pwcca": (3.0, 0.0), "mutual_knn": (0.25, 2.0)}


def peak_model_bytes(spec: dict, L: int, n: int, d: int, budget_grams: float) -> float:
    a, b = PEAK_MODEL[spec["measure"]]
    params = spec.get("params", {})
    if spec["measure"] == "cka" and (params.get("kernel") == "rbf" or n <= d):
        with memory.budget(budget_grams * 8 * n * n / memory.GIB):
            a, b = 0.5, cka_module.gram_plan(L, L, n, params.get("kernel", "linear"))["peak_grams"]
    return a * 2 * 8 * L * n * d + b * 8 * n * n


def gpu_seconds(counts: Counter) -> dict:
    """Assumed GPU time (GPU constants above) of the same counts."""
    return {"gemm_flops": counts["gemm_flops"] / GPU["gemm_flops"],
            "stream": 16 * (counts["stream"] + counts["topk"] + counts["compare"] / 8) / GPU["stream_bytes"],
            "median": counts["median"] / GPU["median_keys"],
            **{key: counts[key] * GPU[key] for key in ("svd_thin", "svd_small", "svdvals", "qr", "call")}}


# -------------------------------------------------------------------------------------- memory
def exact_resident_memory() -> None:
    """glibc: every allocation of 64 KiB or more its own mapping, returned when freed, so that the resident
    size follows the live tensors (by default freed memory may stay resident and blur per-measure peaks)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 65536)  # M_MMAP_THRESHOLD (fixed: no dynamic raising)
        libc.mallopt(-1, 0)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def resident_mib() -> float:
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS")) / 1024


def reset_peak(device):
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device) / 2**20
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident size
    except OSError:
        pass
    return resident_mib()


def peak_mib(device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    with open("/proc/self/status") as handle:
        hwm = [int(line.split()[1]) for line in handle if line.startswith("VmHWM")]
    return hwm[0] / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "auto", "cuda"])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--layers", type=int, default=13)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--target-rows", type=int, default=10_000)
    parser.add_argument("--target-layers", type=int, default=13)
    parser.add_argument("--measures", help="comma-separated labels (default: all)")
    parser.add_argument("--config", default=str(REPO / "config" / "config.yaml"),
                        help="measures, chance and intervals from this config (plus procrustes and rbf_cka)")
    parser.add_argument("--max-memory-gb", type=float, default=memory.DEFAULT_GB,
                        help="similarity.max_memory_gb at the target size (scaled by (rows/target)² for a fraction)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default torch's)")
    parser.add_argument("--exact-rss", action="store_true",
                        help="CPU: return freed memory at once, so resident peaks are the tensors' (slower: timings "
                             "grow ~30%%; without it peaks may be blurred by memory freed earlier)")
    parser.add_argument("--out", help="write every number as JSON")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    if device.type == "cpu" and args.exact_rss:
        exact_resident_memory()
    config = yaml.safe_load(Path(args.config).read_text())
    measures = {**config["measures"], **{k: v for k, v in EXTRA.items() if k not in config["measures"]}}
    if args.measures:
        measures = {label: measures[label] for label in args.measures.split(",")}
    similarity = config.get("similarity", {})
    chance = {"permutations": 100, "seed": 0, **similarity.get("chance", {})}
    intervals = {"resamples": 100, "confidence": 0.95, "seed": 0, **similarity.get("intervals", {})}
    n, L, d, N, LT = args.rows, args.layers, args.width, args.target_rows, args.target_layers

    # the target's routes at the run's size: CKA's Gram limit as decided at the target, the budget in n×n matrices
    target_fits = cka_module.grams_fit((LT, N, d), (LT, N, d))
    if not target_fits:
        cka_module.GRAM_BYTES_LIMIT = 0
        if n // 2 <= d:
            print(f"warning: at {n} rows (half-samples of {n // 2}) ≤ 2 x width {d}, linear CKA takes its Gram "
                  "form, not the target's feature form: use more rows for a faithful extrapolation")
    budget_grams = args.max_memory_gb * memory.GIB / (8 * N * N)
    run_budget_gb = budget_grams * 8 * n * n / memory.GIB

    print(f"torch {torch.__version__}, {describe(device)}, {torch.get_num_threads()} CPU threads; float64")
    print(f"run: {L} x {L} layers, {n} rows, width {d}; target: {LT} x {LT} layers, {N} rows; budget "
          f"{args.max_memory_gb:g} GiB at the target = {budget_grams:.1f} n×n matrices ({run_budget_gb:.3g} GiB here)")
    started = time.perf_counter()
    Xs_stored, Ys_stored = synthetic(L, n, d, 1), synthetic(L, n, d, 2)
    constant_x, constant_y = constant_layers(Xs_stored), constant_layers(Ys_stored)
    Xs, Ys = on_device(Xs_stored, device), on_device(Ys_stored, device)
    del Xs_stored, Ys_stored
    stacks_mib = (Xs.numel() + Ys.numel()) * 8 / 2**20
    print(f"data: {time.perf_counter() - started:.1f} s; float64 stacks {stacks_mib:.0f} MiB on {device}")
    most = max([int(intervals["resamples"])] + [int(s.get("resamples") or 0) for s in measures.values()])
    statistics = {"chance": chance, "intervals": intervals, "indices": half_samples(n, most, int(intervals["seed"]))}

    started = time.perf_counter()
    k_cca = max([s.get("params", {}).get("pca_dims") or 64 for s in measures.values()
                 if s["measure"] in ("cca", "svcca", "pwcca")] or [64])
    units_run = unit_costs(device, n, d, k_cca)
    units_target = units_run if N == n else unit_costs(device, N, d, k_cca)
    print(f"primitive timings: {time.perf_counter() - started:.1f} s; GEMM {1 / units_run['gemm_flops'] / 1e9:.1f} "
          f"GFLOP/s, stream {8 / units_run['stream'] / 1e9:.1f} GB/s (float64, {device})\n")

    # one-time costs (thread pools, lazy initialisation) on a sliver of the data, so the first measure is not charged
    with memory.budget(run_budget_gb):
        for label, spec in measures.items():
            sliver = {"chance": {**chance, "permutations": 2}, "intervals": {**intervals, "resamples": 2},
                      "indices": half_samples(min(n, 200), 2, 0)}
            _measure_rows(label, {**spec, "null_permutations": 2, "resamples": 2}, Xs[:1, :200], Ys[:1, :200],
                          constant_x[:1], constant_y[:1], sliver, [], "float32")

    header = (f"{'measure':<13} {'P':>3} {'R':>3} {'seconds':>8} {'model s':>8} {'peak MiB':>9} {'model MiB':>9} "
              f"{'target s':>9} {'target GiB':>10} {'GPU s (assumed)':>15}")
    print(header)
    results, totals = {}, Counter()
    with memory.budget(run_budget_gb):
        for label, spec in measures.items():
            P = int(spec.get("null_permutations") or chance["permutations"])
            R = int(spec.get("resamples") or intervals["resamples"])
            baseline = reset_peak(device)
            sync()
            began = time.perf_counter()
            _measure_rows(label, spec, Xs, Ys, constant_x, constant_y, statistics, [], "float32")
            sync()
            measured = time.perf_counter() - began
            extra = max(0.0, peak_mib(device) - baseline)
            model_run = seconds(cost_counts(spec, L, n, d, P, R, budget_grams), units_run)
            counts_target = cost_counts(spec, LT, N, d, P, R, budget_grams)
            model_target = seconds(counts_target, units_target)
            peak_run, peak_target = (peak_model_bytes(spec, layers, rows, d, budget_grams) / 2**20
                                     for layers, rows in ((L, n), (LT, N)))
            extra_target = peak_target  # the model at the target; `extra` against `peak_run` checks it here
            calibration = measured / max(sum(model_run.values()), 1e-12)
            target = calibration * sum(model_target.values())
            on_gpu = gpu_seconds(counts_target)
            results[label] = {"measure": spec["measure"], "params": spec.get("params", {}), "P": P, "R": R,
                              "seconds": measured, "peak_mib_beyond_stacks": extra, "model_seconds": model_run,
                              "peak_model_mib": peak_run, "target_peak_mib": extra_target,
                              "calibration": calibration, "target_seconds": target,
                              "target_model_seconds": model_target, "target_counts": dict(counts_target),
                              "target_gpu_seconds_assumed": on_gpu}
            totals.update({"seconds": measured, "target": target, "gpu": sum(on_gpu.values())})
            print(f"{label:<13} {P:>3} {R:>3} {measured:>8.1f} {sum(model_run.values()):>8.1f} {extra:>9.0f} "
                  f"{peak_run:>9.0f} {target:>9.0f} {extra_target / 1024:>10.1f} {sum(on_gpu.values()):>15.1f}",
                  flush=True)
    print(f"{'total':<21} {totals['seconds']:>8.1f} {'':>8} {'':>9} {'':>9} {totals['target']:>9.0f} {'':>10} "
          f"{totals['gpu']:>15.1f}")
    print("seconds, peak MiB: measured here (peak: resident or GPU memory beyond the stacks); model: the cost and "
          "memory models at this size; target s: model at the target x measured/model; target GiB: the memory model "
          "at the target (peak MiB against model MiB checks it here); GPU s: the target's counts at the assumed GPU "
          "rates (not measured)")
    print(f"\npeak resident memory of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"target on this device: {totals['target'] / 3600:.2f} h per pair job (measured at {L}x{L} layers, {n} "
          f"rows; extrapolated with the cost model); assumed GPU: {totals['gpu']:.0f} s of compute per pair job")
    print(f"a study of J pair jobs (MultiBERTs: J = 325 per dataset and representation) on G GPUs: about "
          f"ceil(J / G) x ({totals['gpu']:.0f} s + start-up) on the assumed GPU; ceil(J / G) x "
          f"{totals['target'] / 3600:.2f} h on G of this device")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": describe(device), "threads": torch.get_num_threads(),
                                              "run": {"layers": L, "rows": n, "width": d},
                                              "target": {"layers": LT, "rows": N, "width": d},
                                              "max_memory_gb": args.max_memory_gb, "chance": chance,
                                              "intervals": intervals, "units_run": units_run,
                                              "units_target": units_target, "gpu_assumed": GPU,
                                              "measures": results, "totals": dict(totals)}, indent=2, default=float))


if __name__ == "__main__":
    main()
