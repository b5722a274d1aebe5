"""Benchmark: seconds for value + permutation null + half-sample interval of every registered measure.

    python benchmarks/measure_costs.py                  # CPU, one thread; writes src/reprsim/metrics/measure_costs.json
    python benchmarks/measure_costs.py --device cuda    # on a GPU (prints only; --write to keep it)
    python benchmarks/measure_costs.py --only rsa gulp  # some measures

1. This machine's floor in the same run (benchmarks/pair_floor.py): float64 matmul rate on one thread, memory
   bandwidth; the table quotes seconds, and the rates say what machine they came from.
2. The default's shape: two synthetic models of 7 layers × 384 units on 872 rows (pair_floor's generator: a shared
   latent through each layer's own map plus noise), every measure at its registry defaults (k = 10, ...) through
   the pair job's own function (reprsim.metrics.pair_engine.measure_rows, in-memory sides: from scratch), with
   the default's 30 permutations and 30 half-samples. A measure whose one evaluation makes the full run longer than
   --budget seconds runs 2 + 2 draws and is extrapolated linearly in draws (marked "extrapolated").
3. The MultiBERTs study's shape (n = 10,000 words, d = 768, 13 × 13 layers, 50 + 50 draws): extrapolated from the
   measured seconds by the registry's work model of each measure (Measure.work: its O() terms), with the n × n
   memory the measure needs per layer (where that is more than a pair job's 8 GiB budget, the study would need the
   measure's blocked form or fewer words).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from pair_floor import machine_floor, synthetic  # noqa: E402

from reprsim import measure_registry as registry  # noqa: E402
from reprsim.inference.resampling import half_samples  # noqa: E402
from reprsim.metrics import prepared  # noqa: E402
from reprsim.metrics.pair_engine import measure_rows  # noqa: E402

DEFAULT = {"n": 872, "d": 384, "layers": 7, "permutations": 30, "resamples": 30}
MULTIBERTS = {"n": 10000, "d": 768, "layers": 13, "permutations": 50, "resamples": 50}
# small-sample settings the registry's defaults need at this shape
PARAMS = {"cka_minibatch": {"batch_size": 218}, "cca": {"pca_dims": 64}, "svcca": {"pca_dims": 64},
          "pwcca": {"pca_dims": 64}, "mixedsim": {"pca_dims": 64}}


def time_measure(name: str, Xs, Ys, permutations: int, resamples: int) -> float:
    params = {**registry.MEASURES[name].params, **PARAMS.get(name, {})}
    spec = {"measure": name, "params": params, "null_permutations": permutations, "resamples": resamples}
    statistics = {"chance": {"permutations": permutations, "seed": 0},
                  "intervals": {"resamples": resamples, "confidence": 0.95, "seed": 0},
                  "indices": half_samples(Xs.shape[1], resamples, 0)}
    index = torch.as_tensor(statistics["indices"], device=Xs.device)
    statistics["sides"] = (prepared.Sides(Xs, index), prepared.Sides(Ys, index))
    constant = np.zeros(len(Xs), dtype=bool)
    started = time.perf_counter()
    measure_rows(name, spec, Xs, Ys, constant, constant, statistics, [])
    if Xs.device.type == "cuda":
        torch.cuda.synchronize(Xs.device)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--budget", type=float, default=40.0, help="seconds a measure may take at full draws")
    parser.add_argument("--write", action="store_true", help="write the JSON also for a GPU run")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(1)
    floor = machine_floor(device)
    print(f"floor on {device}: float64 matmul {floor['flops'] / 1e9:.1f} GFLOP/s, memory {floor['bandwidth'] / 1e9:.1f} GB/s")
    shape = DEFAULT
    Xs, Ys = (torch.as_tensor(synthetic(shape["layers"], shape["n"], shape["d"], seed)).to(device).double()
              for seed in (1, 2))
    names = args.only or list(registry.MEASURES)
    results = {}
    print(f"{'measure':26s} {'1 eval s':>9s} {'default s':>10s} {'how':>12s} {'MultiBERTs h':>13s} {'n×n GiB/layer':>14s}")
    for name in names:
        spec = registry.MEASURES[name]
        one = time_measure(name, Xs, Ys, 1, 1) / 3  # value + 1 + 1 draws: a rough per-evaluation time
        draws = shape["permutations"] + shape["resamples"]
        if one * (1 + draws) <= args.budget:
            seconds, how = time_measure(name, Xs, Ys, shape["permutations"], shape["resamples"]), "measured"
        else:
            small = time_measure(name, Xs, Ys, 2, 2)
            seconds, how = small / 5 * (1 + draws), "extrapolated"
        scale = (spec.work(MULTIBERTS["n"], MULTIBERTS["d"], MULTIBERTS["layers"], MULTIBERTS["layers"])
                 / spec.work(shape["n"], shape["d"], shape["layers"], shape["layers"]))
        scale *= (1 + MULTIBERTS["permutations"] + MULTIBERTS["resamples"]) / (1 + draws)
        study = seconds * scale / 3600
        memory = MULTIBERTS["n"] ** 2 * 8 / 2**30 if spec.n_by_n else 0.0
        results[name] = {"default_seconds": round(seconds, 2), "evaluation_seconds": round(one, 3), "how": how,
                         "multiberts_hours_per_pair": round(study, 2), "multiberts_nxn_gib_per_layer": round(memory, 2)}
        print(f"{name:26s} {one:9.3f} {seconds:10.1f} {how:>12s} {study:13.2f} {memory:14.2f}", flush=True)
    record = {"machine": f"{platform.processor() or platform.machine()}, {device}, one thread, "
                         f"{floor['flops'] / 1e9:.0f} GFLOP/s float64, {floor['bandwidth'] / 1e9:.1f} GB/s",
              "shape": shape, "multiberts_shape": MULTIBERTS, "measures": results}
    if device.type == "cpu" or args.write:
        if args.only:  # keep the other measures' figures and the machine they came from; these name their own
            old, here = registry.measured_costs(), record["machine"]
            record["machine"] = old.get("machine", here)
            record["measures"] = {**old.get("measures", {}),
                                  **{name: {**entry, "machine": here} for name, entry in results.items()}}
        registry.COSTS_FILE.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {registry.COSTS_FILE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
