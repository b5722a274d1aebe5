# Stage report: one figure per table (the figure registry, reprsim.stages.report.figures), then the
# HTML report: a main page (findings, summaries) and linked detail pages, assembled from sections.
# Captions: src/reprsim/stages/report/captions/*.rst, which the HTML report shows too; its markup:
# src/reprsim/stages/report/templates/ (Jinja2).
CAPTIONS = "../src/reprsim/stages/report/captions"
CAPTION_FILES = sorted(glob.glob(workflow_file("src/reprsim/stages/report/captions/*.rst")))
TEMPLATE_FILES = sorted(glob.glob(workflow_file("src/reprsim/stages/report/templates/**/*.*"), recursive=True))
# label -> measure, for grouping panels by family; sorted so that reordering the config (or a tool
# that rewrites it) changes no figure's params and reruns nothing
FIGURE_MEASURES = {label: config["measures"][label]["measure"] for label in sorted(config["measures"])}


rule pair_heatmap:
    input:
        table=lambda wildcards: pair_tables(paths.PAIR_TABLE, wildcards.representation, wildcards.dataset,
                                            [(wildcards.model_a, wildcards.model_b)])[0],
        code=code("plot_figure"),
    output:
        figure=report(
            paths.PAIR_HEATMAP,
            category="Similarity",
            subcategory="{representation} pooling, {dataset}",
            caption=f"{CAPTIONS}/heatmap.rst",
            labels={"model A": "{model_a}", "model B": "{model_b}"},
        ),
    log:
        paths.log(paths.PAIR_HEATMAP),
    params:
        figure="heatmap",
        options={"measures": FIGURE_MEASURES},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule truncation_figure:
    input:
        table=paths.TRUNCATION_TABLE,
        code=code("plot_figure"),
    output:
        figure=report(paths.TRUNCATION_FIGURE, category="Fine-tuning", caption=f"{CAPTIONS}/truncation.rst",
                      labels={"model": "{model}"}),
    log:
        paths.log(paths.TRUNCATION_FIGURE),
    params:
        figure="truncation",
        options=lambda wildcards: {"metric": task_metric(wildcards.model)},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule skip_figure:
    input:
        table=paths.SKIP_TABLE,
        code=code("plot_figure"),
    output:
        figure=report(paths.SKIP_FIGURE, category="Fine-tuning", caption=f"{CAPTIONS}/skip.rst",
                      labels={"model": "{model}"}),
    log:
        paths.log(paths.SKIP_FIGURE),
    params:
        figure="skip",
        options=lambda wildcards: {"metric": task_metric(wildcards.model)},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule layer_views_figure:
    input:
        table=paths.LAYER_VIEWS_TABLE,
        blocks=paths.LAYER_BLOCKS_TABLE,
        code=code("plot_figure"),
    output:
        figure=report(paths.LAYER_VIEWS_FIGURE, category="Fine-tuning", caption=f"{CAPTIONS}/layer_views.rst",
                      labels={"model": "{model}"}),
    log:
        paths.log(paths.LAYER_VIEWS_FIGURE),
    params:
        figure="layer_views",
        options={},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule aligner_figure:
    input:
        table=paths.ALIGNER_TABLE,
        code=code("plot_figure"),
    output:
        figure=report(
            paths.ALIGNER_FIGURE,
            category="Aligners",
            subcategory="{representation} pooling, {dataset}",
            caption=f"{CAPTIONS}/aligners.rst",
            labels={"model A": "{model_a}", "model B": "{model_b}"},
        ),
    log:
        paths.log(paths.ALIGNER_FIGURE),
    params:
        figure="aligners",
        options={},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule model_summary_figure:
    input:
        table=paths.PAIR_SUMMARY,
        code=code("plot_figure"),
    output:
        figure=report(
            paths.MODEL_SUMMARY_FIGURE,
            category="Similarity",
            subcategory="{representation} pooling, {dataset}",
            caption=f"{CAPTIONS}/model_summary.rst",
        ),
    log:
        paths.log(paths.MODEL_SUMMARY_FIGURE),
    params:
        figure="model_summary",
        options=lambda wildcards: {
            "dataset": wildcards.dataset,
            "representation": wildcards.representation,
            "measures": FIGURE_MEASURES,
            "split": config["similarity"]["split"],
            "confidence": config["similarity"]["intervals"]["confidence"],
        },
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule model_distance_figure:
    input:
        table=paths.MODEL_DISTANCES,
        summary=paths.PAIR_SUMMARY,  # the CKA chance level, for the distance at chance
        code=code("plot_figure"),
    output:
        figure=report(paths.MODEL_DISTANCE_FIGURE, category="Similarity", caption=f"{CAPTIONS}/model_distance.rst"),
    log:
        paths.log(paths.MODEL_DISTANCE_FIGURE),
    params:
        figure="model_distance",
        options={"label": config["report"]["distance_measure"]},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule measure_agreement_figure:
    input:
        table=paths.MEASURE_AGREEMENT,
        code=code("plot_figure"),
    output:
        figure=report(paths.MEASURE_AGREEMENT_FIGURE, category="Similarity",
                      caption=f"{CAPTIONS}/measure_agreement.rst"),
    log:
        paths.log(paths.MEASURE_AGREEMENT_FIGURE),
    params:
        figure="measure_agreement",
        options={"measures": {label: spec["measure"] for label, spec in config["measures"].items()}},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


