"""How busy a Snakemake run kept its cores, from Snakemake's own log.

    python benchmarks/utilisation.py [LOG] [--cores N] [--critical-path]

LOG defaults to the newest .snakemake/log/*.snakemake.log of the working directory; --cores to the run's
"Provided cores". Each job's duration runs from the timestamp before its "rule"/"localrule" block to the one
before its "Finished jobid" line. Printed:

- wall time (first job start to last job end) and the sum of job durations;
- utilisation = Σ duration / (cores × wall), the issue's measure, and the same with each job weighted by its
  threads (a two-thread job occupies both cores while it runs);
- per rule: jobs, threads, summed and longest duration; and the idle stretches: periods when fewer threads
  were running than cores (the serial parts of the DAG);
- with --critical-path, the longest chain of dependent jobs by duration: a job depends on the jobs whose outputs
  (files, or directories holding them) it lists as inputs in the log.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
RULE = re.compile(r"^(?:local)?(?:checkpoint|rule) (\w+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
THREADS = re.compile(r"^\s+threads: (\d+)$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")
CORES = re.compile(r"^Provided cores: (\d+)$")
FILES = re.compile(r"^\s+(input|output): (.*)$")
GPU = re.compile(r"^\s+resources: .*\bgpu=(\d+)")


def parse(path: Path) -> tuple[dict[int, dict], int | None]:
    jobs, stamp, current, cores = {}, None, None, None
    for line in path.read_text(errors="replace").splitlines():
        if match := STAMP.search(line):  # a job's progress bar may leave no newline before it
            stamp = datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y")
        elif match := CORES.match(line):
            cores = int(match.group(1))
        elif match := RULE.match(line):
            current = {"rule": match.group(1), "start": stamp, "threads": 1}
        elif current is not None and (match := JOBID.match(line)):
            jobs[int(match.group(1))] = current
        elif current is not None and (match := THREADS.match(line)):
            current["threads"] = int(match.group(1))
        elif current is not None and (match := FILES.match(line)):
            current[match.group(1)] = [name.strip() for name in match.group(2).split(", ")]
        elif current is not None and (match := GPU.match(line)):
            current["gpu"] = int(match.group(1))
        elif match := FINISHED.match(line):
            job = jobs.get(int(match.group(1)))
            if job is not None:
                job["end"] = stamp
    return {jobid: job for jobid, job in jobs.items() if "end" in job and job["rule"] != "all"}, cores


def idle_stretches(jobs: list[dict], cores: int, at_least: float = 5.0) -> list[tuple[float, float, int]]:
    """(start, seconds, threads running) of the stretches at least `at_least` s long with fewer threads busy
    than cores, times relative to the first start."""
    origin = min(job["start"] for job in jobs)
    events = sorted([((job["start"] - origin).total_seconds(), job["threads"]) for job in jobs]
                    + [((job["end"] - origin).total_seconds(), -job["threads"]) for job in jobs])
    stretches, running, previous = [], 0, 0.0
    for time, change in events:
        if time > previous and running < cores and time - previous >= at_least:
            stretches.append((previous, time - previous, running))
        running += change
        previous = time
    return stretches


def seconds(job: dict) -> float:
    return (job["end"] - job["start"]).total_seconds()


def per_rule(jobs: Iterable[dict]) -> dict[str, dict]:
    """rule -> its jobs' count, summed and longest duration (s) and most threads, in the order rules first ran."""
    rules: dict[str, dict] = {}
    for job in jobs:
        entry = rules.setdefault(job["rule"], {"jobs": 0, "seconds": 0.0, "max_seconds": 0.0, "threads": 0})
        duration = seconds(job)
        entry.update(jobs=entry["jobs"] + 1, seconds=entry["seconds"] + duration,
                     max_seconds=max(entry["max_seconds"], duration), threads=max(entry["threads"], job["threads"]))
    return rules


