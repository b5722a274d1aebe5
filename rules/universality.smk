# Stage universality: what survives a change of one factor (config `universality`): each factor level's share of
# the similarity the reference's seed siblings share, per measure and depth, with intervals and verdicts, beside
# each model's quality; the same per sense of similarity; each artefact control's verdicts beside its twin's;
# cross-seed similarity over training time; the statement (docs/numerics.md §13c).

STUDY = config.get("universality")
STUDY_DATASET = (STUDY or {}).get("dataset") or EXTRACT_ON[0]
STUDY_REPRESENTATION = (STUDY or {}).get("representation") or next(
    (r for r in config["similarity"]["representations"] if r in ("mean", "cls", "last")), "mean")


def study_models():
    """Every model the study names, each once; none without a study."""
    if STUDY is None:
        return []
    named = [*STUDY["reference"], *STUDY["floor"]]
    named += [m for levels in STUDY["factors"].values() for models in levels.values() for m in models]
    # each level's checkpoints, the candidates for comparing it at the reference's competence
    named += [m for steps in competence_checkpoints(config["models"], STUDY).values()
              for models in steps.values() for m in models]
    return list(dict.fromkeys(named))


PLACEBOS = {placebo.job: placebo for placebo in dimension_placebos(config["models"], STUDY or {})}
# the functional sense (universality.function): each stitch job bottom model -> reference model, and the levels left
# out with the reason (reprsim.workflow.stitching.function_plan)
FUNCTION = function_plan(config, STUDY_DATASET, [p.level for p in PLACEBOS.values()])
FUNCTION_MODELS = sorted({name for job in FUNCTION.jobs for name in (job.bottom, job.top)})


def per_function_job(template):
    return [template.format(dataset=job.dataset, model_a=job.bottom, model_b=job.top) for job in FUNCTION.jobs]


# competence on one yardstick where the study's dataset is labelled: every study model probed (floor included)
PROBED_FOR_COMPETENCE = (study_models() if STUDY is not None and STUDY_DATASET in config["datasets"]
                         and dataset_is_labelled(config["datasets"][STUDY_DATASET]) else [])


# a linear probe of the dataset's labels on every layer of one study model, nested-cross-validated on the compared
# rows (reprsim.stages.grounding.competence): the study's shared yardstick of competence
rule competence_probe:
    input:
        store=lambda wildcards: store(wildcards.dataset, wildcards.model),
        dataset=lambda wildcards: dataset_dir(wildcards.dataset),
        code=code("competence_probe"),
    output:
        table=paths.COMPETENCE,
    log:
        paths.log(paths.COMPETENCE),
    wildcard_constraints:
        model=_one_of(PROBED_FOR_COMPETENCE),
    params:
        representation=STUDY_REPRESENTATION,
        split=config["similarity"]["split"],
        confidence=config["similarity"]["intervals"]["confidence"],
        seed=config["similarity"]["intervals"]["seed"],
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/competence_probe.py"


# the dimension placebo (universality.dimension_placebo): every reference seed reduced to a narrower width level's
# width by one method, each against the other reference seeds, one job per method and width
rule dimension_placebo:
    input:
        stores=[store(STUDY_DATASET, m) for m in (STUDY or {}).get("reference", [])],
        terms=[paths.MODEL_TERMS.format(representation=STUDY_REPRESENTATION, dataset=STUDY_DATASET, model=m)
               for m in (STUDY or {}).get("reference", [])],
        code=code("dimension_placebo"),
    output:
        table=paths.DIMENSION_PLACEBO,
        replicates=paths.DIMENSION_PLACEBO_RESAMPLES,
    log:
        paths.log(paths.DIMENSION_PLACEBO),
    wildcard_constraints:
        placebo=_one_of(PLACEBOS),
    params:
        reduce=lambda wildcards: canonical({"method": PLACEBOS[wildcards.placebo].method,
                                            "dims": PLACEBOS[wildcards.placebo].dims,
                                            "seed": STUDY["dimension_placebo"]["seed"],
                                            "names": PLACEBOS[wildcards.placebo].names}),
        reference=json.dumps((STUDY or {}).get("reference", [])),  # in the inputs' order (canonical JSON sorts keys)
        specs=canonical({m: config["models"][m] for m in (STUDY or {}).get("reference", [])}),
        representation=STUDY_REPRESENTATION,
        split=config["similarity"]["split"],
        measures=canonical(pair_measures(STUDY_REPRESENTATION)),
        chance=canonical(config["similarity"]["chance"]),
        intervals=canonical(config["similarity"]["intervals"]),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/dimension_placebo.py"


