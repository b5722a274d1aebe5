"""Each rule's start-up: the seconds from its process's start to its first line of work, and what it imports.

    python benchmarks/startup.py [--repeats 5] [--calls] [--json OUT]

A job's script runs in a fresh Python (Snakemake's `script:`): the interpreter starts, Snakemake's preamble
unpickles the job's `snakemake` object, the script's imports run, and its work starts at its first `with`
(every script's `with tee_to_log(...)`). For every rule of rules/*.smk this times exactly that prelude — the
preamble's imports and the script's imports, which precede its first `with`/`try` — in a fresh
process, `--repeats` times on an otherwise idle machine, and prints the median beside the rule's target:

    figure and table rules      ≤ 1.0 s, and neither torch nor transformers imported
    torch rules                 ≤ 2.5 s  (pair jobs, model terms, aligners, measure tests: no transformers)
    rules that load a model     ≤ 5.0 s  (transformers)

and, from `python -X importtime`, the packages the prelude imports whose own modules take ≥ 50 ms (self times
summed by top-level package, whoever imports them).

`--calls` also runs the tiny configuration (tests/config/tiny.yaml) end to end in a temporary copy of the
workflow, every job under a profiling hook (a sitecustomize on its PYTHONPATH) that records which packages
the job calls into once its work has started; it then lists, per rule, the packages the job imported at
start-up and never called: imports to remove. The run takes a few minutes (the hook slows Python calls).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path

from reprsim.workflow.checkout import copy_workflow

REPO = Path(__file__).resolve().parents[1]
# what Snakemake's script preamble imports before the script runs (snakemake.script.PythonScript)
PREAMBLE = "import pickle\nfrom snakemake.logging import logger\nfrom snakemake.iocontainers import Snakemake\n"
# rules whose job loads a transformers model (their work needs it), and rules that compute with torch alone
MODEL_RULES = {"materialize_model", "pretrain_model", "finetune_model", "extract_activations", "truncation", "skip",
               "stitch", "layer_injection", "model_predictions"}
TORCH_RULES = {"compare_pair", "model_terms", "compare_attention", "token_cka", "align_layers", "synthetic_recovery",
               "measure_tests", "deletion_probes"}
TARGETS = {"model": 5.0, "torch": 2.5, "table": 1.0}
FORBIDDEN = {"model": set(), "torch": {"transformers"}, "table": {"torch", "transformers"}}
HEAVY_SECONDS = 0.05


def category(rule: str) -> str:
    return "model" if rule in MODEL_RULES else "torch" if rule in TORCH_RULES else "table"


def rule_scripts() -> dict[str, str]:
    """Rule name -> the script it runs (scripts/<name>.py), for every rule of rules/*.smk with a script."""
    found = {}
    for smk in sorted((REPO / "rules").glob("*.smk")):
        for block in re.split(r"^(?:local)?rule ", smk.read_text(), flags=re.M)[1:]:
            script = re.search(r"^    script:\s*\n\s*\"\.\./scripts/(\w+)\.py\"", block, re.M)
            if script:
                found[block.split(":", 1)[0]] = script.group(1)
    return found


def prelude(script: str) -> str:
    """A script's imports before its first line of work (its first `with` or `try`; a statement between them reads
    the job's `snakemake` object and costs nothing)."""
    path = REPO / "scripts" / f"{script}.py"
    source = path.read_text()
    statements = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.With, ast.Try)):
            break
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            statements.append(ast.get_source_segment(source, node))
    return "\n".join(statements)


def job_environment(extra_path: str | None = None) -> dict[str, str]:
    path = os.pathsep.join(p for p in (extra_path, str(REPO / "src"), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def time_prelude(code: str, repeats: int) -> float:
    """Median seconds from spawning a fresh Python to the end of `code` (the script's first line of work)."""
    program = code + "\nimport time as _t, sys as _s\n_s.stdout.write(repr(_t.time()))\n"
    seconds = []
    for _ in range(repeats):
        started = time.time()
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                              env=job_environment(), cwd=REPO).stdout
        seconds.append(float(done.strip().splitlines()[-1]) - started)
    return statistics.median(seconds)


def import_costs(code: str) -> dict[str, float]:
    """Package -> seconds its own modules took to import (python -X importtime's self times, summed by top-level
    package, whoever imported them), for what `code` imports."""
    stderr = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                            check=True, env=job_environment(), cwd=REPO).stderr
    costs: dict[str, float] = defaultdict(float)
    for line in stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[0].split(":")[-1].strip().isdigit():
            continue
        costs[parts[2].strip().split(".")[0]] += int(parts[0].split(":")[-1]) / 1e6
    return dict(costs)


# --------------------------------------------------------------------------------- --calls: what a job uses
AUDIT_HOOK = textwrap.dedent('''
    """Installed by benchmarks/startup.py --calls: which packages a job imports and which it calls into."""
    import atexit, json, os, sys, threading

    _called, _working = set(), [False]

    def _top(name):
        if not isinstance(name, str):  # an extension function may name its module by the module object itself
            name = getattr(name, "__name__", "")
        return name.split(".", 1)[0]

    def _hook(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if not _working[0]:
                if code.co_name != "tee_to_log":
                    return
                _working[0] = True  # the script's first line of work
                _imported.update(_top(name) for name in list(sys.modules))
            if code.co_name != "<module>":
                _called.add(_top(frame.f_globals.get("__name__")))
        elif event == "c_call" and _working[0]:
            _called.add(_top(getattr(arg, "__module__", None) or type(getattr(arg, "__self__", None)).__module__))

    _imported = set()
    sys.setprofile(_hook)
    threading.setprofile(_hook)

    @atexit.register
    def _write():
        sys.setprofile(None)
        job = getattr(sys.modules.get("__main__"), "snakemake", None)
        if job is None or not _working[0]:
            return
        record = {"rule": job.rule, "imported": sorted(_imported), "called": sorted(_called)}
        path = os.path.join(os.environ["REPRSIM_STARTUP_AUDIT"], f"{job.rule}-{os.getpid()}.json")
        with open(path, "w") as handle:
            json.dump(record, handle)
''')


def audit_tiny_run(workdir: Path) -> dict[str, set[str]]:
    """Rule -> packages imported at start-up that no job of the rule called, from a hooked run of the tiny config."""
    copy_workflow(REPO, workdir)
    shutil.copy(REPO / "tests" / "config" / "tiny.yaml", workdir / "tiny.yaml")
    hook_dir, records = workdir / "audit-hook", workdir / "audit"
    hook_dir.mkdir()
    records.mkdir()
    (hook_dir / "sitecustomize.py").write_text(AUDIT_HOOK)
    environment = {**job_environment(str(hook_dir)), "REPRSIM_STARTUP_AUDIT": str(records)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "tiny.yaml", "--quiet"],
                   cwd=workdir, env=environment, check=True, stdout=subprocess.DEVNULL)
    print(f"(tiny configuration under the hook: {time.perf_counter() - started:.0f} s)", file=sys.stderr)
    unused: dict[str, set[str]] = {}
    for path in records.glob("*.json"):
        record = json.loads(path.read_text())
        idle = set(record["imported"]) - set(record["called"])
        unused[record["rule"]] = unused.get(record["rule"], idle) & idle  # never called by any job of the rule
    return unused


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", action="store_true", help="also run the tiny config under a call-recording hook")
    parser.add_argument("--json", type=Path, help="write the table as JSON here")
    args = parser.parse_args(argv)

    rules = rule_scripts()
    by_script: dict[str, dict] = {}
    for script in sorted(set(rules.values())):
        code = PREAMBLE + prelude(script)
        by_script[script] = {"seconds": time_prelude(code, args.repeats), "imports": import_costs(code)}
    unused: dict[str, set[str]] = {}
    if args.calls:
        with tempfile.TemporaryDirectory() as workdir:
            unused = audit_tiny_run(Path(workdir))

    rows, failures = [], 0
    for rule, script in sorted(rules.items(), key=lambda item: (category(item[0]), item[0])):
        kind, measured = category(rule), by_script[script]
        heavy = {name: cost for name, cost in measured["imports"].items() if cost >= HEAVY_SECONDS}
        forbidden = sorted(FORBIDDEN[kind] & set(measured["imports"]))
        never_called = sorted((name for name in unused.get(rule, ()) if name in heavy), key=lambda n: -heavy[n])
        meets = measured["seconds"] <= TARGETS[kind] and not forbidden
        failures += not meets
        rows.append({"rule": rule, "script": script, "kind": kind, "seconds": round(measured["seconds"], 2),
                     "target": TARGETS[kind], "meets": meets, "heavy_imports": heavy, "forbidden": forbidden,
                     "never_called": never_called if args.calls else None})
    print(f"{'rule':<26}{'kind':<7}{'start-up':>9}{'target':>8}  imports ≥ {HEAVY_SECONDS * 1000:.0f} ms (s)"
          + ("; imported, never called" if args.calls else ""))
    for row in rows:
        imports = ", ".join(f"{n} {s:.2f}" for n, s in sorted(row["heavy_imports"].items(), key=lambda i: -i[1]))
        flag = "" if row["meets"] else "  <- over target" + (f" (imports {row['forbidden']})" if row["forbidden"] else "")
        unused_text = f"; never called: {', '.join(row['never_called']) or '-'}" if args.calls else ""
        print(f"{row['rule']:<26}{row['kind']:<7}{row['seconds']:>8.2f}s{row['target']:>7.1f}s  {imports}"
              f"{unused_text}{flag}")
    print(f"{len(rows)} rules, {len(rows) - failures} within their targets; median of {args.repeats} starts each, "
          f"{sys.executable}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