TARGETS["measure_agreement_figure"] = [paths.MEASURE_AGREEMENT_FIGURE] if AGREEMENT else []


rule localization_figure:
    input:
        table=paths.LOCALIZATION,
        code=code("plot_figure"),
    output:
        figure=report(paths.LOCALIZATION_FIGURE, category="Similarity", caption=f"{CAPTIONS}/localization.rst"),
    log:
        paths.log(paths.LOCALIZATION_FIGURE),
    params:
        figure="localization",
        options={},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


# Attention similarity: per pair the layer x layer heatmaps and the head x head detail; per dataset the
# similarity of matching layers along depth (Wu et al. 2020, Fig. 6)
ATTENTION_MEASURES = ({label: spec["measure"] for label, spec in sorted(ATTENTION_SETTINGS["measures"].items())}
                      if ATTENTION_SETTINGS else {})


rule attention_heatmap:
    input:
        table=paths.ATTENTION_TABLE,
        code=code("plot_figure"),
    output:
        figure=report(paths.ATTENTION_HEATMAP, category="Attention", subcategory="{dataset}",
                      caption=f"{CAPTIONS}/attention_heatmap.rst",
                      labels={"model A": "{model_a}", "model B": "{model_b}"}),
    log:
        paths.log(paths.ATTENTION_HEATMAP),
    params:
        figure="heatmap",
        options={"measures": ATTENTION_MEASURES},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule attention_heads_figure:
    input:
        table=paths.ATTENTION_HEADS,
        code=code("plot_figure"),
    output:
        figure=report(paths.ATTENTION_HEADS_FIGURE, category="Attention", subcategory="{dataset}",
                      caption=f"{CAPTIONS}/attention_heads.rst",
                      labels={"model A": "{model_a}", "model B": "{model_b}"}),
    log:
        paths.log(paths.ATTENTION_HEADS_FIGURE),
    params:
        figure="attention_heads",
        options={"measures": ATTENTION_MEASURES},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule attention_layers_figure:
    input:
        table=paths.ATTENTION,
        code=code("plot_figure"),
    output:
        figure=report(paths.ATTENTION_LAYERS_FIGURE, category="Attention", caption=f"{CAPTIONS}/attention_layers.rst"),
    log:
        paths.log(paths.ATTENTION_LAYERS_FIGURE),
    params:
        figure="attention_layers",
        options=lambda wildcards: {"dataset": wildcards.dataset,
                                   "confidence": config["similarity"]["intervals"]["confidence"]},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


# Model stitching: per unordered pair of distinct models the penalty figure (both directions, with the two
# self-stitches); per dataset identity stitching beside CKA (Brown et al. 2023, Fig. 2).
def stitch_figure_inputs(wildcards):
    """Both directions' tables and the two self-stitch tables of one model pair (rules/stitch.smk)."""
    def table(bottom, top):
        return paths.STITCH_TABLE.format(dataset=wildcards.dataset, model_a=bottom, model_b=top)

    a, b = wildcards.model_a, wildcards.model_b
    return {"forward": table(a, b), "backward": table(b, a), "self_a": table(a, a), "self_b": table(b, b)}


def stitching_figure_inputs(wildcards):
    """All stitching jobs' table and, when the dataset is extracted, the pair table (its CKA panel)."""
    return {"table": paths.STITCHING, **({"pairs": paths.PAIRS} if wildcards.dataset in EXTRACT_ON else {})}


