"""How often reprsim's 95 % intervals cover the truth (issue 51): simulated data sets whose population value is
known, each measure's estimate and half-sample replicates computed by the library (reprsim.metrics, as a pair job
does), the interval made by reprsim.inference.resampling (and by the percentile method it replaced, for comparison), and the
share of data sets whose interval holds the truth, with its Monte Carlo standard error.

Data: a latent Z ~ N(0, I_k) seen by two "models", X = Z A + σ E and Y = Z B + σ E' (A, B fixed per setting,
E, E' fresh noise). Truths: linear CKA's population value in closed form (‖Σ_xy‖² / (‖Σ_xx‖ ‖Σ_yy‖)); PWCCA's
from one data set of 100,000 rows (its estimate there is within 1e-3 of the limit); mutual k-NN with a fixed k has
no population value apart from n (k of n neighbours), so its truth is E θ̂_n, the mean estimate over the data sets.
PWCCA's replicates keep the principal directions of all rows (the pair jobs' route); recomputing them on each
half-sample is shown beside. u (reprsim.stages.universality.shares.share, rows only): five models seeing Z, two
reference seeds, a variant and a floor, linear or unbiased CKA between them; its truth from the population CKAs;
and the two pooled as one sense's measures are (the mean u, reprsim.stages.universality.shares.pooled).
Each interval is also moved by the half-samples' own bias estimate (reprsim.inference.resampling.bias), to show whether that
reaches the population value.

    python benchmarks/interval_coverage.py --datasets 500 --out coverage.json
    python benchmarks/record_run.py RUN --other-kernel OTHER --coverage coverage.json --write   # into the guide
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reprsim.inference.resampling import half_samples, interval, scale
from reprsim.metrics import compute, replicate_layers


POOLED = "u (pooled: linear and unbiased CKA)"


def percentile_interval(estimate, replicates, n, m, confidence=0.95):
    """The method reprsim used before issue 51: the replicates' percentiles around their median, moved to θ̂."""
    centred = (np.asarray(replicates) - np.nanmedian(replicates, axis=0)) * scale(n, m)
    lower, upper = np.nanquantile(centred, [(1 - confidence) / 2, (1 + confidence) / 2], axis=0)
    return estimate + lower, estimate + upper


def population_cka(A: np.ndarray, B: np.ndarray, noise: float) -> float:
    xx = A.T @ A + noise**2 * np.eye(A.shape[1])
    yy = B.T @ B + noise**2 * np.eye(B.shape[1])
    return float(np.linalg.norm(A.T @ B) ** 2 / (np.linalg.norm(xx) * np.linalg.norm(yy)))


def view(rng, Z, A, noise):
    return Z @ A + noise * rng.normal(size=(Z.shape[0], A.shape[1]))


MEASURES = {  # label -> (registry name, params; PWCCA keeps the default's share of principal directions, 64/384)
    "linear_cka": ("cka", {"kernel": "linear", "estimator": "biased"}),
    "unbiased_cka": ("cka", {"kernel": "linear", "estimator": "unbiased"}),
    "pwcca": ("pwcca", {"direction": "min"}),
    "mutual_knn": ("mutual_knn", {"k": 10}),
}


def setting(n: int, d: int, k: int, seed: int):
    rng = np.random.default_rng(seed)
    mixing = {name: rng.normal(size=(k, d)) / np.sqrt(k) for name in ("x", "y", "r1", "r2", "v", "f")}
    mixing["r2"] = mixing["r1"] + 0.6 * rng.normal(size=(k, d)) / np.sqrt(k)   # seed siblings: close
    mixing["v"] = mixing["r1"] + 1.2 * rng.normal(size=(k, d)) / np.sqrt(k)    # the variant: further
    return rng, mixing


