"""Benchmark: a pair job's measures on the CPU and on CUDA side by side, and the GPU figures `reprsim plan` prices with.

    python benchmarks/pair_devices.py                      # a CUDA machine: 872 and 3,000 rows, default measures
    python benchmarks/pair_devices.py --out devices.json   # and the numbers as JSON
    python benchmarks/pair_devices.py --dry                # tiny sizes, the CUDA columns run on the CPU (tested)
    python benchmarks/pair_devices.py --count              # decompositions and host synchronisations per measure

Per row count: two synthetic models (benchmarks/pair_floor.py's) at the shape of the default's pair of MiniLM and a
random 4-layer BERT (7 layers of 384 and 5 of 256, as the H100 figures in reprsim.workflow.pair_work; --layers,
--width: one value for both models or one each) and config/config.yaml's measures with their draws. Both models'
terms are prepared on the device and handed to the pair job as a terms store does (Grams too large to store are left
out and rebuilt by the pair); then each measure runs through the pair job's own function
(reprsim.metrics.pair_engine.measure_rows):

- CPU: one thread, as the workflow's pair jobs run;
- CUDA: after a warm-up at the first row count (CUDA context, cuBLAS/cuSOLVER handles, kernels: reported apart,
  a pair job pays it once), with the small decompositions on the host (reprsim.metrics.cca.SMALL_ON_HOST,
  the default) and, in a second column, on the GPU;
- each measure's largest |CUDA - CPU| over its values, null means and interval ends, and on a GPU the calls that
  waited for it (torch.cuda.set_sync_debug_mode), at the first row count;
- `reprsim plan`'s estimates for the measure: one core, and on a GPU (reprsim.workflow.pair_work).

Last, the GPU constants fitted to the CUDA seconds at the row counts (pair_work.fit_gpu) beside those in the code
(pair_work.GPU_DRAW_SECONDS, GPU_SPEEDUP, GPU_MEASURED): paste them there, with this run's device and date, when a
GPU run replaces the recorded one. A second table times each family's terms (rule model_terms) on both devices.

--count: one pair job at the default's shape (872 rows) on the CPU, counting per measure the calls of torch.linalg's
decompositions (and the matrices in their batches), the calls that wait for a GPU when their tensor is on one
(.item, .tolist, .cpu, .numpy, bool/float/int of a tensor, nonzero, boolean-mask indexing), and the tensors made
from Python values on the host (a transfer each on a GPU). On a CPU every .cpu() counts, although most are no-ops.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pair_floor import measures_of, synthetic  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
COMPARED = ("value", "null_mean", "ci_low", "ci_high")


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def small_decompositions(on_host: bool):
    """reprsim.metrics.cca.SMALL_ON_HOST set for the block."""
    from reprsim.metrics import cca

    previous, cca.SMALL_ON_HOST = cca.SMALL_ON_HOST, on_host
    try:
        yield
    finally:
        cca.SMALL_ON_HOST = previous


def stored_terms(stack: torch.Tensor, key: str, indices: torch.Tensor) -> dict:
    """One model's terms of family `key`, as a pair job reads them from its terms store (reprsim.stages.compare.terms):
    prepared, without the centred Grams when they are too large to store."""
    from reprsim.metrics import prepared
    from reprsim.workflow.pair_work import GRAM_STORE_BYTES

    side = prepared.prepare(stack, key, indices, {})
    if prepared.kind_of(key) == "gram" and stack.shape[0] * stack.shape[1] ** 2 * 8 > GRAM_STORE_BYTES:
        side.pop("kc")
    return side


def run_pair(config: dict, stacks: tuple[np.ndarray, np.ndarray], device: torch.device) -> dict:
    """Terms seconds per family, the pair job's seconds per measure (Grams rebuilt from the stacks charged to the
    first measure of their family) and its rows, on `device`."""
    from reprsim.inference.resampling import half_samples
    from reprsim.metrics import prepared
    from reprsim.metrics.pair_engine import measure_rows

    measures = measures_of(config, "default")
    rows = stacks[0].shape[1]
    Xs, Ys = (torch.as_tensor(stack).to(device).double() for stack in stacks)
    most = max(spec["resamples"] for spec in measures.values())
    statistics = {"chance": config["similarity"]["chance"], "intervals": config["similarity"]["intervals"],
                  "indices": half_samples(rows, most, 0)}
    index = torch.as_tensor(statistics["indices"], device=device)
    families = sorted({prepared.family(s["measure"], s["params"]) for s in measures.values()} - {None})
    terms, given = {}, ({}, {})
    for key in families:
        _synchronise(device)
        started = time.perf_counter()
        for stack, store in zip((Xs, Ys), given):
            store[key] = stored_terms(stack, key, index)
        _synchronise(device)
        terms[key] = (time.perf_counter() - started) / 2  # one model's
    started = time.perf_counter()
    statistics["sides"] = (prepared.Sides(Xs, index, given[0]), prepared.Sides(Ys, index, given[1]))
    _synchronise(device)
    loading = time.perf_counter() - started
    constant_x, constant_y = np.zeros(len(stacks[0]), dtype=bool), np.zeros(len(stacks[1]), dtype=bool)
    seconds, tables = {}, {}
    for label, spec in measures.items():
        started = time.perf_counter()
        tables[label] = measure_rows(label, spec, Xs, Ys, constant_x, constant_y, statistics, [])
        _synchronise(device)
        seconds[label] = time.perf_counter() - started + loading
        loading = 0.0
    return {"terms": terms, "seconds": seconds, "tables": tables}


def cuda_waits(config: dict, stacks: tuple[np.ndarray, np.ndarray], device: torch.device) -> dict[str, int]:
    """Per measure of one pair job on a GPU, the calls torch's sync debug mode reports as waiting for it."""
    import warnings

    import reprsim.metrics.pair_engine as pairs

    original, counts = pairs.measure_rows, {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def counted(label, *args, **kwargs):
            before = len(caught)
            try:
                return original(label, *args, **kwargs)
            finally:
                counts[label] = len(caught) - before

        pairs.measure_rows = counted
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with small_decompositions(True):
                run_pair(config, stacks, device)
        finally:
            torch.cuda.set_sync_debug_mode(0)
            pairs.measure_rows = original
    return counts


def largest_difference(a: list[dict], b: list[dict]) -> float:
    worst = 0.0
    for x, y in zip(a, b):
        for column in COMPARED:
            if not (math.isnan(x[column]) and math.isnan(y[column])):
                worst = max(worst, abs(x[column] - y[column]) if not math.isnan(x[column] - y[column]) else math.inf)
    return worst


def planned(config: dict, layers: tuple[int, int], widths: tuple[int, int], rows: int) -> dict:
    """`reprsim plan`'s seconds per measure (one core, GPU) and of one model's terms (the first's), at this shape."""
    from reprsim.workflow import pair_work

    measures = measures_of(config, "default")
    shape = (layers[0], widths[0], layers[1], widths[1], rows)
    most = max(spec["resamples"] for spec in measures.values())
    return {"cpu": pair_work.measure_seconds(measures, *shape),
            "gpu": pair_work.measure_seconds(measures, *shape, gpu=True),
            "draw_pairs": pair_work.draw_pairs(measures, *layers),
            "terms_cpu": pair_work.terms_seconds(measures, layers[0], widths[0], rows, most),
            "terms_gpu": pair_work.terms_seconds(measures, layers[0], widths[0], rows, most, gpu=True)}


def models(layers: tuple[int, int], widths: tuple[int, int], rows: int) -> tuple[np.ndarray, np.ndarray]:
    return synthetic(layers[0], rows, widths[0], 1), synthetic(layers[1], rows, widths[1], 2)


def run(config: dict, rows_list: list[int], layers: tuple[int, int], widths: tuple[int, int], cuda: torch.device,
        log=print) -> dict:
    """Every row count on the CPU and on `cuda` (the CPU itself with --dry); the results as one dict. The CPU runs
    one thread; the caller's thread count is restored after."""
    from reprsim.workflow import pair_work

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(config, rows_list, layers, widths, cuda, log, pair_work)
    finally:
        torch.set_num_threads(threads)


def _run(config, rows_list, layers, widths, cuda, log, pair_work) -> dict:
    cpu = torch.device("cpu")
    results = {"device": str(cuda), "layers": list(layers), "widths": list(widths), "rows": {}}
    warm = models(layers, widths, rows_list[0])
    started = time.perf_counter()
    for on_host in (True, False):  # each placement's kernels and solver handles
        with small_decompositions(on_host):
            run_pair(config, warm, cuda)
    results["warm_up_seconds"] = time.perf_counter() - started
    log(f"warm-up on {cuda} ({rows_list[0]} rows, every measure twice): {results['warm_up_seconds']:.1f} s")
    for rows in rows_list:
        stacks = models(layers, widths, rows)
        on_cpu = run_pair(config, stacks, cpu)
        with small_decompositions(True):
            on_host = run_pair(config, stacks, cuda)
        with small_decompositions(False):
            on_device = run_pair(config, stacks, cuda)
        plan = planned(config, layers, widths, rows)
        results["rows"][rows] = {
            "measures": {label: {"cpu": on_cpu["seconds"][label], "cuda": on_host["seconds"][label],
                                 "cuda_device_linalg": on_device["seconds"][label],
                                 "max_abs_difference": largest_difference(on_cpu["tables"][label],
                                                                          on_host["tables"][label]),
                                 "plan_cpu": plan["cpu"][label], "plan_gpu": plan["gpu"][label]}
                         for label in on_cpu["seconds"]},
            "terms": {key: {"cpu": on_cpu["terms"][key], "cuda": on_host["terms"][key],
                            "cuda_device_linalg": on_device["terms"][key]} for key in on_cpu["terms"]},
            "plan_terms_cpu": plan["terms_cpu"], "plan_terms_gpu": plan["terms_gpu"],
            "draw_pairs": plan["draw_pairs"]}
        log(f"{rows} rows: CPU {sum(on_cpu['seconds'].values()):.2f} s, CUDA {sum(on_host['seconds'].values()):.2f} s "
            f"(decompositions on the GPU: {sum(on_device['seconds'].values()):.2f} s)")
    if cuda.type == "cuda":
        results["cuda_waits"] = cuda_waits(config, models(layers, widths, rows_list[0]), cuda)
    points = [(entry["draw_pairs"], sum(m["plan_cpu"] for m in entry["measures"].values()),
               sum(m["cuda"] for m in entry["measures"].values())) for entry in results["rows"].values()]
    fitted = pair_work.fit_gpu(points)
    results["fitted"] = None if fitted is None else {"GPU_DRAW_SECONDS": fitted[0], "GPU_SPEEDUP": fitted[1]}
    measured = pair_work.GPU_MEASURED
    results["in_code"] = {"GPU_DRAW_SECONDS": pair_work.GPU_DRAW_SECONDS, "GPU_SPEEDUP": pair_work.GPU_SPEEDUP,
                          "GPU_MEASURED": {**measured, "seconds": {str(k): v for k, v in measured["seconds"].items()}}}
    return results


def report(results: dict) -> None:
    (Lx, Ly), (dx, dy) = results["layers"], results["widths"]
    print(f"\npair job, {Lx} layers of {dx} x {Ly} of {dy}; CUDA = {results['device']} (warm-up "
          f"{results['warm_up_seconds']:.1f} s, apart); seconds:")
    print(f"{'rows':>6}  {'measure':<14}{'CPU':>8}{'CUDA':>8}{'CUDA*':>8}{'|diff|':>10}{'plan CPU':>10}"
          f"{'plan GPU':>10}")
    for rows, entry in results["rows"].items():
        total = collections.Counter()
        for label, m in entry["measures"].items():
            print(f"{rows:>6}  {label:<14}{m['cpu']:>8.2f}{m['cuda']:>8.2f}{m['cuda_device_linalg']:>8.2f}"
                  f"{m['max_abs_difference']:>10.1e}{m['plan_cpu']:>10.2f}{m['plan_gpu']:>10.2f}")
            total.update({k: m[k] for k in ("cpu", "cuda", "cuda_device_linalg", "plan_cpu", "plan_gpu")})
        print(f"{rows:>6}  {'all':<14}{total['cpu']:>8.2f}{total['cuda']:>8.2f}{total['cuda_device_linalg']:>8.2f}"
              f"{'':>10}{total['plan_cpu']:>10.2f}{total['plan_gpu']:>10.2f}")
    print("  CUDA*: the small decompositions on the GPU (reprsim.metrics.cca.SMALL_ON_HOST False)")
    if results.get("cuda_waits"):
        print("  calls waiting for the GPU (torch's sync debug mode), per measure at the first row count: "
              + ", ".join(f"{label} {count}" for label, count in results["cuda_waits"].items()))
    print(f"\none model's terms (rule model_terms; the plan's for the first model), seconds:\n"
          f"{'rows':>6}  {'family':<26}{'CPU':>8}{'CUDA':>8}{'CUDA*':>8}")
    for rows, entry in results["rows"].items():
        for key, t in entry["terms"].items():
            print(f"{rows:>6}  {key:<26}{t['cpu']:>8.2f}{t['cuda']:>8.2f}{t['cuda_device_linalg']:>8.2f}")
        print(f"{rows:>6}  {'all (plan: CPU, GPU)':<26}{entry['plan_terms_cpu']:>8.2f}{entry['plan_terms_gpu']:>8.2f}")
    code = results["in_code"]
    print(f"\nreprsim.workflow.pair_work: GPU_DRAW_SECONDS = {code['GPU_DRAW_SECONDS']:.3g}, GPU_SPEEDUP = "
          f"{code['GPU_SPEEDUP']:.3g} (fitted to {code['GPU_MEASURED']['device']}, {code['GPU_MEASURED']['date']})")
    fitted = results["fitted"]
    print("fitted to this run: " + ("not determined (the seconds do not grow with the rows)" if fitted is None else
                                     f"GPU_DRAW_SECONDS = {fitted['GPU_DRAW_SECONDS']:.3g}, "
                                     f"GPU_SPEEDUP = {fitted['GPU_SPEEDUP']:.3g}"))


# ----------------------------------------------------------------- --count
DECOMPOSITIONS = ("svd", "svdvals", "eigh", "eigvalsh", "qr", "cholesky", "solve", "lstsq", "inv", "pinv")
WAITS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "nonzero")


