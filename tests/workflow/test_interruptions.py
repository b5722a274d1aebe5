"""Reliability of a finished or interrupted run: a moved checkout has nothing to do, and a run killed
(SIGKILL, Snakemake and every job with it) at any stage resumes with `--unlock` and the same command
to tables equal to an uninterrupted run's, with no temporary left behind; a second Snakemake on
the same directory is refused by the first one's lock.

The killed run starts from a copy of the shared run without a fine-tuned seed and what depends on it
(conftest.rerun_copy): it remakes about half of the DAG, with jobs of every kind of output (a model directory,
stores, tables, figures, the report's pages).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
from conftest import TINY, copy_workflow, planned_jobs, rerun_copy, snakemake

pytestmark = pytest.mark.workflow

# Rule -> (its script, seconds into the job), roughly in DAG order: the run is killed that long after
# a job of the rule has started, resumed and killed at the next rule, and so on. Jobs of independent
# rules run side by side, so a rule may be finished before its turn (the report takes half a second);
# it is then passed over, and most must still be hit. Every kind of output is among them: a model directory (as
# datasets and materialised models are written: reprsim.io.outputs.atomic_directory), a store, a pair job's two
# tables, the report's pages. Stitching's, truncation's, layer injection's and the aligners' tables go through the
# same writer (reprsim.io.outputs.write_parquet) and are not killed again: each kill costs a restart and the
# killed work.
KILL_POINTS = {"finetune_model": ("finetune_model", 1.0), "extract_activations": ("extract_activations", 1.5),
               "compare_pair": ("compare_pair", 1.5), "report": ("build_report", 0.1)}


def test_a_moved_checkout_has_nothing_to_do(workflow, tmp_path):
    """Copied as `cp -a` or `rsync -a` copy (same files, same mtimes), then asked what is left."""
    moved = tmp_path / "elsewhere" / "renamed-study"
    shutil.copytree(workflow, moved, symlinks=True)
    result = snakemake(moved, "--dry-run", "--configfile", "tiny.yaml")
    assert planned_jobs(result.stdout + result.stderr) == {}, result.stdout[-3000:]


def _start(root: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(root / "Snakefile"), "--directory", str(root),
               "--cores", "2", "--max-threads", "1", "--configfile", "tiny.yaml"]
    # its own session, so that the kill reaches Snakemake and every job it started, as a crash would
    with open(root / "run.log", "a") as log:
        return subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _kill_when_running(root: Path, process: subprocess.Popen, script: str, delay: float,
                       timeout: float = 600) -> bool:
    """SIGKILL the whole run a moment after a job of `script` has started (Snakemake writes each
    running script job to .snakemake/scripts/tmp*.{script}.py); True when that job was still running."""
    deadline = time.monotonic() + timeout
    while not list((root / ".snakemake" / "scripts").glob(f"tmp*.{script}.py")):
        if process.poll() is not None:
            raise AssertionError(f"the run ended (exit {process.returncode}) before a {script} job started")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {script} job started within {timeout} s")
        time.sleep(0.05)
    time.sleep(delay)  # inside the job: imports under way or done, outputs perhaps being written
    return _kill(process, script)


def _kill(process: subprocess.Popen, script: str = "") -> bool:
    """SIGKILL Snakemake and every process of its session; True when a job of `script` was running."""
    session = os.getsid(process.pid)
    doomed = [p for p in psutil.process_iter(["pid", "cmdline"]) if _session(p) == session]
    mid_job = bool(script) and any(f".{script}.py" in " ".join(p.info["cmdline"] or []) for p in doomed)
    for victim in doomed:
        try:
            victim.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    process.wait()
    psutil.wait_procs(doomed, timeout=30)
    return mid_job


def _session(process: psutil.Process) -> int | None:
    try:
        return os.getsid(process.pid)
    except (ProcessLookupError, PermissionError):
        return None


def _planned(root: Path) -> dict[str, int]:
    result = snakemake(root, "--dry-run", "--configfile", "tiny.yaml")
    return planned_jobs(result.stdout + result.stderr)


def _untimed(value):
    """A JSON meta cell without the keys that time things (they differ between any two runs)."""
    try:
        meta = json.loads(value)
    except (TypeError, ValueError):
        return value
    if not isinstance(meta, dict):
        return value
    return json.dumps({k: v for k, v in meta.items() if "seconds" not in k}, sort_keys=True)


def _tables(root: Path) -> dict[str, pd.DataFrame]:
    """Every Parquet table of a run, without the columns and meta keys that time things."""
    tables = {}
    for path in sorted((root / "results").rglob("*.parquet")):
        table = pd.read_parquet(path)
        table = table.drop(columns=[c for c in table.columns if "seconds" in c])
        for column in table.columns:
            if pd.api.types.is_string_dtype(table[column]):
                table[column] = table[column].map(_untimed)
        tables[str(path.relative_to(root))] = table
    return tables


def _assert_equal_tables(got: dict[str, pd.DataFrame], expected: dict[str, pd.DataFrame]) -> None:
    assert sorted(got) == sorted(expected)
    for name, table in expected.items():
        other = got[name]
        assert list(other.columns) == list(table.columns) and len(other) == len(table), name
        for column in table.columns:
            if pd.api.types.is_float_dtype(table[column]):
                np.testing.assert_allclose(other[column].to_numpy(), table[column].to_numpy(), rtol=1e-6,
                                           atol=1e-6, equal_nan=True, err_msg=f"{name}: {column}")
            else:
                assert other[column].astype(str).tolist() == table[column].astype(str).tolist(), f"{name}: {column}"


def test_a_second_snakemake_on_the_same_directory_is_refused(tmp_path):
    root = copy_workflow(tmp_path / "locked")
    shutil.copy(TINY, root / "tiny.yaml")
    first = _start(root)
    try:
        while not any((root / ".snakemake" / "locks").glob("*")):
            assert first.poll() is None, (root / "run.log").read_text()[-3000:]
            time.sleep(0.1)
        second = snakemake(root, "--configfile", "tiny.yaml", check=False)
        assert second.returncode != 0 and "cannot be locked" in second.stdout + second.stderr, second.stderr[-2000:]
        assert first.poll() is None  # the first run goes on
    finally:
        _kill(first)


def test_killed_runs_resume_to_the_uninterrupted_tables(workflow, tmp_path):
    root = rerun_copy(workflow, tmp_path / "killed")
    planned = _planned(root)
    assert set(KILL_POINTS) <= set(planned)  # each kill point has jobs to hit
    killed = []
    for rule, (script, delay) in KILL_POINTS.items():
        if not planned.get(rule):
            continue
        shutil.rmtree(root / ".snakemake" / "scripts", ignore_errors=True)  # a killed job's script stays
        mid_job = _kill_when_running(root, _start(root), script, delay)
        snakemake(root, "--unlock", "--configfile", "tiny.yaml")
        planned = _planned(root)
        if mid_job:
            killed.append(rule)
            # the killed job's half-written outputs are never taken as finished
            assert planned.get(rule), f"killed during {rule}, yet the dry run plans no {rule} job"
    assert len(killed) >= 3, killed
    assert _start(root).wait() == 0, (root / "run.log").read_text()[-4000:]
    assert _planned(root) == {}
    leftovers = [str(p.relative_to(root)) for p in (root / "results").rglob("*.tmp-*")]
    assert not leftovers, f"temporaries left by killed jobs: {leftovers}"
    _assert_equal_tables(_tables(root), _tables(workflow))