rule stitch_figure:
    input:
        unpack(stitch_figure_inputs),
        code=code("plot_figure"),
    output:
        figure=report(paths.STITCH_FIGURE, category="Stitching", subcategory="{dataset}",
                      caption=f"{CAPTIONS}/stitch_penalties.rst",
                      labels={"model A": "{model_a}", "model B": "{model_b}"}),
    log:
        paths.log(paths.STITCH_FIGURE),
    params:
        figure="stitch_penalties",
        options=lambda wildcards: {"model_a": wildcards.model_a, "model_b": wildcards.model_b,
                                   "confidence": config["similarity"]["intervals"]["confidence"]},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule stitching_figure:
    input:
        unpack(stitching_figure_inputs),
        code=code("plot_figure"),
    output:
        figure=report(paths.STITCHING_FIGURE, category="Stitching", caption=f"{CAPTIONS}/stitching_summary.rst"),
    log:
        paths.log(paths.STITCHING_FIGURE),
    params:
        figure="stitching_summary",
        options=lambda wildcards: {"dataset": wildcards.dataset, "measure_label": findings_measure(),
                                   "confidence": config["similarity"]["intervals"]["confidence"]},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


# What is universal? (stage universality, rules/universality.smk): the factor × sense matrix; the factor × depth
# matrix of verdicts per measure;
# with a training_time factor, cross-seed similarity over training. The rules exist without a study too (their
# targets are then empty), like the other figures'.
rule universality_figure:
    input:
        table=paths.UNIVERSALITY,
        code=code("plot_figure"),
    output:
        figure=report(paths.UNIVERSALITY_FIGURE, category="Universality",
                      caption=f"{CAPTIONS}/universality_matrix.rst"),
    log:
        paths.log(paths.UNIVERSALITY_FIGURE),
    params:
        figure="universality",
        options={"confidence": config["similarity"]["intervals"]["confidence"]},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule senses_figure:
    input:
        table=paths.UNIVERSALITY_SENSES,
        code=code("plot_figure"),
    output:
        figure=report(paths.SENSES_FIGURE, category="Universality", caption=f"{CAPTIONS}/universality_senses.rst"),
    log:
        paths.log(paths.SENSES_FIGURE),
    params:
        figure="senses",
        options={"confidence": config["similarity"]["intervals"]["confidence"]},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


rule convergence_figure:
    input:
        table=paths.UNIVERSALITY_CONVERGENCE,
        claims=paths.UNIVERSALITY_CLAIMS,
        code=code("plot_figure"),
    output:
        figure=report(paths.CONVERGENCE_FIGURE, category="Universality", caption=f"{CAPTIONS}/convergence.rst"),
    log:
        paths.log(paths.CONVERGENCE_FIGURE),
    params:
        figure="convergence",
        options={"measures": FIGURE_MEASURES, "confidence": config["similarity"]["intervals"]["confidence"]},
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/plot_figure.py"


# before the report rule, whose inputs are every target (rules/universality.smk sets the study's tables')
TARGETS["universality_figure"] = [paths.UNIVERSALITY_FIGURE] if TARGETS["universality"] else []
TARGETS["senses_figure"] = [paths.SENSES_FIGURE] if TARGETS["universality_senses"] else []
TARGETS["convergence_figure"] = [paths.CONVERGENCE_FIGURE] if TARGETS["universality_convergence"] else []


# The report's pages: the main page always, a detail page when it has something to show
# (reprsim.stages.report.html.PAGES names the inputs of each, and checks that these agree).
REPORT_PAGES = {
    "index": paths.REPORT,
    **({"universality": paths.REPORT_UNIVERSALITY} if TARGETS["universality"] else {}),
    "pairs": paths.REPORT_PAIRS,
    **({"models": paths.REPORT_MODELS} if any(TARGETS[name] for name in (
        "truncation_figures", "skip_figures", "layer_view_figures", "layer_blocks")) else {}),
    **({"alignment": paths.REPORT_ALIGNMENT} if any(TARGETS[name] for name in (
        "aligner_tables", "aligner_figures", "synthetic_tables", "injection_tables")) else {}),
    **({"attention": paths.REPORT_ATTENTION} if TARGETS["attention"] else {}),
    **({"stitching": paths.REPORT_STITCHING} if TARGETS["stitching"] else {}),
    **({"measures": paths.REPORT_MEASURES} if TARGETS["measure_tests"] or TARGETS["measure_agreement"] else {}),
}


rule report:
    input:
        **TARGETS,
        code=code("build_report"),
        captions=CAPTION_FILES,  # the pages show them: an edited caption rebuilds them
        templates=TEMPLATE_FILES,  # not Python, so not among the code inputs: an edited template rebuilds the pages
    output:
        **REPORT_PAGES,
    log:
        paths.log(paths.REPORT),
    params:
        title=config["report"]["title"],
        task_metrics={m: task_metric(m) for m in FINETUNED},
        split=config["similarity"]["split"],
        confidence=config["similarity"]["intervals"]["confidence"],
        measures={label: spec["measure"] for label, spec in config["measures"].items()},
        attention_measures=ATTENTION_MEASURES,
        grounding_tests=GROUNDING["tests"],
    threads: 1
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/build_report.py"
