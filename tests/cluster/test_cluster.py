"""Cluster execution: the SLURM profile, device selection inside jobs, and a real single-node SLURM.

Without a cluster: every rule that declares a GPU is routed to the GPU partition by
profiles/slurm; the profile's site values come from the environment; Snakemake loads the
profile and assigns partitions (a dry run); `device: auto` uses the GPU a SLURM job was
allocated and the CPU otherwise.

With a cluster: tests/cluster/slurm.sh starts SLURM on this machine from Debian's packages
(root; `cpu` and `gpu` partitions, one fake GPU); the tiny configuration runs with
--workflow-profile profiles/slurm on a copy of the shared local run without a fine-tuned seed and
what depends on it (conftest.rerun_copy), so that the jobs of every kind that read it (fine-tuning,
extraction, truncation and skipping, terms, pairs and views, injection, stitching, grounding, the
summary and the report) run on SLURM, and the rest is the local run's. SLURM's own records
(scontrol keeps finished jobs for MinJobAge) show every GPU rule that ran in the gpu partition
with a GPU allocated and every other job in the cpu partition; the remade outputs equal the
local run's although jobs die on the way (a job cancelled with scancel while it runs, every job
on the node when the node is set DOWN, and a job killed for exceeding its memory request: each
is resubmitted under the profile's retries, the memory-killed one with its larger request, and
no corrupt output is left); a second invocation has nothing to do; Snakemake started while
slurmctld is down waits for it (or, told to wait less, stops saying so), losing nothing. The
cluster is stopped at the end. Where this machine cannot run SLURM (not root, no packages to
install, daemons that do not start) those tests are skipped with the reason.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import REMADE_MODEL, REPO, TINY, copy_workflow, rerun_copy

from reprsim.io.device import resolve_device
from reprsim.io.store import open_store

SLURM_SH = REPO / "tests" / "cluster" / "slurm.sh"
# Snakemake as the cluster tests start it under the profile: its status checks at most a few seconds apart
PACED_SNAKEMAKE = [sys.executable, str(REPO / "tests" / "cluster" / "paced_snakemake.py")]
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
SITE_VARIABLES = ("REPRSIM_SLURM_CPU_PARTITION", "REPRSIM_SLURM_GPU_PARTITION", "REPRSIM_SLURM_ACCOUNT")
# the job cancelled mid-run: the remade seed's GPU job (fine-tuning, extraction, truncation, skipping), while it
# extracts the activations that every pair job with the seed reads
CANCELLED_RULE = "extract_activations"
CANCELLED_LOG = f"results/logs/activations/tiny/{REMADE_MODEL}.log"
NO_PLUGIN = "the SLURM executor plugin (pip install -e '.[cluster]') is not installed"
# a rule whose first attempt asks for too little memory (the test cluster enforces --mem, tests/cluster/slurm.sh):
# 100 MB, which its job step exceeds while Python starts; from the second attempt on 4000 MB per attempt after the
# first. A rule whose jobs are SLURM jobs of their own (in no group, whose request would be its largest member's):
# the remade seed's deletion probes
SHORT_OF_MEMORY_RULE = "deletion_probes"
SHORT_OF_MEMORY = "max(100, 4000 * (attempt - 1))"


# ----------------------------------------------------------------------------- helpers
def rule_blocks() -> dict[str, str]:
    """Rule name -> its text, for every rule in rules/*.smk."""
    blocks = {}
    for smk in sorted((REPO / "rules").glob("*.smk")):
        for block in re.split(r"^rule ", smk.read_text(), flags=re.M)[1:]:
            blocks[block.split(":", 1)[0]] = block
    return blocks


def gpu_rules() -> dict[str, int]:
    """Rule -> GPUs, for every rule whose resources declare gpu."""
    found = {}
    for name, block in rule_blocks().items():
        resources = re.search(r"^    resources:\n((?:^        .*\n)+)", block, re.M)
        gpu = resources and re.search(r"^\s+gpu\s*=\s*(\d+)", resources.group(1), re.M)
        if gpu:
            found[name] = int(gpu.group(1))
    return found


def load_profile() -> dict:
    """The profile as Snakemake reads it (a YTE template, evaluated in this environment)."""
    import yte

    with open(PROFILE) as handle:
        return yte.process_yaml(handle, require_use_yte=True)


def resource_value(text):
    """A resource as Snakemake evaluates a profile value: a Python literal, or else the string."""
    try:
        return ast.literal_eval(str(text))
    except (ValueError, SyntaxError):
        return str(text)


def site_environment() -> dict[str, str]:
    """This environment without site overrides: the profile's default partitions (cpu, gpu)."""
    return {k: v for k, v in os.environ.items() if k not in SITE_VARIABLES}


# ------------------------------------------------------------------ the profile, no cluster
def test_every_gpu_rule_is_routed_to_the_gpu_partition(monkeypatch):
    for name in SITE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    declared = gpu_rules()
    assert {"extract_activations", "finetune_model", "truncation", "skip"} <= set(declared)
    routed = load_profile()["set-resources"]
    for rule, gpus in declared.items():
        assert rule in routed, (f"rule {rule} declares gpu={gpus}: give it a set-resources entry in "
                                f"profiles/slurm/config.yaml (gpu: {gpus}, slurm_partition: the GPU partition)")
        assert resource_value(routed[rule]["gpu"]) == gpus
        assert resource_value(routed[rule]["slurm_partition"]) == "gpu"
    stale = {rule for rule, resources in routed.items() if "gpu" in resources and rule not in declared}
    assert not stale, f"set-resources routes rules that are not GPU rules (or no longer exist): {stale}"


def test_profile_site_values_come_from_the_environment(monkeypatch):
    for name in SITE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    profile = load_profile()
    assert profile["executor"] == "slurm"
    assert resource_value(profile["default-resources"]["slurm_partition"]) == "cpu"
    assert "slurm_account" not in profile["default-resources"] and profile["slurm-no-account"] is True
    assert "--gres" not in json.dumps(profile)  # the plugin rejects it; GPUs are `gpu` resources

    monkeypatch.setenv("REPRSIM_SLURM_CPU_PARTITION", "batch")
    monkeypatch.setenv("REPRSIM_SLURM_GPU_PARTITION", "a100")
    monkeypatch.setenv("REPRSIM_SLURM_ACCOUNT", "proj-42")
    profile = load_profile()
    assert resource_value(profile["default-resources"]["slurm_partition"]) == "batch"
    assert resource_value(profile["default-resources"]["slurm_account"]) == "proj-42"
    assert profile["slurm-no-account"] is False
    assert {resource_value(r["slurm_partition"]) for r in profile["set-resources"].values()} == {"a100"}


def dry_run_jobs(output: str) -> list[dict]:
    """Rule, resources and group (None outside group jobs) of every job a dry run lists."""
    jobs, group = [], None
    for line in output.splitlines():
        if re.search(r"Group job (\w+) ", line):
            group = re.search(r"Group job (\w+) ", line).group(1)
        elif re.match(r"^(\s*)(?:local)?rule (\w+):$", line):
            indent, rule = re.match(r"^(\s*)(?:local)?rule (\w+):$", line).groups()
            group = group if indent else None
            jobs.append({"rule": rule, "group": group, "resources": {}})
        elif jobs and line.strip().startswith("resources: "):
            items = line.strip()[len("resources: "):].split(", ")
            jobs[-1]["resources"] = dict(item.split("=", 1) for item in items)
    return jobs


def test_snakemake_loads_the_profile_and_assigns_partitions(tmp_path):
    pytest.importorskip("snakemake_executor_plugin_slurm", reason=NO_PLUGIN)
    root = copy_workflow(tmp_path / "workflow")
    shutil.copy(TINY, root / "tiny.yaml")
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(root / "Snakefile"), "--directory", str(root),
               "--workflow-profile", str(root / "profiles" / "slurm"), "--configfile", "tiny.yaml", "--dry-run"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=root, env=site_environment())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert "profiles/slurm" in output
    jobs = [job for job in dry_run_jobs(output) if job["rule"] != "all"]
    assert {job["rule"] for job in jobs} >= {"extract_activations", "finetune_model", "compare_pair", "report"}
    groups = load_profile()["groups"]
    for job in jobs:
        if job["rule"] in gpu_rules():
            assert job["resources"]["slurm_partition"] == "gpu" and job["resources"]["gpu"] == "1", job
        else:
            assert job["resources"]["slurm_partition"] == "cpu" and "gpu" not in job["resources"], job
        assert job["group"] == groups.get(job["rule"]), job  # pairwise jobs and figures batched
        assert job["resources"]["runtime"] == "<TBD>" or int(job["resources"]["runtime"]) > 0


def test_hub_downloads_are_local_jobs_under_the_profile(tmp_path):
    """Compute nodes often have no network: a `source: hf` model's and dataset's downloads are local rules of
    the submitting host (rules/hub.smk), the jobs that read them are submitted."""
    pytest.importorskip("snakemake_executor_plugin_slurm", reason=NO_PLUGIN)
    root = copy_workflow(tmp_path / "workflow")
    config = yaml.safe_load(TINY.read_text())
    config["models"]["hub-bert"] = {"source": "hf", "id": "google/bert_uncased_L-2_H-128_A-2",
                                    "revision": "30b0a37ccaaa32f332884b96992754e246e48c5f"}
    config["datasets"]["hub-sst2"] = {"source": "hf", "id": "nyu-mll/glue", "config": "sst2",
                                      "splits": {"train": "train", "validation": "validation"},
                                      "columns": {"text": "sentence", "label": "label"}}
    config["extraction"]["datasets"] = ["tiny"]
    (root / "hub.yaml").write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(root / "Snakefile"), "--directory", str(root),
               "--workflow-profile", str(root / "profiles" / "slurm"), "--configfile", "hub.yaml", "--dry-run"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=root, env=site_environment())
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    # Snakemake 9 prints no local/submitted mark in a dry run ("we don't know how the user wants to execute"):
    # the dry run shows one download per hub source ahead of the jobs that read it; that it runs on this host is
    # shown by running it (test_hub_download_runs_on_the_submitting_host)
    jobs = dry_run_jobs(output)
    assert [job["rule"] for job in jobs].count("fetch_hub") == 2
    assert {"materialize_model", "prepare_dataset"} <= {job["rule"] for job in jobs}
    assert "results/hub/model/hub-bert.json" in output and "results/hub/dataset/hub-sst2.json" in output


# ----------------------------------------------------------------- device selection in jobs
@pytest.mark.parametrize("slurm_job, visible, cuda_present, expected", [
    (False, None, False, "cpu"),     # a laptop
    (False, None, True, "cuda"),     # a workstation with a GPU
    (True, "0", True, "cuda"),       # a SLURM job allocated a GPU: torch's cuda:0 is that GPU
    (True, None, True, "cpu"),       # a SLURM job allocated none, on a GPU node: not someone else's GPU
    (True, "0", False, "cpu"),       # allocated a (fake) GPU, CPU-only torch
])
def test_auto_device_uses_the_gpu_slurm_allocated(monkeypatch, slurm_job, visible, cuda_present, expected):
    for name in ("SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    if slurm_job:
        monkeypatch.setenv("SLURM_JOB_ID", "42")
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_present)
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu").type == "cpu"


# ----------------------------------------------------------------------------- the cluster
def run_script(action: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(SLURM_SH), action], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def slurm():
    """A running single-node SLURM for this module; stopped at its end."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the cluster test starts SLURM from Debian packages; this is not Linux")
    pytest.importorskip("snakemake_executor_plugin_slurm", reason=NO_PLUGIN)
    if os.geteuid() != 0:
        pytest.skip("the cluster test starts SLURM daemons (slurmctld, slurmd, munged) and needs root")
    if not shutil.which("slurmctld") and not shutil.which("apt-get"):
        pytest.skip("SLURM is not installed and apt-get is not available to install slurm-wlm and munge")
    started = time.monotonic()
    result = run_script("start", timeout=900)
    if result.returncode != 0:
        run_script("stop", timeout=120)
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"this machine cannot run a single-node SLURM (tests/cluster/slurm.sh start: {reason})")
    print(f"\nSLURM started in {time.monotonic() - started:.1f} s")
    try:
        yield
    finally:
        run_script("stop", timeout=120)


def slurm_jobs(job_name: str) -> list[dict]:
    """Every job SLURM remembers with this name (the executor's run id), detailed (-d: GRES per node)."""
    output = subprocess.run(["scontrol", "-d", "-o", "show", "job"], capture_output=True, text=True,
                            check=True).stdout
    jobs = []
    for line in output.splitlines():
        fields = dict(re.findall(r"(\S+?)=(\S*)", line))
        if fields.get("JobName") == job_name:
            jobs.append(fields | {"line": line})
    return sorted(jobs, key=lambda job: int(job["JobId"]))


def job_rules(comment: str) -> tuple[str | None, list[str]]:
    """(group or None, the rules a SLURM job ran) from the comment the executor gives it:
    rule_<rule>[_wildcards_<...>], or rule_<group>_<its rules, sorted, at most 5 then ...>."""
    rules = sorted(rule_blocks(), key=len, reverse=True)
    assert comment.startswith("rule_"), comment
    rest = comment[len("rule_"):]
    for group in sorted(set(load_profile()["groups"].values()), key=len, reverse=True):
        if rest.startswith(f"{group}_"):
            members, rest = [], rest[len(group) + 1:]
            while rest and rest != "...":
                name = next((r for r in rules if rest == r or rest.startswith(f"{r}_")), None)
                assert name, f"cannot read the rules of group job {comment!r}"
                members.append(name)
                rest = rest[len(name) + 1:]
            return group, members
    name = next((r for r in rules if rest == r or rest.startswith(f"{r}_wildcards_")), None)
    assert name, f"unknown job comment {comment!r}"
    return None, [name]


def gpu_allocated(job: dict) -> bool:
    return bool(re.search(r"\bGRES=gpu:1\(IDX:\d+\)|\bJOB_GRES=gpu:1\b", job["line"]))


def cluster_command(root: Path) -> list[str]:
    """The guide's cluster command (docs/clusters.md) on a copy of the workflow, tuned to a one-node cluster's pace:
    status checks every 2 to 3 s (tests/cluster/paced_snakemake.py) rather than the plugin's 40 s first and 180 s
    at most, and batches of 5 pairs rather than 20, so
    that batches run side by side on the node's two CPUs."""
    return [*PACED_SNAKEMAKE, "--snakefile", str(root / "Snakefile"), "--directory", str(root),
            "--workflow-profile", str(root / "profiles" / "slurm"), "--configfile", "tiny.yaml",
            "--slurm-init-seconds-before-status-checks", "2", "--group-components", "pairs=5", "align=20"]


def cancel_while_running(root: Path, process: subprocess.Popen, deadline: float) -> str:
    """scancel the GPU job extracting the remade seed's activations once that script has started (its
    log exists); its SLURM job id. The node has one GPU, so that job is the one GPU job running."""
    while time.monotonic() < deadline and process.poll() is None:
        if (root / CANCELLED_LOG).exists():
            queue = subprocess.run(["squeue", "-h", "-p", "gpu", "-t", "RUNNING", "-o", "%i %k"],
                                   capture_output=True, text=True).stdout.split()
            if len(queue) == 2 and CANCELLED_RULE in job_rules(queue[1])[1]:
                subprocess.run(["scancel", queue[0]], check=True)
                return queue[0]
        time.sleep(0.2)
    raise AssertionError("the job to cancel never ran (or the run ended first)")


def elapsed_seconds(text: str) -> int:
    """squeue's %M ([days-][hours:]minutes:seconds) in seconds."""
    days, _, clock = text.rpartition("-")
    seconds = 0
    for part in clock.split(":"):
        seconds = 60 * seconds + int(part)
    return seconds + 86_400 * int(days or 0)


def fail_node_while_running(process: subprocess.Popen, cancelled: str, deadline: float) -> str:
    """Set the node DOWN while a pair job (group `pairs`) has run for a few seconds, and return it to service
    once SLURM has failed that job; the pair job's SLURM job id. Every job on the node dies with it (NODE_FAIL)."""
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    while time.monotonic() < deadline and process.poll() is None:
        queue = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i %k %M"], capture_output=True,
                               text=True).stdout.split("\n")
        running = [line.split() for line in queue if line.strip()]
        pairs = [job for job, comment, elapsed in running if job != cancelled and job_rules(comment)[0] == "pairs"
                 and elapsed_seconds(elapsed) >= 3]
        if pairs:
            subprocess.run(["scontrol", "update", f"nodename={host}", "state=DOWN", "reason=reprsim node failure test"],
                           check=True)
            for _ in range(120):
                state = subprocess.run(["squeue", "-h", "-j", pairs[0], "-o", "%T"], capture_output=True,
                                       text=True).stdout.strip()
                if state != "RUNNING":
                    break
                time.sleep(0.25)
            # back in service (slurm.conf's ReturnToService=2 may have done it already when slurmd registered)
            subprocess.run(["scontrol", "update", f"nodename={host}", "state=RESUME"], capture_output=True)
            return pairs[0]
        time.sleep(0.5)
    raise AssertionError("no pair job ran after the cancelled one (or the run ended first)")


class ClusterRun(NamedTuple):
    root: Path  # the workflow copy
    run_id: str  # the executor's run id: the SLURM jobs' name
    cancelled: str  # SLURM job id cancelled with scancel while it ran
    node_failed: str  # SLURM job id of the pair job running when the node was set DOWN
    output: str  # Snakemake's output
    started: float  # when Snakemake was started (time.time()): the files it wrote are newer


def short_of_memory(profile: Path) -> None:
    """The profile copy asks too little memory for one rule's first attempt (SHORT_OF_MEMORY)."""
    text = profile.read_text()
    assert "\nset-resources:\n" in text
    profile.write_text(text.replace("\nset-resources:\n", "\nset-resources:\n"
                                    f"  {SHORT_OF_MEMORY_RULE}:\n    mem_mb: {SHORT_OF_MEMORY}\n", 1))


@pytest.fixture(scope="module")
def cluster_run(slurm, workflow, tmp_path_factory) -> ClusterRun:
    """The jobs that read REMADE_MODEL on SLURM, from a copy of the shared local run, while jobs die: one
    cancelled mid-run, then the node set DOWN under a pair job, and the first attempt of SHORT_OF_MEMORY_RULE
    killed for exceeding its memory request."""
    root = rerun_copy(workflow, tmp_path_factory.mktemp("cluster") / "workflow")
    (root / CANCELLED_LOG).unlink()  # the local run's: the job to cancel has started once its log exists
    short_of_memory(root / "profiles" / "slurm" / "config.yaml")
    log_path = root / "snakemake-cluster.log"
    started_at = time.time()
    started = time.monotonic()
    with open(log_path, "w") as log:
        process = subprocess.Popen(cluster_command(root), cwd=root, env=site_environment(), stdout=log,
                                   stderr=subprocess.STDOUT, text=True)
        try:
            cancelled = cancel_while_running(root, process, deadline=started + 900)
            node_failed = fail_node_while_running(process, cancelled, deadline=started + 1200)
            process.wait(timeout=max(60.0, started + 2400 - time.monotonic()))
        except BaseException:
            process.send_signal(signal.SIGINT)  # Snakemake cancels its SLURM jobs
            process.wait(timeout=120)
            raise
    output = log_path.read_text()
    assert process.returncode == 0, f"the cluster run failed:\n{output[-6000:]}"
    print(f"\ncluster run of the jobs that read {REMADE_MODEL}: {time.monotonic() - started:.1f} s")
    run_id = re.search(r"SLURM run ID: (\S+)", output).group(1)
    return ClusterRun(root, run_id, cancelled, node_failed, output, started_at)


def written_by(cluster_run: ClusterRun, pattern: str) -> list[Path]:
    """The paths under results/ matching `pattern` that the cluster run wrote (newer than its start), relative."""
    root = cluster_run.root
    return sorted(p.relative_to(root) for p in (root / "results").glob(pattern)
                  if p.stat().st_mtime >= cluster_run.started)


@pytest.mark.cluster
def test_hub_download_runs_on_the_submitting_host(slurm, tmp_path):
    """A `source: hf` model under the SLURM profile: its download is a local job of the submitting Snakemake
    (here offline, reading a hub cache a login node filled), the model job is submitted and reads the same cache."""
    from stage.test_hub_offline import BERT_COMMIT, BERT_TAG, build_cache

    hub = build_cache(tmp_path / "hf")
    root = copy_workflow(tmp_path / "workflow")
    config = yaml.safe_load(TINY.read_text())
    config["models"]["hub-bert"] = {"source": "hf", "id": "testorg/tiny-bert", "revision": BERT_TAG}
    (root / "hub.yaml").write_text(yaml.safe_dump(config))
    env = {**site_environment(), "HF_HOME": str(hub.parent), "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    command = [*PACED_SNAKEMAKE, "--snakefile", str(root / "Snakefile"), "--directory", str(root),
               "--workflow-profile", str(root / "profiles" / "slurm"), "--configfile", "hub.yaml",
               "--slurm-init-seconds-before-status-checks", "2", "results/models/hub-bert"]
    result = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert re.search(r"^localrule fetch_hub:", output, re.M) and re.search(r"^rule materialize_model:", output, re.M)
    fetched = json.loads((root / "results" / "hub" / "model" / "hub-bert.json").read_text())
    assert fetched["commit"] == BERT_COMMIT and fetched["files"] >= 4 and fetched["bytes"] > 0
    submitted = slurm_jobs(re.search(r"SLURM run ID: (\S+)", output).group(1))
    assert [job_rules(job["Comment"])[1] for job in submitted] == [["materialize_model"]], submitted
    meta = json.loads((root / "results" / "models" / "hub-bert" / "meta.json").read_text())
    assert meta["origin"] == "testorg/tiny-bert" and meta["n_layers"] == 2


@pytest.mark.cluster
def test_submitted_jobs_read_the_hub_cache_offline(cluster_run):
    """Every job SLURM ran has the hub's offline switches set (rules/common.smk); its log says so first."""
    logs = written_by(cluster_run, "logs/**/*.log")
    assert len(logs) > 20
    for log in logs:
        first = (cluster_run.root / log).read_text().splitlines()[:1]
        assert first == ["hub: HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1"], (log, first)


