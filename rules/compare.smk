# Stage compare: one job per unordered model pair (and each model with itself), all layer pairs
# inside; then the pair tables in one, and the summaries over all pairs.


rule compare_pair:
    input:
        a=lambda wildcards: store(wildcards.dataset, wildcards.model_a),
        b=lambda wildcards: store(wildcards.dataset, wildcards.model_b),
        code=code("compare_pair"),
    output:
        table=paths.PAIR_TABLE,
        replicates=paths.PAIR_RESAMPLES,
    log:
        paths.log(paths.PAIR_TABLE),
    params:
        split=config["similarity"]["split"],
        measures=canonical(config["measures"]),
        chance=canonical(config["similarity"]["chance"]),
        intervals=canonical(config["similarity"]["intervals"]),
    threads: 1
    resources:
        mem_mb=compare_mem_mb,
        runtime=compare_runtime,
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/compare_pair.py"


rule aggregate_pairs:
    input:
        tables=per_pair(paths.PAIR_TABLE, REPRESENTATIONS, EXTRACT_ON, PAIRS),
        replicates=per_pair(paths.PAIR_RESAMPLES, REPRESENTATIONS, EXTRACT_ON, PAIRS),
        code=code("aggregate_pairs"),
    output:
        table=paths.PAIRS,
        replicates=paths.PAIR_RESAMPLES_ALL,
        summary=paths.PAIR_SUMMARY,
    log:
        paths.log(paths.PAIRS),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/aggregate_pairs.py"


rule model_distances:
    input:
        table=paths.PAIRS,
        replicates=paths.PAIR_RESAMPLES_ALL,
        code=code("model_distances"),
    output:
        table=paths.MODEL_DISTANCES,
    log:
        paths.log(paths.MODEL_DISTANCES),
    params:
        label=config["report"]["distance_measure"],
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/model_distances.py"


rule localization_scores:
    input:
        table=paths.PAIRS,
        code=code("localization_scores"),
    output:
        table=paths.LOCALIZATION,
    log:
        paths.log(paths.LOCALIZATION),
    params:
        neuronsim=first_label(config["measures"], "neuronsim"),
        svcca=first_label(config["measures"], "svcca"),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/localization_scores.py"
