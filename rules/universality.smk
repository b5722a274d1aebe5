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
    return list(dict.fromkeys(named))


# declared whatever the config (a rule no target asks for never runs); its target only with a study
rule universality:
    input:
        pairs=paths.PAIRS,
        replicates=paths.PAIR_RESAMPLES_ALL,
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