@pytest.mark.cluster
def test_gpu_rules_ran_in_the_gpu_partition_with_a_gpu(cluster_run):
    run_id, output = cluster_run.run_id, cluster_run.output
    jobs = slurm_jobs(run_id)
    ran: dict[str, list[str]] = {}
    groups = set()
    for job in jobs:
        group, rules = job_rules(job["Comment"])
        groups.add(group)
        for rule in rules:
            ran.setdefault(rule, []).append(job["JobId"])
        gpu = {rule in gpu_rules() for rule in rules}
        assert len(gpu) == 1, f"a job mixes GPU and CPU rules: {job['Comment']}"
        if gpu == {True}:
            assert job["Partition"] == "gpu", job["line"]
            assert gpu_allocated(job), f"no GPU allocated to job {job['JobId']} ({job['Comment']}): {job['line']}"
        else:
            assert job["Partition"] == "cpu", job["line"]
            assert not gpu_allocated(job) and "gres:gpu" not in job["line"], job["line"]
        assert job["JobState"] in ("COMPLETED", "CANCELLED", "NODE_FAIL", "FAILED"), job["line"]
    # every GPU rule that Snakemake ran was a SLURM job: those that read REMADE_MODEL (not the aligners between the
    # untuned models, routed alike: test_snakemake_loads_the_profile_and_assigns_partitions)
    expected = {rule for rule in gpu_rules() if re.search(rf"^\s*(?:local)?rule {rule}:", output, re.M)}
    assert {"extract_activations", "finetune_model", "truncation", "skip", "layer_injection", "stitch"} <= expected
    assert expected <= set(ran)
    assert {"model_terms", "compare_pair", "pair_heatmap", "layer_views", "aggregate_pairs"} <= set(ran)
    assert {"terms", "pairs", "align", "summary", "gpu"} <= groups
    # the pairwise jobs were batched: fewer submissions than pairs
    pair_jobs = {job for job in ran["compare_pair"]}
    assert len(pair_jobs) < output.count("rule compare_pair:")