@contextlib.contextmanager
def counting(counts: collections.Counter, label: list):
    """Counts, per label[0], torch.linalg's decompositions (calls and matrices), calls that wait for a GPU, and
    tensors made on the host from Python values; the wrapped functions restored after."""
    saved = []

    def wrap(owner, name, kind):
        original = getattr(owner, name)
        saved.append((owner, name, original))

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            counts[(label[0], kind, name)] += 1
            if kind == "decomposition" and args and isinstance(args[0], torch.Tensor):
                counts[(label[0], "matrices", name)] += math.prod(args[0].shape[:-2])
            return original(*args, **kwargs)

        setattr(owner, name, wrapper)

    for name in DECOMPOSITIONS:
        wrap(torch.linalg, name, "decomposition")
    for name in WAITS:
        wrap(torch.Tensor, name, "wait")
    wrap(torch, "nonzero", "wait")
    for name in ("tensor", "as_tensor"):
        wrap(torch, name, "host tensor")
    original_getitem = torch.Tensor.__getitem__
    saved.append((torch.Tensor, "__getitem__", original_getitem))

    def getitem(self, index):
        parts = index if isinstance(index, tuple) else (index,)
        if any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
            counts[(label[0], "wait", "boolean mask")] += 1
        return original_getitem(self, index)

    torch.Tensor.__getitem__ = getitem
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


