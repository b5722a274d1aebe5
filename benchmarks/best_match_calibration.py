"""Is the best-match p calibrated? (issue 53; reprsim.inference.best_match)

Simulated pairs of independent random layer stacks (no correspondence between X and Y: every null hypothesis
holds): each stack a random walk over layers (layer l = layer l−1 + noise, so a stack's layers are correlated as
a network's are). For one layer of X (the last), reprsim.compare picks the best layer of Y and gives two p-values:
the selection-corrected one (the null of the maximum over Y's layers, `selection_p`) and the chosen cell's own
(`null_p`, which ignores the choice). A calibrated p is ≤ 0.05 in 5 % of the pairs; the uncorrected one is not.

    python benchmarks/best_match_calibration.py --pairs 2000 --measure cka

prints the share of pairs with p ≤ 0.05 for both, each with its 95 % Clopper–Pearson interval, and writes them
as JSON with --out.

    python benchmarks/best_match_calibration.py --coverage 400

checks the other half of the correction instead: the interval of the layer chosen on half the rows, measured on the
other half, where the choice is clear (Y's layer l a noisy linear map of X's layer l). Its truth is the estimate's
expectation at the estimation half's rows, taken as the mean split value over the data sets (as
benchmarks/interval_coverage.py does for mutual k-NN); it prints how often the chosen layer is X's own and each
layer's coverage.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from scipy.stats import beta

import reprsim


def random_walk_stack(rng: np.random.Generator, layers: int, n: int, d: int, step: float = 0.7) -> np.ndarray:
    stack = [rng.normal(size=(n, d))]
    for _ in range(layers - 1):
        stack.append(stack[-1] + step * rng.normal(size=(n, d)))
    return np.stack(stack)


def clopper_pearson(hits: int, total: int, confidence: float = 0.95) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    low = 0.0 if hits == 0 else float(beta.ppf(tail, hits, total - hits + 1))
    high = 1.0 if hits == total else float(beta.ppf(1 - tail, hits + 1, total - hits))
    return low, high


def calibration(pairs: int, measure: str = "cka", layers: int = 6, n: int = 40, d: int = 10,
                permutations: int = 99, seed: int = 0, progress: bool = False) -> dict:
    """Shares of pairs with p ≤ 0.05, selection-corrected and not, over `pairs` independent stack pairs."""
    rng = np.random.default_rng(seed)
    corrected, uncorrected = [], []
    started = time.perf_counter()
    for k in range(pairs):
        X, Y = random_walk_stack(rng, layers, n, d), random_walk_stack(rng, layers, n, d)
        table = reprsim.compare(X, Y, measure, permutations=permutations, resamples=2, seed=k)
        chosen = table[table.is_best & (table.layer_a == layers - 1)].iloc[0]
        corrected.append(chosen["selection_p"])
        uncorrected.append(chosen["null_p"])
        if progress and (k + 1) % max(1, pairs // 10) == 0:
            print(f"{k + 1}/{pairs} pairs, {time.perf_counter() - started:.0f} s", flush=True)
    out = {"pairs": pairs, "measure": measure, "layers": layers, "n": n, "d": d, "permutations": permutations,
           "seed": seed, "seconds": round(time.perf_counter() - started, 1)}
    for name, ps in (("corrected", corrected), ("uncorrected", uncorrected)):
        hits = int((np.asarray(ps) <= 0.05).sum())
        out[name] = {"share": hits / pairs, "interval": clopper_pearson(hits, pairs)}
    return out


def split_coverage(datasets: int, layers: int = 3, n: int = 200, d: int = 8, resamples: int = 30,
                   seed: int = 5) -> dict:
    """How often the split interval (chosen on one half, estimated on the other) holds its truth, per layer."""
    rng = np.random.default_rng(seed)
    maps = [rng.normal(size=(d, d)) for _ in range(layers)]
    found = []
    for k in range(datasets):
        X = rng.normal(size=(layers, n, d))
        Y = np.stack([X[l] @ maps[l] + 2.0 * rng.normal(size=(n, d)) for l in range(layers)])
        table = reprsim.compare(X, Y, "cka", permutations=5, resamples=resamples, seed=k)
        chosen = table[table.split_best].sort_values("layer_a")
        found.append(chosen[["layer_b", "split_value", "split_low", "split_high"]].to_numpy())
    found = np.array(found)  # (datasets, layers, 4)
    truth = found[:, :, 1].mean(axis=0)
    covered = (found[:, :, 2] <= truth) & (truth <= found[:, :, 3])
    return {"datasets": datasets, "n": n, "resamples": resamples,
            "own_layer_chosen": float((found[:, :, 0] == np.arange(layers)).mean()),
            "truth": truth.round(4).tolist(), "coverage": covered.mean(axis=0).round(3).tolist(),
            "monte_carlo_se": round(float(np.sqrt(0.95 * 0.05 / datasets)), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--measure", default="cka")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--permutations", type=int, default=99)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--coverage", type=int, metavar="DATASETS",
                        help="instead: the split interval's coverage over this many data sets")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.coverage:
        result = split_coverage(args.coverage)
        print(json.dumps(result))
        if args.out:
            with open(args.out, "w") as handle:
                json.dump(result, handle, indent=1)
        return
    result = calibration(args.pairs, args.measure, args.layers, permutations=args.permutations, seed=args.seed,
                         progress=True)
    for name in ("corrected", "uncorrected"):
        low, high = result[name]["interval"]
        print(f"{name:>11}: share of p ≤ 0.05 = {result[name]['share']:.3f} [{low:.3f}, {high:.3f}] over "
              f"{result['pairs']} pairs ({result['measure']}, best of {result['layers']} layers, n = {result['n']}, "
              f"{result['permutations']} permutations)")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main()