@pytest.mark.cluster
def test_cancelled_job_was_retried_without_corrupt_output(cluster_run, workflow):
    root, run_id, cancelled, output = cluster_run.root, cluster_run.run_id, cluster_run.cancelled, cluster_run.output
    jobs = {job["JobId"]: job for job in slurm_jobs(run_id)}
    assert jobs[cancelled]["JobState"] == "CANCELLED"
    retried = [job for job in jobs.values() if int(job["JobId"]) > int(cancelled)
               and job["Comment"] == jobs[cancelled]["Comment"] and job["JobState"] == "COMPLETED"]
    assert retried, "the cancelled job was not submitted again"
    assert "Trying to restart job" in output
    store = open_store(root / "results" / "activations" / "tiny" / f"{REMADE_MODEL}.zarr")
    reference = open_store(workflow / "results" / "activations" / "tiny" / f"{REMADE_MODEL}.zarr")
    assert store.attrs["n_examples"] == reference.attrs["n_examples"]
    np.testing.assert_allclose(store["pooled/mean"][:], reference["pooled/mean"][:], rtol=1e-4, atol=1e-4)
    # the interrupted attempt left nothing that could pass for an output
    leftovers = sorted(str(p.relative_to(root)) for p in (root / "results").rglob("*") if ".tmp-" in p.name)
    assert not leftovers, leftovers