# the functional sense: one model's layers stitched into a reference model's (scripts/stitch.py, as the stitching
# stage's jobs), scored on the study's compared split
rule function_stitch:
    input:
        bottom=lambda wildcards: model_dir(wildcards.model_a),
        top=lambda wildcards: model_dir(wildcards.model_b),
        dataset=lambda wildcards: dataset_dir(wildcards.dataset),
        code=code("stitch"),
    output:
        table=paths.FUNCTION_STITCH,
        replicates=paths.FUNCTION_STITCH_RESAMPLES,
    log:
        paths.log(paths.FUNCTION_STITCH),
    wildcard_constraints:
        dataset=_one_of([STUDY_DATASET]),
        model_a=_one_of(FUNCTION_MODELS),
        model_b=_one_of(FUNCTION_MODELS),
    params:
        settings=canonical(function_settings(config)) if FUNCTION.jobs else "",
        intervals=canonical(config["similarity"]["intervals"]),
        device=config["device"],
    threads: JOB_THREADS
    resources:
        gpu=1,
        mem_mb=function_stitch_mem_mb,
        runtime=function_stitch_runtime,
    conda:
        "../envs/finetune.yaml"
    script:
        "../scripts/stitch.py"


# declared whatever the config (a rule no target asks for never runs); its target only with a study
rule universality:
    input:
        pairs=paths.PAIRS,
        replicates=paths.PAIR_RESAMPLES_ALL,
        placebos=[paths.DIMENSION_PLACEBO.format(placebo=p) for p in PLACEBOS],
        placebo_replicates=[paths.DIMENSION_PLACEBO_RESAMPLES.format(placebo=p) for p in PLACEBOS],
        competence=[paths.COMPETENCE.format(dataset=STUDY_DATASET, model=m) for m in PROBED_FOR_COMPETENCE],
        function=per_function_job(paths.FUNCTION_STITCH),
        function_replicates=per_function_job(paths.FUNCTION_STITCH_RESAMPLES),
        models=[model_dir(m) for m in study_models()],  # each model's quality (meta.json)
        measure_tests=TARGETS["measure_tests"],  # measures that failed a grounding test leave the headline
        code=code("universality"),
    output:
        table=paths.UNIVERSALITY,
        senses=paths.UNIVERSALITY_SENSES,
        controls=paths.UNIVERSALITY_CONTROLS,
        convergence=paths.UNIVERSALITY_CONVERGENCE,
        claims=paths.UNIVERSALITY_CLAIMS,
        statement=paths.UNIVERSALITY_STATEMENT,
    log:
        paths.log(paths.UNIVERSALITY),
    params:
        study=canonical(STUDY),
        # the factors and levels in the configuration's order (canonical JSON sorts them): the statement's order
        levels=json.dumps([[factor, list(levels)] for factor, levels in ((STUDY or {}).get("factors") or {}).items()]),
        models=canonical({m: config["models"][m] for m in study_models()}),
        measures=canonical({label: spec["measure"] for label, spec in config["measures"].items()}),
        params=canonical({label: spec.get("params") or {} for label, spec in config["measures"].items()}),
        # the measures on conditioned features: artefact controls, each read against its twin
        conditionings=canonical({label: spec["conditioning"] for label, spec in config["measures"].items()
                                 if spec.get("conditioning") not in (None, "none")}),
        confidence=config["similarity"]["intervals"]["confidence"],
        seed=config["similarity"]["intervals"]["seed"],
        dataset=STUDY_DATASET,
        representation=STUDY_REPRESENTATION,
        # each dimension placebo's level label and its reduced copies' names (seed -> name), in the study's order
        placebos=json.dumps([[p.level, p.names] for p in PLACEBOS.values()]),
        # the functional sense's levels left out ("factor/level" -> why), when the study stitches
        function_left_out=canonical(FUNCTION.left_out),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/universality.py"


TARGETS["universality"] = [paths.UNIVERSALITY] if STUDY is not None else []
TARGETS["universality_statement"] = [paths.UNIVERSALITY_STATEMENT] if STUDY is not None else []
TARGETS["universality_senses"] = [paths.UNIVERSALITY_SENSES] if STUDY is not None else []
TARGETS["universality_controls"] = [paths.UNIVERSALITY_CONTROLS] if STUDY is not None else []
TARGETS["universality_convergence"] = (
    [paths.UNIVERSALITY_CONVERGENCE, paths.UNIVERSALITY_CLAIMS]
    if STUDY is not None and "training_time" in STUDY["factors"] else [])
