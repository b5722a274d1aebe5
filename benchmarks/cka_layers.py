"""Benchmark: all-layer-pairs linear CKA, batched vs a per-pair loop, against this machine's matmul rate.

Two 13-layer models, d = 768, n = 4,000 and 10,000 rows (random activations: speed
does not depend on the values). Run:  python benchmarks/cka_layers.py [--n 4000 10000]
Prints one table; the guide quotes it (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import time

import torch

from reprsim.metrics.cka import cka, cka_layers

LAYERS, WIDTH = 13, 768


def matmul_rate(n: int, repeats: int = 3) -> float:
    """GFLOP/s of a float64 (d × n) @ (n × d) product on this machine: the ceiling for CKA's main work."""
    a = torch.randn(WIDTH, n, dtype=torch.float64)
    b = torch.randn(n, WIDTH, dtype=torch.float64)
    a @ b  # warm-up
    started = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return repeats * 2 * n * WIDTH**2 / (time.perf_counter() - started) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[4000, 10000])
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float64")
    header = f"{'n':>6} {'batched s':>10} {'loop s':>8} {'speed-up':>8} {'batched GFLOP/s':>16} {'matmul GFLOP/s':>15} {'max |diff|':>10}"
    print(header)
    for n in args.n:
        generator = torch.Generator().manual_seed(n)
        Xs = torch.randn(LAYERS, n, WIDTH, generator=generator, dtype=torch.float64)
        Ys = torch.randn(LAYERS, n, WIDTH, generator=generator, dtype=torch.float64)
        rate = matmul_rate(n)
        started = time.perf_counter()
        batched, meta = cka_layers(Xs, Ys)
        batched_seconds = time.perf_counter() - started
        started = time.perf_counter()
        loop = torch.tensor([[cka(X, Y) for Y in Ys] for X in Xs], dtype=torch.float64)
        loop_seconds = time.perf_counter() - started
        # useful work of the batched form: L1·L2 cross products plus L1 + L2 self products, 2·n·d² each
        flops = (LAYERS * LAYERS + 2 * LAYERS) * 2 * n * WIDTH**2
        print(f"{n:>6} {batched_seconds:>10.1f} {loop_seconds:>8.1f} {loop_seconds / batched_seconds:>7.1f}x "
              f"{flops / batched_seconds / 1e9:>16.1f} {rate:>15.1f} {float((batched - loop).abs().max()):>10.1e}")
        assert meta["form"] == "feature"


if __name__ == "__main__":
    main()
