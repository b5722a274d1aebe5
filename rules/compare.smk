# Stage compare: one job per pair of blocks of models (similarity.block_size; with blocks of one, per unordered
# model pair and each model with itself), every layer pair of its model pairs inside; then the pair tables in one,
# and the summaries over all pairs.
from reprsim.workflow import measures as workflow_measures


def pair_measures(representation):
    """reprsim.workflow.measures.pair_measures for this config."""
    return workflow_measures.pair_measures(config, representation)


# Pair jobs on a GPU (similarity.device: cuda) ask for one, and only then: on SLURM, profiles/slurm routes
# compare_pair to the GPU partition with one GPU when REPRSIM_SLURM_PAIRS_ON_GPU is set (which `auto` uses too).
PAIR_GPU = {"gpu": 1} if config["similarity"]["device"] == "cuda" else {}


def terms_params(representation):
    """What a model's terms (and its pair jobs' half-samples) depend on: the representation's measures, the
    interval settings, and at word level which words."""
    return {"measures": canonical(pair_measures(representation)),
            "words": canonical(config["similarity"]["word"] if representation == "word" else None),
            "intervals": canonical(config["similarity"]["intervals"])}


# One model's share of every pair job it is in (Gram terms, principal directions, neighbour lists), computed once.
rule model_terms:
    input:
        store=lambda wildcards: store(wildcards.dataset, wildcards.model),
        code=code("model_terms"),
    output:
        terms=directory(paths.MODEL_TERMS),
    log:
        paths.log(paths.MODEL_TERMS),
    params:
        split=config["similarity"]["split"],
        measures=lambda wildcards: terms_params(wildcards.representation)["measures"],
        words=lambda wildcards: terms_params(wildcards.representation)["words"],
        intervals=lambda wildcards: terms_params(wildcards.representation)["intervals"],
    threads: 1
    resources:
        mem_mb=terms_mem_mb,
        runtime=terms_runtime,
        **PAIR_GPU,
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/model_terms.py"


def block_models(wildcards):
    """The models a pair job reads (its model pairs' models, each once)."""
    return pair_blocks_of(wildcards.representation, wildcards.dataset).models(wildcards.block_a, wildcards.block_b)


def block_pairs(wildcards):
    """The model pairs a pair job computes, as JSON (a pair of blocks: reprsim.workflow.pair_blocks)."""
    return canonical(pair_blocks_of(wildcards.representation, wildcards.dataset).pairs[(wildcards.block_a,
                                                                                         wildcards.block_b)])


rule compare_pair:
    input:
        stores=lambda wildcards: [store(wildcards.dataset, m) for m in block_models(wildcards)],
        terms=lambda wildcards: [paths.MODEL_TERMS.format(**{**wildcards, "model": m}) for m in block_models(wildcards)],
        code=code("compare_pair"),
    output:
        table=paths.PAIR_TABLE,
        replicates=paths.PAIR_RESAMPLES,
    log:
        paths.log(paths.PAIR_TABLE),
    params:
        pairs=block_pairs,
        models=block_models,
        split=config["similarity"]["split"],
        measures=lambda wildcards: canonical(pair_measures(wildcards.representation)),
        words=lambda wildcards: canonical(config["similarity"]["word"] if wildcards.representation == "word" else None),
        chance=canonical(config["similarity"]["chance"]),
        intervals=canonical(config["similarity"]["intervals"]),
    threads: 1
    resources:
        mem_mb=compare_mem_mb,
        runtime=compare_runtime,
        **PAIR_GPU,
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/compare_pair.py"


rule aggregate_pairs:
    input:
        tables=per_compared_pair(paths.PAIR_TABLE),
        replicates=per_compared_pair(paths.PAIR_RESAMPLES),
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


# Token-level minibatch CKA (similarity.tokens; Brown et al. 2023): one job per configured model pair and
# extracted dataset, over the tokens of the similarity split, with its chance level (batch-shifted pairings)
# and interval (half-samples of batches). Models that tokenise differently are refused by the job.
rule token_cka:
    input:
        a=lambda wildcards: store(wildcards.dataset, wildcards.model_a),
        b=lambda wildcards: store(wildcards.dataset, wildcards.model_b),
        code=code("token_cka"),
    output:
        table=paths.TOKEN_TABLE,
    log:
        paths.log(paths.TOKEN_TABLE),
    params:
        split=config["similarity"]["split"],
        tokens=canonical({key: value for key, value in (config["similarity"].get("tokens") or {}).items()
                          if key != "pairs"}),
        intervals=canonical(config["similarity"]["intervals"]),
    threads: 1
    resources:
        mem_mb=token_cka_mem_mb,
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/token_cka.py"


rule aggregate_tokens:
    input:
        table=TOKEN_TABLES,
        code=code("concat_tables"),
    output:
        table=paths.TOKEN_TABLES,
    log:
        paths.log(paths.TOKEN_TABLES),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/concat_tables.py"


# Attention similarity (Wu et al. 2020): one job per configured model pair and dataset, every attention
# measure for every pair of layers, read layer by layer from the stores' attention maps.
rule compare_attention:
    input:
        a=lambda wildcards: store(wildcards.dataset, wildcards.model_a),
        b=lambda wildcards: store(wildcards.dataset, wildcards.model_b),
        code=code("compare_attention"),
    output:
        table=paths.ATTENTION_TABLE,
        replicates=paths.ATTENTION_RESAMPLES,
        heads=paths.ATTENTION_HEADS,
    log:
        paths.log(paths.ATTENTION_TABLE),
    params:
        split=config["similarity"]["split"],
        settings=canonical(ATTENTION_SETTINGS),
        intervals=canonical(config["similarity"]["intervals"]),
        seed=config["similarity"]["chance"]["seed"],
    threads: 1
    resources:
        mem_mb=lambda wildcards, attempt: 3000 * attempt,
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/compare_attention.py"


rule aggregate_attention:
    input:
        table=per_attention_pair(paths.ATTENTION_TABLE),
        replicates=per_attention_pair(paths.ATTENTION_RESAMPLES),
        heads=per_attention_pair(paths.ATTENTION_HEADS),
        code=code("concat_tables"),
    output:
        table=paths.ATTENTION,
        replicates=paths.ATTENTION_RESAMPLES_ALL,
        heads=paths.ATTENTION_HEADS_ALL,
    log:
        paths.log(paths.ATTENTION),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/concat_tables.py"
