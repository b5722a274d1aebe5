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
        code=code("findings"),
    output:
        table=paths.FINDINGS,
        csv=paths.FINDINGS_CSV,
    log:
        paths.log(paths.FINDINGS),
    params:
        measure=findings_measure(),
        models=canonical(config["models"]),
        aligners=canonical({label: spec["aligner"] for label, spec in ALIGN["aligners"].items()}),
        attention_measure=next((label for label, spec in (ATTENTION_SETTINGS or {"measures": {}})["measures"].items()
                                if spec["measure"] == "cka"), ""),
        intervals=canonical(config["similarity"]["intervals"]),
    threads: 1
    conda:
        "../envs/compare.yaml"
    script:
        "../scripts/findings.py"
