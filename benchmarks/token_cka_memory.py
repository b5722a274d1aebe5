"""Benchmark: token-level minibatch CKA for all layer pairs of two 13-layer models over 100,000
tokens × 768 dims, streamed from Zarr; reports wall time and the process's peak memory.

Run:  python benchmarks/token_cka_memory.py [--tokens 100000] [--workdir /tmp/reprsim-bench]
The two stores (random float16 activations, about 2 GB each) are written first.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import time
from pathlib import Path

import numpy as np
import zarr

from reprsim.stages.compare.tokens import token_minibatch_cka

LAYERS, WIDTH, BLOCK = 13, 768, 4096


def write_store(path: Path, n_tokens: int, seed: int) -> None:
    """A store with only what token CKA reads: tokens/hidden and tokens/input_ids."""
    shutil.rmtree(path, ignore_errors=True)
    root = zarr.open_group(path, mode="w")
    hidden = root.create_array("tokens/hidden", shape=(LAYERS, n_tokens, WIDTH), chunks=(1, BLOCK, WIDTH),
                               dtype="float16")
    root.create_array("tokens/input_ids", shape=(n_tokens,), chunks=(n_tokens,), dtype="int64")[:] = np.arange(n_tokens)
    rng = np.random.default_rng(seed)
    shared = np.random.default_rng(0)  # a common component, so the layers are related across models
    for start in range(0, n_tokens, BLOCK):
        rows = min(BLOCK, n_tokens - start)
        common = shared.standard_normal((1, rows, WIDTH), dtype=np.float32)
        hidden[:, start:start + rows] = (common + rng.standard_normal((LAYERS, rows, WIDTH), dtype=np.float32)
                                         ).astype(np.float16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--workdir", default="/tmp/reprsim-bench")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    write_store(workdir / "a.zarr", args.tokens, 1)
    write_store(workdir / "b.zarr", args.tokens, 2)
    print(f"wrote two stores of {args.tokens} tokens x {WIDTH} x {LAYERS} layers in {time.perf_counter() - started:.0f} s")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    values, meta = token_minibatch_cka(workdir / "a.zarr", workdir / "b.zarr", batch_size=args.batch_size)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"token minibatch CKA, {LAYERS}x{LAYERS} layer pairs, {meta['n_batches']} batches of {args.batch_size}: "
          f"{seconds:.0f} s; peak RSS {peak:.0f} MiB (before the comparison: {before:.0f} MiB)")
    print(f"mean CKA over layer pairs {values.mean():.3f}, diagonal {np.diag(values).mean():.3f}")
    shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