@pytest.mark.cluster
def test_jobs_on_a_failed_node_were_retried(cluster_run):
    jobs = slurm_jobs(cluster_run.run_id)
    failed = next(job for job in jobs if job["JobId"] == cluster_run.node_failed)
    assert failed["JobState"] == "NODE_FAIL", failed["line"]
    retried = [job for job in jobs if int(job["JobId"]) > int(failed["JobId"]) and job["Comment"] == failed["Comment"]]
    assert [job["JobState"] for job in retried][-1:] == ["COMPLETED"], "the pair job killed with its node was not rerun"
    assert cluster_run.output.count("Trying to restart job") >= 2  # the cancelled job and the node's


def memory_request_mb(job: dict) -> int:
    """The memory a SLURM job asked for (scontrol's MinMemoryNode: 100M, 4000M, 4G), in MB."""
    value = job["MinMemoryNode"]
    return int(float(value[:-1]) * {"M": 1, "G": 1024, "T": 1024 ** 2}[value[-1]])


@pytest.mark.cluster
def test_jobs_short_of_memory_were_retried_with_their_larger_request(cluster_run):
    """The first attempt of SHORT_OF_MEMORY_RULE asked 100 MB and was killed by SLURM for using more; its retry asked
    the larger amount and completed. No other job exceeded its memory request: the rules' estimates hold."""
    jobs = slurm_jobs(cluster_run.run_id)
    attempts: dict[str, list[dict]] = {}
    for job in jobs:
        if SHORT_OF_MEMORY_RULE in job_rules(job["Comment"])[1]:
            attempts.setdefault(job["Comment"], []).append(job)
    assert len(attempts) == 1, attempts.keys()  # the remade seed's
    for comment, tries in attempts.items():
        first, last = tries[0], tries[-1]
        assert memory_request_mb(first) == 100 and first["JobState"] in ("FAILED", "OUT_OF_MEMORY"), first["line"]
        log = Path(first["StdOut"])
        assert log.exists() and "exceeded memory limit" in log.read_text(), (comment, log)
        assert last["JobState"] == "COMPLETED" and memory_request_mb(last) == 4000 * (len(tries) - 1), last["line"]
    others = [job for job in jobs if job["JobState"] in ("FAILED", "OUT_OF_MEMORY")
              and SHORT_OF_MEMORY_RULE not in job_rules(job["Comment"])[1]]
    assert not others, "jobs failed that should not have: " + "; ".join(
        f"{job['Comment']} ({job['JobState']}, asked {job['MinMemoryNode']}): {job['StdOut']}" for job in others)


