# Job resources: memory (mem_mb, MB) and wall time (runtime, minutes) of the heavy rules, estimated
# from what a job processes -- model parameters, examples, tokens, read from its inputs' meta.json or
# Zarr attributes -- and multiplied by `attempt`, so each retry (--retries) asks for more. Until an
# input exists (a dry run of a fresh workflow) Snakemake shows <TBD>, and evaluates again when
# the job is ready. Locally they bind only under --resources mem_mb=N; on SLURM they become
# --mem and --time. GPU rules declare gpu=1 beside these; where GPU jobs run (partition) is
# the cluster profile's business: profiles/slurm/config.yaml, whose set-resources lists them.
#
# The formulas are pure functions in reprsim.workflow.resources, applied to a job by
# reprsim.workflow.job_costs (both unit-tested; `reprsim plan` asks the same with predicted facts);
# here are only the adapters Snakemake calls, (wildcards, input, attempt). The facts come from the
# inputs' files (reprsim.workflow.facts): one not produced yet names itself, and Snakemake shows <TBD>.
#
# runtime is capped at the time limit of the partition the SLURM profile sends the job to
# (REPRSIM_SLURM_GPU_TIME_LIMIT, REPRSIM_SLURM_CPU_TIME_LIMIT): a retry, which asks for more, would
# otherwise ask more than the partition allows, and SLURM refuses such a job. `reprsim plan` lists the
# rules whose estimates exceed the limit.
import os

from reprsim.workflow import job_costs
from reprsim.workflow import resources as job_resources
from reprsim.workflow.facts import FileFacts

FACTS = FileFacts(config)
TIME_LIMITS = job_resources.time_limits(os.environ)


def _job(rule, wildcards):
    """What job_costs prices a job by: its wildcards, and a pair job's model pairs (rules/compare.smk)."""
    job = dict(wildcards.items())
    if rule == "compare_pair":
        job["pairs"] = json.loads(block_pairs(wildcards))
    return job


def _mem_mb(rule):
    def mem_mb(wildcards, input, attempt):  # `input`: Snakemake reads a missing input's error as <TBD>
        return job_costs.COSTS[rule][0](FACTS, config, _job(rule, wildcards), attempt)

    return mem_mb


def _runtime(rule, gpu, group=None):
    """`gpu`, `group`: the rule's resources.gpu and profile group, which decide its partition there."""
    limit = TIME_LIMITS[job_resources.partition(gpu, group, os.environ)]

    def runtime(wildcards, input, attempt):
        seconds = job_costs.COSTS[rule][1](FACTS, config, _job(rule, wildcards))
        return job_resources.capped_minutes(seconds, attempt, limit)

    return runtime


extract_mem_mb, extract_runtime = _mem_mb("extract_activations"), _runtime("extract_activations", True)
finetune_mem_mb, finetune_runtime = _mem_mb("finetune_model"), _runtime("finetune_model", True)
pretrain_mem_mb, pretrain_runtime = _mem_mb("pretrain_model"), _runtime("pretrain_model", True)
evaluation_mem_mb = _mem_mb("truncation")
truncation_runtime, skip_runtime = _runtime("truncation", True), _runtime("skip", True)
compare_mem_mb, compare_runtime = _mem_mb("compare_pair"), _runtime("compare_pair", False, "pairs")
terms_mem_mb, terms_runtime = _mem_mb("model_terms"), _runtime("model_terms", False, "terms")
measure_tests_mem_mb, measure_tests_runtime = _mem_mb("measure_tests"), _runtime("measure_tests", False)
token_cka_mem_mb = _mem_mb("token_cka")
align_mem_mb, align_runtime = _mem_mb("align_layers"), _runtime("align_layers", True)
stitch_mem_mb, stitch_runtime = _mem_mb("stitch"), _runtime("stitch", True)
function_stitch_mem_mb, function_stitch_runtime = _mem_mb("function_stitch"), _runtime("function_stitch", True)
