"""GPU check: what the guide (docs/benchmarks.md) leaves open about a CUDA device, measured in one run (≤ 8 minutes on one H100).

A GPU is often at hand for minutes; this is the one prepared thing to run then. Each step is timed and
independent (one that fails is reported and the next runs); the most important run first, and the last
(INN recovery) gets what is left of --minutes.

  pair      MiniLM vs a random 4-layer BERT (the default config's pair: SST-2 sample, test split, 872 rows,
            mean pooling), activations extracted on CUDA and on the CPU; the pair job (similarity.device cuda
            against cpu, both float64) on the CPU's activations with the default config's measures (their draws)
            and with every measure of the registry at its default parameters (5 + 5 draws): every value, null
            mean and interval end within 1e-6 (absolute, on values in [0, 1] or distances of order 1). Also the
            activations' largest relative difference, CUDA against CPU (float32 forward passes)
  finetune  --steps steps of the default fine-tuning (minilm-ft-s1's spec) on CUDA and on the CPU, from the same
            head initialisation and batches, dropout off in both (the two devices draw different dropout masks):
            every step's loss within 1e-3 relative (float32 both sides; matmuls in full float32, TF32 off)
  stitch    stitching of the CPU-fine-tuned model into itself (default stitching spec: matching layers, identity
            and affine maps, its steps and optimizer) on CUDA and on the CPU: losses within 1e-3 relative,
            accuracies within 2 of the 500 validation rows
  rate      the pair job on CUDA with the default measures at 872 and 3,000 rows (the sample's train split),
            against the CPU seconds `reprsim plan` predicts for one core: the speed-up the plan should assume
  extract   benchmarks/extract_rate.py on CUDA: extraction against a bare forward over the same batches, float32
            and bfloat16 autocast, MiniLM (every token's states stored) and BERT-base's shape (pooled rows)
  inn       benchmarks/inn_recovery_scale.py on CUDA: synthetic recovery at d = 384 (Ren et al.'s Table 3 shape)
            with train rows 1,200 / 5,000 / all of SST-2 train, within the minutes left

Run:  benchmarks/gpu_check.sh [--out DIR] [--minutes 8] [--data-root ../shared/data/glue]
      benchmarks/gpu_check.sh --dry      every step at tiny sizes on the CPU (tests/unit/test_gpu_check.py)
Prints one summary table last; --out DIR keeps gpu_check.json and each step's log.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import shutil
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

from reprsim.io.device import describe

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "src" / "reprsim" / "stages" / "data" / "samples"
PAIR_TOLERANCE = 1e-6       # absolute, float64 on both devices
LOSS_TOLERANCE = 1e-3       # relative, float32 training on both devices
ACCURACY_ROWS = 2           # stitched accuracy: predictions that may flip on near-ties
COMPARED = ["value", "null_mean", "ci_low", "ci_high"]


def log(message: str) -> None:
    print(message, flush=True)


def load_default_config() -> dict:
    import yaml

    from reprsim.config import validate_config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return validate_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))


class Check:
    """The steps' shared state: the default config, its dataset and models, made once."""

    def __init__(self, args, work: Path):
        from reprsim.stages.data.prepare import prepare_dataset
        from reprsim.stages.models.materialize import materialize_model

        self.args, self.work = args, work
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
            on_cuda, cuda_s = compare(check, stores["cpu"], measures, check.cuda)
        worst, where = table_difference(on_cpu, on_cuda)
        result["rows"] = int(on_cpu["n"].iloc[0])
        result["sets"][name] = {"measures": len(measures), "values": len(on_cpu), "cpu_seconds": round(cpu_s, 2),
                                "cuda_seconds": round(cuda_s, 2), "max_abs_difference": worst, "where": where,
                                "pass": bool(worst <= PAIR_TOLERANCE)}
        log(f"pair [{name}]: {len(measures)} measures, {len(on_cpu)} rows of values; CPU {cpu_s:.1f} s, "
            f"CUDA {cuda_s:.1f} s; largest difference {worst:.2e} ({where})")
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
    for device in (check.cpu, check.cuda):
        started = time.perf_counter()
        tables[device.type], _ = stitch_pair(
            model, model, check.dataset, objective="classification", layers=spec["layers"], phis=spec["phi"],
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
    from reprsim.workflow.measures import with_draws
    from reprsim.workflow.pair_work import pair_seconds

    measures = with_draws(check.config, dict(check.config["measures"]))
    result = {}
    for split in ("test", "train"):
        stores = tuple(check.extract(m, check.cuda, ["test", "train"]) for m in ("minilm", "bert-small-s0"))
        # the stores of step pair hold the test split only: these hold both
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compare(check, stores, measures, check.cuda, split)  # warm-up: CUDA context, kernels
            table, seconds = compare(check, stores, measures, check.cuda, split)
        n = int(table["n"].iloc[0])
        planned = pair_seconds(measures, 7, 384, 5, 256, n)
        result[split] = {"rows": n, "cuda_seconds": round(seconds, 2), "plan_cpu_core_seconds": round(planned, 1),
                         "speedup_over_one_core": round(planned / seconds, 1)}
        log(f"rate: {n} rows, default measures: {seconds:.2f} s on {describe(check.cuda)}; the plan's one-core "
            f"estimate {planned:.0f} s ({planned / seconds:.1f}x)")
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


STEPS = {"pair": step_pair, "finetune": step_finetune, "stitch": step_stitch, "rate": step_rate,
         "extract": step_extract, "inn": step_inn}


def summary_line(name: str, result: dict) -> str:
    if "error" in result:
        return f"{name:>9}  FAILED  {result['error']}"
    verdict = {True: "ok", False: "NOT MET"}.get(result.get("pass"), "-")
    if name == "pair":
        detail = "; ".join(f"{k}: {s['measures']} measures, max |CUDA-CPU| {s['max_abs_difference']:.1e}, "
                           f"CPU {s['cpu_seconds']} s, CUDA {s['cuda_seconds']} s" for k, s in result["sets"].items())
        detail += f"; activations {result['activations_max_relative']:.1e} rel"
    elif name == "finetune":
        detail = (f"{result['steps']} steps, max loss diff {result['max_relative_difference']:.1e} rel, CPU "
                  f"{result['cpu_seconds']} s, CUDA {result['cuda_seconds']} s")
    elif name == "stitch":
        detail = (f"max loss diff {result['max_relative_loss_difference']:.1e} rel, accuracy rows "
                  f"{result['accuracy_rows_differing']:.0f}, CPU {result['cpu_seconds']} s, CUDA {result['cuda_seconds']} s")
    elif name == "rate":
        detail = "; ".join(f"{r['rows']} rows {r['cuda_seconds']} s = {r['speedup_over_one_core']}x one core"
                           for r in result.values() if isinstance(r, dict))
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
    parser.add_argument("--minutes", type=float, default=8.0, help="the whole run's budget")
    parser.add_argument("--steps", type=int, default=None, help="fine-tuning steps (default 30; --dry 3)")
    parser.add_argument("--only", nargs="+", choices=list(STEPS), default=list(STEPS))
    parser.add_argument("--data-root", type=Path, default=None,
                        help="GLUE files (sst2/train.tsv); default ../shared/data/glue, else the package's SST-2 "
                             "sample")
    args = parser.parse_args()
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
            if check.left() < 20 and name != "pair" and not args.dry:  # --dry checks every step, however slow
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
