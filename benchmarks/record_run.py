"""Record a finished default run as the figures the README and the guide quote.

    python benchmarks/record_run.py RUN --other-kernel OTHER [--other-kernel-path ENV] [--time-output FILE]
        [--universality STUDY_RUN [--universality-time-output FILE]] [--coverage FILE] [--write]

RUN is the directory the run was made in (`snakemake --cores 2` with config/config.yaml, from an empty results/).
Writes docs/recorded-run/summary.json (reprsim.guide.recorded_run) and copies the results tables it quotes
(reprsim.guide.recorded_run.TABLES, a few KB each) beside it, from:

- RUN/results/tables/*.parquet: the findings, the measure agreement, the discordant orderings, the pair summary,
  the attention table (its quoted rows only are copied);
- RUN's newest .snakemake/log/*.snakemake.log: jobs (the rule `all` not counted), cores, wall from the first job's
  start to the last one's end (benchmarks/utilisation.py parses it);
- --time-output: `/usr/bin/time -v` of the snakemake command: its wall clock and peak resident memory;
- `du -sk RUN/results`: the results' size; `git -C RUN rev-parse HEAD`: the commit;
- --other-kernel OTHER: the same commit's default run on another BLAS kernel path (--other-kernel-path, e.g.
  MKL_CBWR=COMPATIBLE): its findings are copied beside the summary, and which of RUN's findings moved and by how
  much is recorded (reprsim.guide.recorded_run.kernel_variation), since what passes through training depends on the CPU;
- the fingerprint of RUN's configuration and code (reprsim.guide.recorded_run.fingerprint over RUN's own checkout; this
  checkout's when RUN holds no config/ and scripts/): the guide calls the figures stale while it differs from this
  checkout's.

Beside the default, from their own runs (each carried over from the previous recording when not given):

- --universality STUDY_RUN: a finished run of config/examples/universality.yaml (its Snakemake log, its universality
  table, sense table, controls' table and statement: reprsim.guide.recorded_run.universality_summary), with
  --universality-time-output its
  `/usr/bin/time -v`;
- --coverage FILE: benchmarks/interval_coverage.py's --out.

With --write, every `<!-- recorded: NAME -->` block of README.md and docs/**/*.md is rewritten from the summary.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import utilisation  # noqa: E402

from reprsim.guide import recorded_run  # noqa: E402


def time_output(path: Path) -> dict:
    """Wall clock (s) and peak resident memory (bytes) from `/usr/bin/time -v`."""
    text = path.read_text(errors="replace")
    found = {}
    if match := re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text):
        seconds = 0.0
        for part in match.group(1).split(":"):
            seconds = seconds * 60 + float(part)
        found["time_wall_s"] = round(seconds, 2)
    if match := re.search(r"Maximum resident set size \(kbytes\): (\d+)", text):
        found["peak_rss_bytes"] = int(match.group(1)) * 1024
    if match := re.search(r"Command being timed: \"(.*)\"", text):
        found["command"] = match.group(1)
    return found


def run_facts(run: Path, timed: Path | None) -> dict:
    logs = sorted((run / ".snakemake" / "log").glob("*.snakemake.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        raise SystemExit(f"{run}/.snakemake/log/ holds no Snakemake log")
    jobs, cores = utilisation.parse(logs[-1])
    done = list(jobs.values())
    wall = (max(j["end"] for j in done) - min(j["start"] for j in done)).total_seconds()
    rules = utilisation.per_rule(done)  # jobs and job seconds per rule, from the log's stamps
    facts = {"jobs": len(done), "cores": cores, "log_wall_s": wall, "log": logs[-1].name,
             "rules": {rule: {"jobs": rules[rule]["jobs"], "seconds": rules[rule]["seconds"]} for rule in sorted(rules)}}
    if timed is not None:
        facts.update(time_output(timed))
    size_kb = int(subprocess.run(["du", "-sk", str(run / "results")], check=True, capture_output=True,
                                 text=True).stdout.split()[0])
    facts["results_bytes"] = size_kb * 1024
    return facts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("--time-output", type=Path, help="the `/usr/bin/time -v` output of the run")
    parser.add_argument("--other-kernel", type=Path, required=True,
                        help="the directory of the same commit's default run on another kernel path")
    parser.add_argument("--other-kernel-path", default="MKL_CBWR=COMPATIBLE",
                        help="the environment that run had (default: MKL_CBWR=COMPATIBLE)")
    parser.add_argument("--universality", type=Path, help="a finished run of config/examples/universality.yaml")
    parser.add_argument("--universality-time-output", type=Path, help="the `/usr/bin/time -v` output of that run")
    parser.add_argument("--coverage", type=Path, help="benchmarks/interval_coverage.py --out")
    parser.add_argument("--write", action="store_true", help="rewrite the recorded blocks of README.md and docs/")
    args = parser.parse_args()
    import pandas as pd

    run = args.run.resolve()
    tables_dir = run / "results" / "tables"
    sources = {name: run / "results" / recorded_run.SOURCES[name] if name in recorded_run.SOURCES
               else tables_dir / f"{name}.parquet" for name in recorded_run.TABLES}
    tables = {name: pd.read_parquet(path) for name, path in sources.items()}
    # the fingerprint of the code and configuration that made the run: RUN's own checkout, else this one
    code = run if (run / "config" / "config.yaml").is_file() and (run / "scripts").is_dir() else recorded_run.ROOT
    commit = subprocess.run(["git", "-C", str(run), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    other = args.other_kernel.resolve()
    other_commit = subprocess.run(["git", "-C", str(other), "rev-parse", "HEAD"], capture_output=True,
                                  text=True).stdout.strip()
    if other_commit != commit:
        raise SystemExit(f"{other} is commit {other_commit[:7] or '?'}, {run} is {commit[:7] or '?'}: "
                         "the kernel comparison needs one commit's two runs")
    other_findings = other / "results" / "tables" / "findings.parquet"
    summary = {
        "commit": commit or None,
        "recorded": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "fingerprint": recorded_run.fingerprint(code),
        "fingerprint_files": len(recorded_run.fingerprint_files(code)),
        "run": run_facts(run, args.time_output),
        **recorded_run.summarise(tables),
        "kernel_variation": recorded_run.kernel_variation(tables["findings"], pd.read_parquet(other_findings),
                                                          args.other_kernel_path),
    }
    previous = recorded_run.load_summary() if recorded_run.SUMMARY.is_file() else {}
    if args.universality:
        study = args.universality.resolve()
        study_tables = study / "results" / "tables"  # not `tables`: the default's, copied below
        facts = run_facts(study, args.universality_time_output)
        facts["commit"] = subprocess.run(["git", "-C", str(study), "rev-parse", "HEAD"], capture_output=True,
                                         text=True).stdout.strip() or None
        optional = {name: pd.read_parquet(study_tables / f"universality_{name}.parquet")
                    for name in ("senses", "controls") if (study_tables / f"universality_{name}.parquet").exists()}
        summary["universality"] = {"run": facts, **recorded_run.universality_summary(
            pd.read_parquet(study_tables / "universality.parquet"),
            pd.read_parquet(study_tables / "universality_statement.parquet"), **optional)}
    elif "universality" in previous:
        summary["universality"] = previous["universality"]
    if args.coverage:
        summary["interval_coverage"] = json.loads(args.coverage.read_text())
    elif "interval_coverage" in previous:
        summary["interval_coverage"] = previous["interval_coverage"]
    recorded_run.RECORDED_DIR.mkdir(parents=True, exist_ok=True)
    for name in recorded_run.TABLES:
        if name in recorded_run.SUBSETS:  # only the rows quoted
            recorded_run.SUBSETS[name](tables[name]).to_parquet(recorded_run.RECORDED_DIR / f"{name}.parquet")
        else:
            shutil.copyfile(sources[name], recorded_run.RECORDED_DIR / f"{name}.parquet")
    shutil.copyfile(other_findings, recorded_run.RECORDED_DIR / f"{recorded_run.OTHER_KERNEL_FINDINGS}.parquet")
    recorded_run.SUMMARY.write_text(json.dumps(summary, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    print(f"wrote {recorded_run.SUMMARY.relative_to(recorded_run.ROOT)} (commit {commit[:7] or '?'}, "
          f"{summary['run']['jobs']} jobs) and {len(recorded_run.TABLES)} tables beside it")
    if args.write:
        for page in recorded_run.pages():
            text = page.read_text()
            filled = recorded_run.fill(text, summary)
            if filled != text:
                page.write_text(filled)
                print(f"rewrote {page.relative_to(recorded_run.ROOT)}")


if __name__ == "__main__":
    main()