def compare_tables(path_a: Path, path_b: Path) -> None:
    a, b = pd.read_parquet(path_a), pd.read_parquet(path_b)
    assert list(a.columns) == list(b.columns) and len(a) == len(b), path_a
    numeric = [c for c in a.columns if pd.api.types.is_numeric_dtype(a[c])]
    keys = [c for c in a.columns if c not in numeric and c != "meta"]
    a, b = a.sort_values(keys + numeric).reset_index(drop=True), b.sort_values(keys + numeric).reset_index(drop=True)
    pd.testing.assert_frame_equal(a[keys], b[keys])
    for column in numeric:
        np.testing.assert_allclose(a[column].to_numpy(float), b[column].to_numpy(float), rtol=1e-5, atol=1e-6,
                                   equal_nan=True, err_msg=f"{path_a}: {column}")


@pytest.mark.cluster
def test_outputs_equal_a_local_run(cluster_run, workflow):
    """The tables and store the cluster run remade equal the local run's: the remade seed's pair tables (with each
    model, and its views' CLS-token pairs), fine-tuning tables and store."""
    root = cluster_run.root
    compared = [p for pattern in ("pairs/**/*.parquet", "finetune/*/*.parquet") for p in written_by(cluster_run, pattern)]
    pair_tables = {p for p in compared if p.parts[1:3] == ("pairs", "mean")
                   and not p.name.endswith(".resamples.parquet")}
    assert len(pair_tables) == 5  # of 15: the seed with each model
    assert {f"finetune/{REMADE_MODEL}/{name}.parquet" for name in ("truncation", "skip", "layer_views")} <= {
        "/".join(p.parts[-3:]) for p in compared}
    for table in compared:
        compare_tables(root / table, workflow / table)
    stores = written_by(cluster_run, "activations/*/*.zarr")
    assert [p.name for p in stores] == [f"{REMADE_MODEL}.zarr"]
    for path in stores:
        store, reference = open_store(root / path), open_store(workflow / path)
        assert store.attrs["device"] == reference.attrs["device"] == "cpu"  # the fake GPU is no CUDA device
        for name in ("pooled/mean", "pooled/cls", "tokens/hidden"):  # float32 activations of O(1)
            np.testing.assert_allclose(store[name][:], reference[name][:], rtol=1e-4, atol=1e-4, err_msg=str(path))
    meta = json.loads((root / "results" / "models" / REMADE_MODEL / "meta.json").read_text())
    assert meta["device"] == "cpu"
    assert (root / "results" / "report" / "index.html").stat().st_size > 10_000