def run(n: int, d: int, datasets: int, resamples: int, seed: int) -> pd.DataFrame:
    from reprsim.stages.universality.shares import Terms, pooled, share

    k, noise = max(4, d // 4), 1.0
    rng, mix = setting(n, d, k, seed)
    params = {label: dict(p, **({"pca_dims": max(2, d // 6)} if name == "pwcca" else {}))
              for label, (name, p) in MEASURES.items()}
    truths = {"linear_cka": population_cka(mix["x"], mix["y"], noise)}
    truths["unbiased_cka"] = truths["linear_cka"]
    big = rng.normal(size=(100_000, k))
    truths["pwcca"] = compute("pwcca", view(rng, big, mix["x"], noise), view(rng, big, mix["y"], noise),
                              **params["pwcca"]).value
    truths["pwcca, PCA of each half-sample"] = truths["pwcca"]
    pop = {pair: population_cka(mix[pair[0]], mix[pair[1]], noise)
           for pair in [("r1", "r2"), ("v", "r1"), ("v", "r2"), ("f", "r1"), ("f", "r2")]}
    s, v, f = pop[("r1", "r2")], (pop[("v", "r1")] + pop[("v", "r2")]) / 2, (pop[("f", "r1")] + pop[("f", "r2")]) / 2
    truths["u (linear_cka)"] = truths["u (unbiased_cka)"] = (v - f) / (s - f)
    truths[POOLED] = truths["u (linear_cka)"]  # the mean of two equal truths
    rows = []
    for t in range(datasets):
        Z = rng.normal(size=(n, k))
        X, Y = view(rng, Z, mix["x"], noise), view(rng, Z, mix["y"], noise)
        indices = half_samples(n, resamples, seed=t)
        m = indices.shape[1]
        for label, (name, p) in MEASURES.items():
            estimate = compute(name, X, Y, **params[label]).value
            draws = replicate_layers(name, X[None], Y[None], indices, **params[label])[0][:, 0, 0]
            rows.append({"dataset": t, "measure": label, "estimate": estimate, "draws": draws, "m": m})
            if name == "pwcca":  # its replicates keep the principal directions of all rows; recomputed, for contrast
                recomputed = np.array([compute(name, X[i], Y[i], **params[label]).value for i in indices])
                rows.append({"dataset": t, "measure": "pwcca, PCA of each half-sample", "estimate": estimate,
                             "draws": recomputed, "m": m})
        views = {name: view(rng, Z, mix[name], noise) for name in ("r1", "r2", "v", "f")}
        both = []
        for label in ("linear_cka", "unbiased_cka"):
            terms = {}
            for a, b in pop:
                value = compute("cka", views[a], views[b], **params[label]).value
                draws = replicate_layers("cka", views[a][None], views[b][None], indices, **params[label])[0][:, 0, 0]
                terms[(a, b)] = (np.array([value]), draws[:, None])
            mean = lambda *pairs: (np.mean([terms[p][0] for p in pairs], axis=0),  # noqa: E731
                                   np.mean([terms[p][1] for p in pairs], axis=0))
            row = share(mean(("v", "r1"), ("v", "r2")), mean(("r1", "r2")), mean(("f", "r1"), ("f", "r2")),
                        np.array([0]), n, m, 0.95, 0.1)
            rows.append({"dataset": t, "measure": f"u ({label})", "estimate": row["u"], "low": row["ci_low"],
                         "high": row["ci_high"], "m": m})
            both.append(Terms(mean(("v", "r1"), ("v", "r2")), mean(("r1", "r2")), mean(("f", "r1"), ("f", "r2")), []))
        # one sense's measures pooled (reprsim.stages.universality.shares.pooled): the mean u, Fieller's interval
        together = pooled(both, np.array([0]))
        row = share(together.variant, together.seeds, together.floor, np.array([0]), n, m, 0.95, 0.1)
        rows.append({"dataset": t, "measure": POOLED, "estimate": row["u"], "low": row["ci_low"],
                     "high": row["ci_high"], "m": m})
    frame = pd.DataFrame(rows)
    out = []
    for label, group in frame.groupby("measure", sort=False):
        truth_kinds = {"population": truths[label]} if label in truths else {}
        truth_kinds["E θ̂_n"] = float(group["estimate"].mean())
        if label == "mutual_knn":
            truth_kinds.pop("population", None)
        methods = []
        if "draws" in group and group["draws"].notna().all():
            for name, make in (("t (reprsim)", lambda e, r: interval(e, r, n, m)),
                               ("t, bias-corrected", lambda e, r: interval(e, r, n, m, bias_corrected=True)),
                               ("percentile (before)", lambda e, r: percentile_interval(e, r, n, m))):
                bounds = np.array([make(e, r) for e, r in zip(group["estimate"], group["draws"])])
                methods.append((name, bounds[:, 0], bounds[:, 1]))
        else:
            methods.append(("Fieller (reprsim)", group["low"].to_numpy(), group["high"].to_numpy()))
        for method, low, high in methods:
            for kind, truth in truth_kinds.items():
                hit = (low <= truth) & (truth <= high)
                p = float(np.mean(hit))
                out.append({"measure": label, "n": n, "d": d, "n_over_d": round(n / d, 2), "resamples": resamples,
                            "datasets": len(low), "interval": method, "truth": kind, "truth_value": truth,
                            "mean_estimate": float(group["estimate"].mean()),
                            "sd_estimate": float(group["estimate"].std()),
                            "coverage": p, "mc_error": float(np.sqrt(p * (1 - p) / len(low))),
                            "mean_half_width": float(np.nanmean(high - low) / 2)})
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=500)
    parser.add_argument("--resamples", type=int, default=30, help="replicates per interval (the default's 30)")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--ratios", type=float, nargs="+", default=[872 / 384, 6.0],
                        help="n/d settings: the default run's 872 rows / 384 dimensions, and one above 5")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tables = []
    for ratio in args.ratios:
        started = time.perf_counter()
        d = int(round(args.rows / ratio))
        tables.append(run(args.rows, d, args.datasets, args.resamples, args.seed))
        print(f"n = {args.rows}, d = {d}: {time.perf_counter() - started:.0f} s", flush=True)
    table = pd.concat(tables, ignore_index=True)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.drop(columns=["truth_value", "datasets", "resamples"]).to_string(index=False,
                                                                                     float_format="%.3f"))
    if args.out:  # JSON, for benchmarks/record_run.py --coverage
        results = json.loads(table.to_json(orient="records"))
        Path(args.out).write_text(json.dumps({
            "datasets": args.datasets, "rows": args.rows, "resamples": args.resamples,
            "ratios": sorted({r["n_over_d"] for r in results}), "seed": args.seed, "results": results},
            indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
