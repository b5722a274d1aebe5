"""Benchmark: every measure of a config against this machine's floor, in one run.

    python benchmarks/pair_floor.py                        # config/config.yaml's measures, default and word shapes
    python benchmarks/pair_floor.py --out floor.json       # and the numbers as JSON
    python benchmarks/pair_floor.py --extra                # also RBF CKA and Procrustes (the plan's rates for them)
    python benchmarks/pair_floor.py --device cuda --layers 13 --width 768 --rows 2000 7680   # paper scale, a GPU
    PYTHONPATH=OLD/src python benchmarks/pair_floor.py --legacy   # a checkout without per-model terms: "before"

1. The floor's rates, measured here: float64 matrix products on one thread (the fastest of torch.mm at 2,048³ and
   at the pair jobs' shapes, best of 5 each) and memory bandwidth (a 256 MiB copy, read + write, best of 5).
2. Per shape, two synthetic models (a latent shared through each layer's own map, with a decaying spectrum, plus
   noise growing with depth; float32 as stored): "default" is the default run's MiniLM pair (7 layers of 384,
   872 rows, each measure with its configured draws) and "word" its word level (1,921 rows, similarity.word's
   draws). Each measure runs through the pair job's own function (reprsim.metrics.pair_engine.measure_rows)
   with both models' terms prepared first (rule model_terms' function), timed apart.
3. Per measure, the FLOPs and bytes its routes must do (reprsim.workflow.pair_work, the counts `reprsim plan`
   prices with), the floor Σ max(FLOPs / rate, bytes / bandwidth), the achieved time and their ratio: for the
   pair job given both models' terms, and from scratch (terms of both models + pair job), which is what a pair
   job cost before terms were shared (--legacy times that code, whose every pair job did all of it).

The two CKA estimators share their products, so they are one row ("linear + unbiased CKA").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path

import numpy as np
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]


def _pair_work():
    """reprsim.workflow.pair_work from this checkout (standard library only), also under --legacy's PYTHONPATH."""
    spec = importlib.util.spec_from_file_location("pair_work", REPO / "src/reprsim/workflow/pair_work.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def best_of(function, repeats: int = 5) -> float:
    function()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def machine_floor(device: torch.device) -> dict[str, float]:
    """The fastest float64 product rate among a square and the pair jobs' shapes (a floor must be a lower bound:
    the best rate this device reaches), and the streaming copy rate."""
    flops = 0.0
    for m, k, n in ((2048, 2048, 2048), (384, 872, 2688), (448, 872, 448)):
        a, b = (torch.randn(*shape, dtype=torch.float64, device=device) for shape in ((m, k), (k, n)))
        out = torch.empty(m, n, dtype=torch.float64, device=device)
        flops = max(flops, 2 * m * k * n / best_of(lambda: _synchronised(device, torch.mm, a, b, out=out)))
    source = torch.randn(1 << 25, dtype=torch.float64, device=device)  # 256 MiB
    target = torch.empty_like(source)
    bandwidth = 2 * source.numel() * 8 / best_of(lambda: _synchronised(device, target.copy_, source))
    return {"flops": flops, "bandwidth": bandwidth}


def _synchronised(device: torch.device, function, *args, **kwargs):
    result = function(*args, **kwargs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return result


def synthetic(layers: int, rows: int, width: int, seed: int) -> np.ndarray:
    shared = np.random.default_rng(0).standard_normal((rows, 64)) * np.geomspace(4, 0.2, 64)
    rng = np.random.default_rng(seed)
    return np.stack([shared @ rng.standard_normal((64, width)) / 8
                     + (0.5 + layer / layers) * rng.standard_normal((rows, width))
                     for layer in range(layers)]).astype(np.float32)


# measures the default leaves out (config/config.yaml's comments): timed too with --extra, so that `reprsim plan`
# prices them from measurements (RBF CKA's Gram family, Procrustes recomputed per draw)
EXTRA = {"rbf_cka": {"measure": "cka", "params": {"kernel": "rbf", "estimator": "biased", "threshold": 1.0}},
         "procrustes": {"measure": "procrustes", "null_permutations": 20, "resamples": 20}}


def measures_of(config: dict, shape: str, extra: bool = False) -> dict[str, dict]:
    chance, intervals = config["similarity"]["chance"], config["similarity"]["intervals"]
    word = config["similarity"]["word"]
    measures = {}
    for label, spec in {**config["measures"], **(EXTRA if extra else {})}.items():
        P = spec.get("null_permutations") or chance["permutations"]
        R = spec.get("resamples") or intervals["resamples"]
        if shape == "word":
            P, R = word["permutations"] or P, word["resamples"] or R
        measures[label] = {**spec, "params": spec.get("params") or {}, "null_permutations": P, "resamples": R}
    return measures


def run_shape(shape: str, config: dict, layers: int, width: int, rows: int, legacy: bool, floor: dict,
              extra: bool = False, device: torch.device = torch.device("cpu")) -> list[dict]:
    from reprsim.inference.resampling import half_samples
    from reprsim.metrics._inputs import constant_layers
    from reprsim.metrics.pair_engine import measure_rows

    work = _pair_work()
    torch.set_num_threads(1)
    Xs, Ys = (torch.as_tensor(synthetic(layers, rows, width, seed)).to(device).double() for seed in (1, 2))
    measures = measures_of(config, shape, extra)
    most = max(spec["resamples"] for spec in measures.values())
    statistics = {"chance": config["similarity"]["chance"], "intervals": config["similarity"]["intervals"],
                  "indices": half_samples(rows, most, 0)}
    constant = np.zeros(layers, dtype=bool)
    assert not constant_layers(Xs.cpu().numpy()).any()
    terms_time, loading = {}, {}
    if not legacy:
        from reprsim.metrics import prepared
        from reprsim.workflow.pair_work import GRAM_STORE_BYTES

        index = torch.as_tensor(statistics["indices"], device=device)
        given = ({}, {})
        for key in sorted({prepared.family(s["measure"], s["params"]) for s in measures.values()} - {None}):
            # from scratch, each family on its own (the CCA family's share one SVD per layer in the rule
            # model_terms; here each pays for it)
            started = time.perf_counter()
            for stack, store in zip((Xs, Ys), given):
                store[key] = prepared.Sides(stack, index)[key]
            _synchronised(device, lambda: None)
            terms_time[key] = time.perf_counter() - started
            for store in given:  # as the terms store holds them: Grams too large to store are rebuilt by the pair
                if prepared.kind_of(key) == "gram" and layers * rows * rows * 8 > GRAM_STORE_BYTES:
                    store[key] = {name: value for name, value in store[key].items() if name != "kc"}
        # the pair job's sides from the stored terms: where it rebuilds Grams, that is pair work, timed and charged to
        # the first measure of the family
        statistics["sides"] = (prepared.Sides(Xs, index), prepared.Sides(Ys, index))
        for key in given[0]:
            started = time.perf_counter()
            for sides, stack, store in zip(statistics["sides"], (Xs, Ys), given):
                sides.prepared[key] = prepared.Sides(stack, index, {key: store[key]}).prepared[key]
            _synchronised(device, lambda: None)
            loading[key] = time.perf_counter() - started
    results = []
    for label, spec in measures.items():
        started = time.perf_counter()
        measure_rows(label, spec, Xs, Ys, constant, constant, statistics, [])
        _synchronised(device, lambda: None)
        elapsed = time.perf_counter() - started
        if not legacy:
            elapsed += loading.pop(prepared.family(spec["measure"], spec["params"]), 0.0)
        P, R = spec["null_permutations"], spec["resamples"]
        pair = work.pair_work(spec, layers, width, layers, width, rows, P, R)
        terms = work.terms_work(spec, layers, width, rows, most)
        row = {"shape": shape, "label": label, "measure": spec["measure"], "n": rows, "P": P, "R": R,
               "pair_flops": sum(f for _, f, _ in pair), "pair_bytes": sum(b for _, _, b in pair),
               "pair_floor": work.floor_seconds(pair, floor["flops"], floor["bandwidth"]),
               "terms_floor": 2 * work.floor_seconds(terms, floor["flops"], floor["bandwidth"]),
               "pair_seconds": elapsed}
        if not legacy:
            row["terms_seconds"] = terms_time.get(prepared.family(spec["measure"], spec["params"]), 0.0)
        results.append(row)
        print(f"  {shape}: {label} {elapsed:.2f} s", flush=True)
    return _joined_cka(results)


def _joined_cka(results: list[dict]) -> list[dict]:
    """The CKA labels of one kernel computed in one job share their products: one row for them."""
    cka = [r for r in results if r["measure"] == "cka" and r["label"] != "rbf_cka"]
    if len(cka) < 2:
        return results
    first = dict(cka[0])
    first["label"] = " + ".join(r["label"] for r in cka)
    first["pair_seconds"] = sum(r["pair_seconds"] for r in cka)
    return [first, *(r for r in results if r not in cka)]


def report(rows: list[dict], floor: dict, legacy: bool) -> None:
    print(f"\nfloor: float64 matmul {floor['flops'] / 1e9:.1f} GFLOP/s (one thread), "
          f"memory {floor['bandwidth'] / 1e9:.1f} GB/s (copy, read + write)")
    if legacy:
        print(f"\n{'shape':<8}{'measure':<28}{'P':>4}{'R':>4}{'floor s':>9}{'achieved s':>11}{'ratio':>7}"
              "   (from scratch: both models' terms and the pair)")
        for r in rows:
            total = r["pair_floor"] + r["terms_floor"]
            print(f"{r['shape']:<8}{r['label']:<28}{r['P']:>4}{r['R']:>4}{total:>9.2f}{r['pair_seconds']:>11.2f}"
                  f"{r['pair_seconds'] / total:>7.1f}")
        return
    print(f"\n{'shape':<8}{'measure':<28}{'P':>4}{'R':>4}{'GFLOP':>8}{'GB':>7}{'floor s':>9}{'pair s':>8}"
          f"{'ratio':>7}{'scratch floor':>15}{'scratch s':>11}{'ratio':>7}")
    for r in rows:
        scratch, scratch_floor = r["pair_seconds"] + r["terms_seconds"], r["pair_floor"] + r["terms_floor"]
        print(f"{r['shape']:<8}{r['label']:<28}{r['P']:>4}{r['R']:>4}{r['pair_flops'] / 1e9:>8.1f}"
              f"{r['pair_bytes'] / 1e9:>7.2f}{r['pair_floor']:>9.2f}{r['pair_seconds']:>8.2f}"
              f"{r['pair_seconds'] / r['pair_floor']:>7.1f}{scratch_floor:>15.2f}{scratch:>11.2f}"
              f"{scratch / scratch_floor:>7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=REPO / "config/config.yaml")
    parser.add_argument("--shapes", nargs="+", default=["default", "word"], choices=["default", "word"])
    parser.add_argument("--layers", type=int, default=7)
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--rows", type=int, nargs=2, default=[872, 1921], metavar=("DEFAULT", "WORD"))
    parser.add_argument("--legacy", action="store_true", help="time a checkout without per-model terms")
    parser.add_argument("--extra", action="store_true", help="also RBF CKA and Procrustes (not in the default)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (the floor's rates are measured there)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    config = yaml.safe_load(args.config.read_text())
    torch.set_num_threads(1)
    device = torch.device(args.device)
    floor = machine_floor(device)
    rows = []
    for shape in args.shapes:
        n = args.rows[0] if shape == "default" else args.rows[1]
        rows += run_shape(shape, config, args.layers, args.width, n, args.legacy, floor, args.extra, device)
    report(rows, floor, args.legacy)
    if args.out:
        args.out.write_text(json.dumps({"floor": floor, "legacy": args.legacy, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
