"""`reprsim plan`: what a config will cost, before anything runs.

The jobs are Snakemake's own (reprsim.workflow.dag), priced by the resource model the cluster profile
uses (reprsim.workflow.job_costs on reprsim.workflow.resources) with facts predicted for inputs that do not
exist yet (reprsim.workflow.predicted). Compute time is each job's estimated seconds plus JOB_START_S; a
GPU rule's counts as GPU-hours, any other's as CPU-hours. Disk is what results/ will hold: prepared
datasets, models saved as float32, and activation stores at the extraction dtype.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reprsim.config import detail_splits
from reprsim.workflow import brought, job_costs
from reprsim.workflow import pair_work
from reprsim.workflow import resources as r
from reprsim.workflow.dag import PlannedJob, planned_jobs
from reprsim.workflow.predicted import PredictedFacts, UnknownSize

JOB_START_S = 30  # per job: interpreter, imports, reading inputs, writing outputs
DATASET_BYTES_PER_TOKEN = 30  # a prepared row's parquet bytes per token: text, word spans, label
LIGHT_MINUTES = 10  # runtime per attempt of a rule that declares none: the SLURM profile's default-resources
PROFILE = Path(__file__).resolve().parents[3] / "profiles" / "slurm" / "config.yaml"

STAGES = {  # rule -> the DAG stage it belongs to (docs/architecture.md)
    "fetch_hub": "data", "prepare_dataset": "data", "materialize_model": "models", "pretrain_model": "models",
    "checkpoint_model": "models",
    "finetune_model": "finetune", "truncation": "finetune", "skip": "finetune", "layer_views": "finetune",
    "extract_activations": "extract", "import_activations": "extract", "export_activations": "extract",
    "model_terms": "compare", "compare_pair": "compare", "token_cka": "compare", "compare_attention": "compare",
    "aggregate_pairs": "compare", "aggregate_tokens": "compare", "aggregate_attention": "compare",
    "model_distances": "compare", "localization_scores": "compare",
    "align_layers": "align", "synthetic_recovery": "align", "layer_injection": "align",
    "stitch": "stitch", "aggregate_stitching": "stitch",
    "model_predictions": "grounding", "deletion_probes": "grounding", "measure_tests": "grounding",
    "measure_tests_table": "grounding",
}


@dataclass
class JobCost:
    job: PlannedJob
    mem_mb: int
    seconds: float  # estimated, JOB_START_S included
    priced: bool  # False: a light job (LIGHT_JOB), not in the resource model

    def requested_minutes(self, attempt: int) -> int:
        """The runtime the job asks SLURM for at `attempt`, before the profile caps it at a partition's limit:
        rules/resources.smk for a priced job, the profile's default-resources (LIGHT_MINUTES) for a light one."""
        if self.priced:
            return r.minutes(self.seconds - JOB_START_S, attempt)
        return LIGHT_MINUTES * attempt