def count(config: dict, layers: tuple[int, int], widths: tuple[int, int], rows: int) -> dict:
    """Per measure of one pair job (terms given, as in the workflow): decompositions, waits, host tensors."""
    from reprsim.metrics import cca
    import reprsim.metrics.pair_engine as pairs

    torch.set_num_threads(1)
    counts, label = collections.Counter(), [None]
    original = pairs.measure_rows

    def labelled(name, *args, **kwargs):
        label[0] = name
        try:
            return original(name, *args, **kwargs)
        finally:
            label[0] = None

    stacks = models(layers, widths, rows)
    pairs.measure_rows = labelled
    chunk_bytes = getattr(cca, "CPU_CHUNK_BYTES", None)  # (a checkout from before the draws were batched has none)
    cca.CPU_CHUNK_BYTES = 1 << 62  # the draws in the chunks a GPU takes
    try:
        with counting(counts, label):
            run_pair(config, stacks, torch.device("cpu"))
    finally:
        pairs.measure_rows = original
        if chunk_bytes is not None:
            cca.CPU_CHUNK_BYTES = chunk_bytes
    table = collections.defaultdict(collections.Counter)
    for (measure, kind, name), value in counts.items():
        if measure is not None:
            table[measure][kind if kind != "matrices" else "matrices"] += value
            table[measure][f"{kind}: {name}"] += value
    return {measure: dict(values) for measure, values in table.items()}