@pytest.mark.cluster
def test_second_invocation_has_nothing_to_do(cluster_run):
    root = cluster_run.root
    before = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout
    result = subprocess.run(cluster_command(root), cwd=root, env=site_environment(), capture_output=True, text=True,
                            timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "Nothing to be done" in output, output[-3000:]
    assert "submitted with SLURM jobid" not in output
    assert subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout == before


def results_snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under results/ but the report's pages and the logs (which the report job rewrites): (size, mtime)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in (root / "results").rglob("*")
            if p.is_file() and p.relative_to(root / "results").parts[0] not in ("report", "logs")}


@pytest.mark.cluster
def test_snakemake_waits_for_a_controller_that_is_down(cluster_run):
    """slurmctld down when Snakemake starts: told to wait 3 s, it stops saying what happened and what to do, having
    submitted and touched nothing; with the default wait it waits, submits once the controller is back, and
    remakes the one missing output, the others untouched."""
    root = cluster_run.root
    missing = root / "results" / "report" / "index.html"
    missing.unlink()
    before = results_snapshot(root)
    assert len(before) > 100
    assert run_script("controller-down", timeout=60).returncode == 0
    try:
        env = {**site_environment(), "REPRSIM_SLURM_WAIT": "3"}
        result = subprocess.run(cluster_command(root), cwd=root, env=env, capture_output=True, text=True, timeout=600)
        output = result.stdout + result.stderr
        assert result.returncode != 0, output[-3000:]
        assert "the SLURM controller did not answer in 3 s" in output and "Nothing was submitted" in output, output[-3000:]
        assert "submitted with SLURM jobid" not in output
        assert results_snapshot(root) == before

        log_path = root / "snakemake-outage.log"
        with open(log_path, "w") as log:
            process = subprocess.Popen(cluster_command(root), cwd=root, env=site_environment(), stdout=log,
                                       stderr=subprocess.STDOUT, text=True)
            deadline = time.monotonic() + 300
            while "waiting up to" not in log_path.read_text():
                assert process.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
                time.sleep(0.5)
            time.sleep(5)
            assert run_script("controller-up", timeout=60).returncode == 0
            process.wait(timeout=600)
    finally:
        run_script("controller-up", timeout=60)
    output = log_path.read_text()
    assert process.returncode == 0, output[-4000:]
    assert re.search(r"the SLURM controller answers after \d+ s; submitting", output), output[-3000:]
    assert missing.stat().st_size > 10_000
    after = results_snapshot(root)
    assert {path: after[path] for path in before} == before  # nothing else remade or removed
