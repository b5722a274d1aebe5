# Stage stitch: model stitching (Bansal et al. 2021; Brown et al. 2023). One GPU job per bottom model f,
# top model g and dataset (f into g, g into f, and each model into itself: the self-stitch baseline
# that the cross jobs read), then all jobs' tables in one.
from reprsim.workflow.stitching import stitch_jobs

STITCH = config["stitching"]
STITCH_JOBS = stitch_jobs(config)
STITCH_OBJECTIVE = {(job.dataset, job.bottom, job.top): job.objective for job in STITCH_JOBS}
# each unordered pair of distinct models once, for its figure
STITCH_PAIRS = sorted({(job.dataset, *sorted((job.bottom, job.top))) for job in STITCH_JOBS if job.bottom != job.top})


def per_stitch_job(template):
    return [template.format(dataset=job.dataset, model_a=job.bottom, model_b=job.top) for job in STITCH_JOBS]


def stitch_inputs(wildcards):
    """Both models, the dataset, and (for f into another model) f's self-stitch table: the baseline."""
    inputs = {"bottom": model_dir(wildcards.model_a), "top": model_dir(wildcards.model_b),
              "dataset": dataset_dir(wildcards.dataset)}
    if wildcards.model_a != wildcards.model_b:
        inputs["self_table"] = paths.STITCH_TABLE.format(dataset=wildcards.dataset, model_a=wildcards.model_a,
                                                         model_b=wildcards.model_a)
    return inputs


def stitch_settings(wildcards):
    settings = {key: STITCH[key] for key in ("layers", "phi", "steps", "batch_size", "optimizer", "split",
                                             "max_examples", "max_length", "context", "seeds", "init_tokens", "heldout",
                                             "chance_permutations")}
    settings["objective"] = STITCH_OBJECTIVE[(wildcards.dataset, wildcards.model_a, wildcards.model_b)]
    if wildcards.model_a == wildcards.model_b:
        settings["layers"] = "matching"  # the baseline: f into itself at the same layer
    return canonical(settings)


# memory and wall time: rules/resources.smk (reprsim.workflow.job_costs)
rule stitch:
    input:
        unpack(stitch_inputs),
        code=code("stitch"),
    output:
        table=paths.STITCH_TABLE,
        replicates=paths.STITCH_RESAMPLES,
    log:
        paths.log(paths.STITCH_TABLE),
    params:
        settings=stitch_settings,
        intervals=canonical(config["similarity"]["intervals"]),
        device=config["device"],
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=stitch_mem_mb,
        runtime=stitch_runtime,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/stitch.py"


rule aggregate_stitching:
    input:
        table=per_stitch_job(paths.STITCH_TABLE),
        replicates=per_stitch_job(paths.STITCH_RESAMPLES),
        code=code("concat_tables"),
    output:
        table=paths.STITCHING,
        replicates=paths.STITCHING_RESAMPLES,
    log:
        paths.log(paths.STITCHING),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/concat_tables.py"


TARGETS["stitching"] = [paths.STITCHING] if STITCH_JOBS else []
# the replicates (the report's asymmetry intervals), a penalty figure per unordered pair of distinct models, and the
# identity-stitching-beside-CKA summary per dataset (rules/report.smk draws them)
TARGETS["stitching_replicates"] = [paths.STITCHING_RESAMPLES] if STITCH_JOBS else []
TARGETS["stitch_figures"] = [paths.STITCH_FIGURE.format(dataset=d, model_a=a, model_b=b) for d, a, b in STITCH_PAIRS]
TARGETS["stitching_figures"] = [paths.STITCHING_FIGURE.format(dataset=d) for d in sorted({j.dataset for j in STITCH_JOBS})]