@dataclass
class Plan:
    config_path: str
    costs: list[JobCost]
    disk_gb: dict[str, float]
    submission_minutes: float
    dag_seconds: float
    unknown: list[str] = field(default_factory=list)
    time_limits: dict[str, int | None] = field(default_factory=dict)  # partition -> minutes (resources.time_limits)
    attempts: int = 1  # the profile's retries + 1
    environ: Mapping[str, str] = field(default_factory=dict)  # where the partition settings were read
    max_submissions: int | None = None  # cluster.max_submissions: the SLURM submissions a study may make

    def partition(self, cost: JobCost) -> str:
        return r.partition(cost.job.gpu, cost.job.group, self.environ)

    def over_limit(self) -> list[dict]:
        """Each rule with a job whose runtime, at some attempt, asks for more than its partition's time limit:
        rule, partition, limit, jobs (over the limit at the first attempt, and at the last), and the longest
        job's request per attempt. Largest request first."""
        rules: dict[tuple[str, str], list[JobCost]] = defaultdict(list)
        for cost in self.costs:
            if cost.priced or cost.seconds:  # jobs not priced (sizes unknown) ask nothing known
                rules[(cost.job.rule, self.partition(cost))].append(cost)
        found = []
        for (rule, partition), costs in rules.items():
            limit = self.time_limits.get(partition)
            if limit is None:
                continue
            longest = max(costs, key=lambda cost: cost.requested_minutes(1))
            asked = [longest.requested_minutes(attempt) for attempt in range(1, self.attempts + 1)]
            if asked[-1] > limit:
                found.append({"rule": rule, "partition": partition, "limit": limit, "asked": asked, "jobs": len(costs),
                              "first": sum(c.requested_minutes(1) > limit for c in costs),
                              "last": sum(c.requested_minutes(self.attempts) > limit for c in costs)})
        return sorted(found, key=lambda item: (-item["asked"][0], item["rule"]))

    def stage_of(self, cost: JobCost) -> str:
        return STAGES.get(cost.job.rule, "report")

    def per_rule(self) -> dict[str, list[JobCost]]:
        rules: dict[str, list[JobCost]] = defaultdict(list)
        for cost in self.costs:
            rules[cost.job.rule].append(cost)
        return dict(rules)

    def hours(self, gpu: bool) -> dict[str, float]:
        per_stage: Counter = Counter()
        for cost in self.costs:
            if cost.job.gpu == gpu:
                per_stage[self.stage_of(cost)] += cost.seconds / 3600
        return dict(per_stage)

    def largest(self) -> JobCost:
        return max(self.costs, key=lambda cost: cost.mem_mb)

    def group_components(self) -> dict[str, int]:
        """Components per SLURM submission for each profile group of many short jobs (terms, pairs, align): as many
        as fit submission_minutes, at least 1, and no more than fit the group's partition time limit where one is
        given (a group job asks for the sum of its jobs' runtimes at their first attempt). A component is what
        Snakemake batches (--group-components): jobs of the group connected in the DAG, such as a pair job and its
        heatmap; their number is taken as the most jobs of any one rule of the group, and each lasts (and asks for)
        the group's total over that."""
        return {group: n for group, (n, _) in self.group_submissions().items()}

    def group_submissions(self) -> dict[str, tuple[int, float]]:
        """group -> (components per submission, the minutes one submission asks for): group_components' choice,
        raised where the study's submissions would pass max_submissions (:meth:`submissions`)."""
        times: dict[str, float] = defaultdict(float)
        asked: dict[str, float] = defaultdict(float)
        partitions: dict[str, str] = {}
        counts = self.components()
        for cost in self.costs:
            if cost.job.group in BATCHED:
                times[cost.job.group] += cost.seconds
                asked[cost.job.group] += cost.requested_minutes(1)
                partitions.setdefault(cost.job.group, self.partition(cost))
        chosen = {}
        for group in sorted(set(times) & set(BY_TIME)):
            n = max(1, min(counts[group], math.floor(self.submission_minutes * 60 * counts[group] / times[group])))
            limit = self.time_limits.get(partitions[group])
            if limit:
                n = max(1, min(n, math.floor(limit * counts[group] / asked[group])))
            chosen[group] = n
        chosen = self._within_bound(chosen, counts)
        return {group: (n, n * asked[group] / counts[group]) for group, n in chosen.items()}

    def components(self) -> dict[str, int]:
        """group -> its components: what Snakemake batches (--group-components), the jobs of the group connected in
        the DAG (a pair job and its heatmap; one model's GPU jobs), counted as the most jobs of any one rule of it."""
        counts: dict[str, Counter] = defaultdict(Counter)
        for cost in self.costs:
            if cost.job.group is not None:
                counts[cost.job.group][cost.job.rule] += 1
        return {group: max(rules.values()) for group, rules in counts.items()}

    def _within_bound(self, chosen: dict[str, int], counts: dict[str, int]) -> dict[str, int]:
        """`chosen` components per submission, raised so that the submissions stay within max_submissions: the
        submissions left after the jobs that are not batched are shared among the batched groups in proportion to
        what each would make (the GPU group batched too when needed). Where the jobs that cannot be batched alone
        leave no room, `chosen` stays as it is (format_submissions says which rules they are)."""
        if not self.max_submissions or self.submissions(chosen) <= self.max_submissions:
            return chosen
        chosen = {**chosen, **({"gpu": 1} if "gpu" in counts and counts["gpu"] > 1 else {})}
        fixed = self.submissions({group: counts[group] for group in chosen}) - len(chosen)
        budget = self.max_submissions - fixed
        if budget < len(chosen):
            return {group: n for group, n in chosen.items() if group != "gpu" or n > 1}
        made = {group: math.ceil(counts[group] / n) for group, n in chosen.items()}
        for group, n in chosen.items():
            share = max(1, budget * made[group] // sum(made.values()))
            chosen[group] = max(n, math.ceil(counts[group] / share))
        return chosen

    def submissions(self, chosen: dict[str, int] | None = None) -> int:
        """The SLURM submissions the study makes with profiles/slurm: one per job outside the profile's groups, one
        per component of a group without --group-components (a model's GPU jobs, the summary), and the components
        of a batched group `chosen` (default: group_components) per submission."""
        chosen = self.group_components() if chosen is None else chosen
        alone = sum(1 for cost in self.costs if cost.job.group is None)
        return alone + sum(math.ceil(n / chosen.get(group, 1)) for group, n in self.components().items())


BY_TIME = ("terms", "pairs", "align")  # the groups of many short jobs, batched into submission_minutes
BATCHED = (*BY_TIME, "gpu")  # and a model's GPU jobs, batched only to keep within cluster.max_submissions


def profile_groups(profile: Path = PROFILE) -> dict[str, str]:
    """rule -> group of the SLURM profile (its `groups:` mapping; the rest of the file is a YTE template)."""
    import yaml

    text = profile.read_text()
    start = text.index("\ngroups:")
    block = text[start:].split("\ngroup-components:")[0]
    return yaml.safe_load(block)["groups"]


def profile_retries(profile: Path = PROFILE) -> int:
    """The SLURM profile's `retries:` (0 where it sets none)."""
    found = re.search(r"^retries:\s*(\d+)", profile.read_text(), re.MULTILINE)
    return int(found.group(1)) if found else 0


def make_plan(config_path: str | Path, workdir: str | Path, local_rows=None,
              environ: Mapping[str, str] | None = None) -> Plan:
    """Price every job of the workflow for `config_path` (run from `workdir`, where results/ is or will be);
    `local_rows`: how a local dataset's rows are counted (PredictedFacts); `environ`: where the SLURM profile's
    partition settings are read (time limits, REPRSIM_SLURM_PAIRS_ON_GPU), the process's environment if None."""
    from reprsim.config import load_yaml, validate_config

    config = validate_config(load_yaml(config_path))
    started = time.perf_counter()
    jobs = planned_jobs(config_path, workdir, profile_groups())
    dag_seconds = time.perf_counter() - started
    here = os.getcwd()
    os.chdir(workdir)  # the facts of inputs that exist are read where Snakemake would read them
    try:
        facts = PredictedFacts(config, local_rows)
        unknown: list[str] = []
        costs = [_price(job, facts, config, unknown) for job in jobs]
        disk = disk_gb(config, facts, unknown, detail_models(jobs))
        for job in jobs:
            if job.rule == "model_terms":
                try:
                    disk["terms"] = disk.get("terms", 0.0) + job_costs.terms_bytes(facts, config, job.wildcards) / 1e9
                except UnknownSize as error:
                    unknown.append(str(error))
    finally:
        os.chdir(here)
    environ = dict(os.environ if environ is None else environ)
    return Plan(str(config_path), costs, disk, config["cluster"]["submission_minutes"], dag_seconds,
                sorted(set(unknown)), r.time_limits(environ), 1 + profile_retries(), environ,
                config["cluster"]["max_submissions"])


def _price(job: PlannedJob, facts: PredictedFacts, config: Mapping, unknown: list[str]) -> JobCost:
    if job.rule not in job_costs.COSTS:
        return JobCost(job, job_costs.LIGHT_JOB["mem_mb"], JOB_START_S + job_costs.LIGHT_JOB["seconds"], False)
    mem_mb, seconds = job_costs.COSTS[job.rule]
    try:
        return JobCost(job, mem_mb(facts, config, job.wildcards, 1), JOB_START_S + seconds(facts, config, job.wildcards),
                       True)
    except UnknownSize as error:
        unknown.append(str(error))
        return JobCost(job, 0, 0.0, False)


def detail_models(jobs: list[PlannedJob]) -> set[str]:
    """The models some job reads word rows or attention maps of (word-level pair jobs and their terms, attention
    pair jobs): only their stores hold extraction.detail_splits (rules/common.smk, DETAIL_MODELS)."""
    readers = set()
    for job in jobs:
        if job.rule == "compare_attention" or (job.rule in ("compare_pair", "model_terms")
                                               and job.wildcards.get("representation") == "word"):
            readers.update(job.wildcards[key] for key in ("model", "model_a", "model_b") if key in job.wildcards)
            readers.update(model for pair in job.wildcards.get("pairs", []) for model in pair)
    return readers


def disk_gb(config: Mapping, facts: PredictedFacts, unknown: list[str], detail_readers: set[str]) -> dict[str, float]:
    """GB under results/ per kind of output (module docstring); the detail splits in `detail_readers`' stores."""
    extraction, gb = config["extraction"], Counter()
    itemsize = 2 if extraction["dtype"] == "float16" else 4
    detail = detail_splits(extraction, config["similarity"])
    for dataset in config["datasets"]:
        try:
            rows = sum(facts.dataset_sizes(dataset).values())
            gb["datasets"] += rows * facts.tokens_per_row(dataset) * DATASET_BYTES_PER_TOKEN / 1e9
        except UnknownSize as error:
            unknown.append(str(error))
    for model, spec in config["models"].items():
        if brought.is_brought(spec):  # no model directory
            continue
        # a pretrained model's directory also holds its checkpoints, which are copied out as models too
        copies = 1 + len(spec.get("checkpoints") or []) if spec["source"] == "pretrain" else 1
        try:
            gb["models"] += copies * 4 * facts.model(model)["n_parameters"] / 1e9
        except UnknownSize as error:
            unknown.append(str(error))
    for dataset in extraction["datasets"]:
        for model in brought.with_store(config["models"], config["models"], dataset):
            try:
                if brought.is_brought(config["models"][model]):  # one pooled array, float32 taken
                    store = facts.store(dataset, model)
                    gb["stores"] += store["n_examples"] * (store["n_layers"] + 1) * store["hidden_size"] * 4 / 1e9
                    continue
                gb["stores"] += store_bytes(facts.store(dataset, model), min(facts.tokens_per_row(dataset),
                                                                             extraction["max_length"]),
                                            extraction, detail if model in detail_readers else [], itemsize) / 1e9
            except UnknownSize as error:
                unknown.append(str(error))
    return dict(gb)


def store_bytes(store: Mapping, tokens_per_row: float, extraction: Mapping, detail: list[str], itemsize: int) -> float:
    """Hidden states of every layer: pooled rows, every token (with tokens: true), and the words of the detail
    splits (about tokens / 1.3); float16 attention maps when asked, heads taken as hidden_size / 64."""
    width, layers, rows = store["hidden_size"], store["n_layers"] + 1, store["n_examples"]
    vectors = len(extraction["poolings"]) * rows
    if extraction["tokens"]:
        vectors += rows * tokens_per_row
    detail_rows = sum(store["split_sizes"].get(split, 0) for split in detail)
    vectors += detail_rows * tokens_per_row / 1.3
    total = vectors * layers * width * itemsize
    if extraction.get("attention") and detail_rows:
        heads = max(1, width // 64)
        total += 2 * store["n_layers"] * heads * detail_rows * (tokens_per_row ** 2 + (tokens_per_row / 1.3) ** 2)
    return total


# ----------------------------------------------------------------- printing
def _hours(value: float) -> str:
    return f"{value:,.1f}" if value >= 0.1 else f"{value:.2f}"


def format_plan(plan: Plan) -> str:
    rules = plan.per_rule()
    lines = [f"reprsim plan {plan.config_path}: {len(plan.costs):,} jobs "
             f"(DAG built in {plan.dag_seconds:.1f} s; nothing was run)", "",
             f"{'rule':<24}{'jobs':>7}  {'device':<6}{'hours':>10}{'largest mem':>13}"]
    for rule, costs in sorted(rules.items(), key=lambda item: (-sum(c.seconds for c in item[1]), item[0])):
        device = "GPU" if costs[0].job.gpu else "CPU"
        hours = sum(c.seconds for c in costs) / 3600
        memory = max(c.mem_mb for c in costs)
        lines.append(f"{rule:<24}{len(costs):>7,}  {device:<6}{_hours(hours):>10}{memory / 1000:>10.1f} GB"
                     + ("" if costs[0].priced else "  (light: start-up only)"))
    lines += ["", "compute per stage (hours; estimated compute + "
              f"{JOB_START_S} s start-up per job):", f"{'stage':<12}{'GPU-hours':>11}{'CPU-hours':>11}"]
    gpu, cpu = plan.hours(True), plan.hours(False)
    for stage in sorted(set(gpu) | set(cpu)):
        lines.append(f"{stage:<12}{_hours(gpu.get(stage, 0)):>11}{_hours(cpu.get(stage, 0)):>11}")
    lines.append(f"{'total':<12}{_hours(sum(gpu.values())):>11}{_hours(sum(cpu.values())):>11}")
    lines += ["", "disk under results/ (GB): " + ", ".join(f"{kind} {value:,.1f}" for kind, value in
                                                          sorted(plan.disk_gb.items()))
              + f"; total {sum(plan.disk_gb.values()):,.1f} (plus the hub cache's copy of downloads)"]
    largest = plan.largest()
    where = ", ".join(f"{len(v)} model pairs" if k == "pairs" else f"{k}={v}" for k, v in largest.job.wildcards.items())
    lines.append(f"largest single job: {largest.job.rule} ({where}): {largest.mem_mb / 1000:.1f} GB memory")
    submissions = plan.group_submissions()
    if submissions:
        flags = " ".join(f"{group}={n}" for group, (n, _) in submissions.items())
        limited = any(plan.time_limits.values())
        asks = ", ".join(f"{group} {minutes:,.0f} min" for group, (_, minutes) in submissions.items())
        lines += ["", f"cluster batching: submissions of about {plan.submission_minutes:g} min of estimated work "
                  "(cluster.submission_minutes)" + (", within the partitions' time limits" if limited else "") + ":",
                  f"  snakemake --workflow-profile profiles/slurm --configfile {plan.config_path} "
                  f"--group-components {flags}",
                  f"  a submission asks for the sum of its jobs' runtimes (each its estimate plus {r.MIN_MINUTES} min, "
                  f"a light job {LIGHT_MINUTES} min): {asks}"]
    lines += [""] + format_submissions(plan)
    lines += [""] + format_time_limits(plan)
    lines += ["", f"rates: a model job sustains {r.MODEL_FLOPS:.0e} FLOP/s on one GPU (assumed); a pair job's "
              f"measures and model terms cost their floor at {pair_work.CORE_FLOPS:.1e} FLOP/s and "
              f"{pair_work.CORE_BANDWIDTH:.1e} B/s per core (float64, measured by benchmarks/pair_floor.py) times "
              "the achieved/floor ratio measured there (reprsim.workflow.pair_work); on a GPU (similarity.device: "
              f"cuda) {pair_work.GPU_DRAW_SECONDS * 1e3:.2f} ms per draw and layer pair plus that estimate / "
              f"{pair_work.GPU_SPEEDUP:.0f} (fitted to {pair_work.GPU_MEASURED['device']}, "
              f"{pair_work.GPU_MEASURED['date']}; benchmarks/pair_devices.py refits them)"]
    if plan.unknown:
        lines += ["", "not priced (sizes unknown offline; their jobs count 0):"] + [f"  {u}" for u in plan.unknown]
    return "\n".join(lines)


def format_submissions(plan: Plan) -> list[str]:
    """The SLURM submissions the study makes with profiles/slurm (and the flags above), against the bound."""
    count = plan.submissions()
    line = f"cluster submissions with profiles/slurm: {count:,} for {len(plan.costs):,} jobs"
    bound = plan.max_submissions
    if not bound:
        return [line + " (no bound: cluster.max_submissions is null)"]
    if count <= bound:
        return [line + f", within cluster.max_submissions ({bound:,})"]
    alone = Counter(cost.job.rule for cost in plan.costs if cost.job.group is None)
    largest = ", ".join(f"{rule} {n:,}" for rule, n in alone.most_common(3))
    return [line + f", more than cluster.max_submissions ({bound:,}), which batching cannot meet: the jobs outside "
            f"the profile's groups are one submission each ({largest}, ...); raise the bound, or add their rules to a "
            "group of the profile"]


def format_time_limits(plan: Plan) -> list[str]:
    """The partition time limits and the rules whose jobs ask for more (Plan.over_limit), with what to do."""
    variables = r.TIME_LIMIT_VARIABLES
    if not any(plan.time_limits.get(partition) for partition in variables):
        longest = max(plan.costs, key=lambda cost: cost.requested_minutes(1), default=None)
        if longest is None:
            return []
        asked = longest.requested_minutes(1)
        return [f"partition time limits: none given (export {variables['gpu']} and {variables['cpu']}, in minutes "
                f"or as sinfo prints them, to check the jobs against them); the longest job asks for {asked:,} min "
                f"({asked / 60:.1f} h): {longest.job.rule}, {plan.partition(longest)} partition"]
    given = ", ".join(f"{partition} {limit:,} min" if limit else f"{partition} none"
                      for partition, limit in sorted(plan.time_limits.items(), reverse=True))
    over = plan.over_limit()
    where = f"partition time limits: {given} ({variables['gpu']}, {variables['cpu']})"
    if not over:
        return [f"{where}: every job fits, retries included"]
    lines = [f"{where}; rules whose jobs ask for more ({plan.attempts - 1} retries, each asking for more; the "
             "profile caps every request at the limit):"]
    for item in over:
        asked = ", ".join(f"{value:,}" for value in item["asked"])
        hours = ", ".join(f"{value / 60:.1f}" for value in item["asked"])
        lines.append(f"  {item['rule']} ({item['partition']}, limit {item['limit']:,} min): {item['jobs']:,} jobs; "
                     f"the longest asks for {asked} min ({hours} h) at attempts 1 to {plan.attempts}; "
                     f"over the limit: {item['first']:,} at the first attempt, {item['last']:,} at the last")
    if any(item["first"] for item in over):
        lines.append("  over at the first attempt: such a job is stopped at the limit unless the estimate is generous. "
                     "Lower its work (fewer training steps or examples), split it into smaller jobs, ask for a "
                     "higher limit, or send it to a partition with a longer one (REPRSIM_SLURM_GPU_PARTITION or "
                     "REPRSIM_SLURM_CPU_PARTITION, and its limit)")
    if any(item["last"] and not item["first"] for item in over):
        lines.append("  over only on retry: a job that runs out of time gets the limit, not more, on its retries; "
                     "enough while the first attempt's estimate holds")
    return lines