def report_count(counted: dict, layers: tuple[int, int], rows: int) -> None:
    print(f"one pair job, {layers[0]} x {layers[1]} layers, {rows} rows, on the CPU (draws chunked as on a GPU): "
          "calls per measure")
    print(f"{'measure':<14}{'decompositions':>16}{'matrices':>10}{'waits':>8}{'host tensors':>14}")
    for measure, c in counted.items():
        print(f"{measure:<14}{c.get('decomposition', 0):>16}{c.get('matrices', 0):>10}{c.get('wait', 0):>8}"
              f"{c.get('host tensor', 0):>14}")
        detail = ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if ": " in k)
        print(f"{'':<14}  {detail}")


def both(values: list[int]) -> tuple[int, int]:
    """The two models' values from one value (both) or two (one each)."""
    return values[0], values[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=REPO / "config/config.yaml")
    parser.add_argument("--rows", type=int, nargs="+", default=None,
                        help="row counts (default 872 3000; --dry 120 240)")
    parser.add_argument("--layers", type=int, nargs="+", default=None,
                        help="layers of the two models, or one count for both (default 7 5; --dry 3 2)")
    parser.add_argument("--width", type=int, nargs="+", default=None,
                        help="their widths (default 384 256; --dry 16 8)")
    parser.add_argument("--dry", action="store_true", help="tiny sizes, the CUDA columns on the CPU")
    parser.add_argument("--count", action="store_true", help="count decompositions and waits per measure (CPU)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    config = yaml.safe_load(args.config.read_text())
    layers = both(args.layers or ([3, 2] if args.dry else [7, 5]))
    widths = both(args.width or ([16, 8] if args.dry else [384, 256]))
    if args.count:
        rows = (args.rows or [120 if args.dry else 872])[0]
        counted = count(config, layers, widths, rows)
        report_count(counted, layers, rows)
        if args.out:
            args.out.write_text(json.dumps(counted, indent=2) + "\n")
        return
    if not args.dry and not torch.cuda.is_available():
        sys.exit("pair_devices: torch sees no CUDA device (--dry runs the same code on the CPU)")
    results = run(config, args.rows or ([120, 240] if args.dry else [872, 3000]), layers, widths,
                  torch.device("cpu" if args.dry else "cuda"))
    report(results)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