def critical_path(jobs: dict[int, dict]) -> list[int]:
    """The jobids of the longest chain of dependent jobs by summed duration, first to last. Job b depends on job a
    when one of b's inputs is one of a's outputs or lies under one (an output directory)."""
    producers: dict[str, int] = {}
    for jobid, job in jobs.items():
        for name in job.get("output", []):
            producers[name.rstrip("/")] = jobid

    def made_by(name: str) -> int | None:
        path = name.rstrip("/")
        while path:
            if path in producers:
                return producers[path]
            path = path.rpartition("/")[0]
        return None

    # jobid -> (longest chain ending with it, its links, its predecessor); a job shorter than the log's one-second
    # stamps adds 0 s, so of chains equally long the one with more links wins: the report after the figure it reads
    best: dict[int, tuple[float, int, int | None]] = {}
    for jobid in sorted(jobs, key=lambda j: jobs[j]["start"]):
        before = {made_by(name) for name in jobs[jobid].get("input", [])} - {None, jobid}
        chains = [(best[b][0], best[b][1], b) for b in before if b in best]
        length, links, previous = max(chains, default=(0.0, 0, None))
        best[jobid] = (length + seconds(jobs[jobid]), links + 1, previous)
    if not best:
        return []
    last = max(best, key=lambda j: best[j][:2])
    path = []
    while last is not None:
        path.append(last)
        last = best[last][2]
    return path[::-1]


def gpu_jobs_at_once(jobs: list[dict]) -> int:
    """The most jobs asking for a GPU (resources gpu=1) that ran at the same time."""
    events = sorted([(job["start"], 1) for job in jobs if job.get("gpu")] + [(job["end"], -1) for job in jobs
                                                                            if job.get("gpu")])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", nargs="?", type=Path)
    parser.add_argument("--cores", type=int)
    parser.add_argument("--critical-path", action="store_true", help="the longest chain of dependent jobs")
    args = parser.parse_args()
    log = args.log or max(Path(".snakemake/log").glob("*.snakemake.log"), key=lambda p: p.stat().st_mtime)
    jobs, provided = parse(log)
    cores = args.cores or provided or 1
    done = list(jobs.values())
    start, end = min(job["start"] for job in done), max(job["end"] for job in done)
    wall = (end - start).total_seconds()
    durations = [(job["end"] - job["start"]).total_seconds() for job in done]
    weighted = sum(d * min(job["threads"], cores) for d, job in zip(durations, done))
    print(f"{log}: {len(done)} jobs on {cores} cores, wall {wall:.0f} s ({wall / 60:.1f} min)")
    print(f"sum of job durations {sum(durations):.0f} s: utilisation {sum(durations) / (cores * wall):.1%} "
          f"(Σ duration / (cores × wall)); weighted by threads {weighted:.0f} s: {weighted / (cores * wall):.1%}")
    print(f"\n{'rule':<26}{'jobs':>5}{'threads':>8}{'sum s':>9}{'max s':>8}")
    for rule, entry in sorted(per_rule(done).items(), key=lambda item: -item[1]["seconds"]):
        print(f"{rule:<26}{entry['jobs']:>5}{entry['threads']:>8}{entry['seconds']:>9.0f}{entry['max_seconds']:>8.0f}")
    stretches = idle_stretches(done, cores)
    if stretches:
        print("\nstretches of 5 s or more with a core idle (start s, length s, threads running):")
        for begin, length, running in stretches:
            print(f"  {begin:7.0f} {length:6.0f}  {running}")
    if args.critical_path:
        path = critical_path(jobs)
        length = sum(seconds(jobs[j]) for j in path)
        print(f"\ncritical path: {len(path)} jobs, {length:.0f} s of the {wall:.0f} s wall:")
        for jobid in path:
            print(f"  {jobs[jobid]['rule']:<26}{seconds(jobs[jobid]):>6.0f} s  (jobid {jobid})")


if __name__ == "__main__":
    main()
