# Stage findings: the seed papers' claims tested on the tables this configuration produces, each
# with its interval and a verdict from the interval (docs/numerics.md, Findings).


def findings_measure():
    """The CKA label the layer claims read: report.distance_measure (the config check requires a cka
    measure there) when it is configured, else the first cka label; "" when there is none."""
    label = config["report"]["distance_measure"]
    return label if label in config["measures"] else (first_label(config["measures"], "cka") or "")


rule findings:
    input:
        pairs=paths.PAIRS,
        replicates=paths.PAIR_RESAMPLES_ALL,
        skip=TARGETS["skip_tables"],
        truncation=TARGETS["truncation_tables"],
        layer_blocks=TARGETS["layer_blocks"],
        aligners=TARGETS["aligner_tables"],
        aligner_rows=per_pair(paths.ALIGNER_ROWS, [ALIGN["representation"]], EXTRACT_ON, ALIGN_PAIRS),
        attention=TARGETS["attention"],
        attention_replicates=[paths.ATTENTION_RESAMPLES_ALL] if TARGETS["attention"] else [],
        stitching=TARGETS["stitching"],
        stitching_replicates=[paths.STITCHING_RESAMPLES] if TARGETS["stitching"] else [],
        measure_tests=TARGETS["measure_tests"],  # marks the verdicts of measures that failed a grounding test
        code=code("findings"),
    output:
        table=paths.FINDINGS,
        csv=paths.FINDINGS_CSV,
        by_measure=paths.FINDINGS_BY_MEASURE,
    log:
        paths.log(paths.FINDINGS),
    params:
        measure=findings_measure(),
        models=canonical(config["models"]),
        aligners=canonical({label: spec["aligner"] for label, spec in ALIGN["aligners"].items()}),
        attention_measure=next((label for label, spec in (ATTENTION_SETTINGS or {"measures": {}})["measures"].items()
                                if spec["measure"] == "cka"), ""),
        intervals=canonical(config["similarity"]["intervals"]),
        measures=canonical({label: spec["measure"] for label, spec in config["measures"].items()}),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/findings.py"


# Do the measures agree? Rank agreement of every two measures over the compared cells and model pairs, and the
# model pairs two measures order oppositely (reprsim.stages.findings.agreement).
rule measure_agreement:
    input:
        pairs=paths.PAIRS,
        replicates=paths.PAIR_RESAMPLES_ALL,
        code=code("measure_agreement"),
    output:
        agreement=paths.MEASURE_AGREEMENT,
        discordance=paths.DISCORDANCE,
    log:
        paths.log(paths.MEASURE_AGREEMENT),
    params:
        measures=list(config["measures"]),
        confidence=config["similarity"]["intervals"]["confidence"],
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/measure_agreement.py"


AGREEMENT = len(config["measures"]) >= 2
TARGETS["findings_by_measure"] = [paths.FINDINGS_BY_MEASURE]
TARGETS["measure_agreement"] = [paths.MEASURE_AGREEMENT] if AGREEMENT else []
TARGETS["discordance"] = [paths.DISCORDANCE] if AGREEMENT else []
