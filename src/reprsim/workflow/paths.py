"""Every results path of the workflow, spelled once.

Templates use Snakemake's wildcard names, so a rule names them as outputs and a target
function fills them with ``.format(...)``. Logs mirror outputs under ``results/logs``.
Torch-free: the rules import this whenever the DAG is built.
"""

from __future__ import annotations

import re

RESULTS = "results"

DATASET = "results/datasets/{dataset}"
MODEL = "results/models/{model}"
STORE = "results/activations/{dataset}/{model}.zarr"
# one split's pooled rows of a store as a brought model's file (rule export_activations; format npz or safetensors)
EXPORT = "results/exports/{dataset}/{model}/{pooling}-{split}.{format}"

# what the measures need of one model's rows alone (Gram terms, principal directions, neighbour lists), once per
# model: every pair job of the model reads it (reprsim.stages.compare.terms)
MODEL_TERMS = "results/terms/{representation}/{dataset}/{model}.zarr"
# one pair job's table: the model pairs of two blocks of models (reprsim.workflow.pair_blocks; a block of one model
# is named by it, so with blocks of one this is the table of the model pair a__b)
PAIR_TABLE = "results/pairs/{representation}/{dataset}/{block_a}__{block_b}.parquet"
# the pair job's half-sample replicates, long: model_a, model_b, layer_a, layer_b, measure, direction, replicate, value
PAIR_RESAMPLES = "results/pairs/{representation}/{dataset}/{block_a}__{block_b}.resamples.parquet"
PAIR_HEATMAP = "results/figures/pairs/{representation}/{dataset}/{model_a}__{model_b}.png"
# token-level minibatch CKA (similarity.tokens) of two models that tokenise identically: the pair table's columns
TOKEN_TABLE = "results/pairs/token/{dataset}/{model_a}__{model_b}.parquet"
TOKEN_TABLES = "results/tables/token_pairs.parquet"

# attention similarity (similarity.attention): per pair, the layer x layer table (pair-table columns), its
# half-sample replicates, and the head x head detail of the chosen layer pairs; then all pairs in one
ATTENTION_TABLE = "results/pairs/attention/{dataset}/{model_a}__{model_b}.parquet"
ATTENTION_RESAMPLES = "results/pairs/attention/{dataset}/{model_a}__{model_b}.resamples.parquet"
ATTENTION_HEADS = "results/pairs/attention/{dataset}/{model_a}__{model_b}.heads.parquet"
ATTENTION_HEATMAP = "results/figures/pairs/attention/{dataset}/{model_a}__{model_b}.png"
ATTENTION_HEADS_FIGURE = "results/figures/pairs/attention/{dataset}/{model_a}__{model_b}.heads.png"
ATTENTION = "results/tables/attention.parquet"
ATTENTION_RESAMPLES_ALL = "results/tables/attention_resamples.parquet"
ATTENTION_HEADS_ALL = "results/tables/attention_heads.parquet"
ATTENTION_LAYERS_FIGURE = "results/figures/summary/attention_layers/{dataset}.png"
PAIRS = "results/tables/pairs.parquet"
PAIR_RESAMPLES_ALL = "results/tables/pair_resamples.parquet"
PAIR_SUMMARY = "results/tables/pair_summary.parquet"
MODEL_DISTANCES = "results/tables/model_distances.parquet"
LOCALIZATION = "results/tables/localization.parquet"
MODEL_DISTANCE_FIGURE = "results/figures/summary/model_distance.png"
LOCALIZATION_FIGURE = "results/figures/summary/localization.png"

TRUNCATION_TABLE = "results/finetune/{model}/truncation.parquet"
TRUNCATION_FIGURE = "results/figures/finetune/{model}/truncation.png"
SKIP_TABLE = "results/finetune/{model}/skip.parquet"
SKIP_FIGURE = "results/figures/finetune/{model}/skip.png"
LAYER_VIEWS_TABLE = "results/finetune/{model}/layer_views.parquet"
LAYER_BLOCKS_TABLE = "results/finetune/{model}/layer_blocks.parquet"
LAYER_VIEWS_FIGURE = "results/figures/finetune/{model}/layer_views.png"

ALIGNER_TABLE = "results/align/{representation}/{dataset}/{model_a}__{model_b}.parquet"
# per held-out example: squared error and squared target norm of every aligner (the findings' intervals)
ALIGNER_ROWS = "results/align/{representation}/{dataset}/{model_a}__{model_b}.rows.parquet"
ALIGNER_FIGURE = "results/figures/align/{representation}/{dataset}/{model_a}__{model_b}.png"
SYNTHETIC_TABLE = "results/align/synthetic/{dataset}/{model}.parquet"
INJECTION_TABLE = "results/align/injection/{dataset}/{model_a}__{model_b}.parquet"

# model stitching (stitching:): per bottom -> top model job (self-stitches included) its table and half-sample
# replicates; all jobs in one; a penalty figure per model pair and the identity-stitching-beside-CKA summary
STITCH_TABLE = "results/stitching/{dataset}/{model_a}__{model_b}.parquet"
STITCH_RESAMPLES = "results/stitching/{dataset}/{model_a}__{model_b}.resamples.parquet"
STITCHING = "results/tables/stitching.parquet"
STITCHING_RESAMPLES = "results/tables/stitching_resamples.parquet"
STITCH_FIGURE = "results/figures/stitching/{dataset}/{model_a}__{model_b}.png"
STITCHING_FIGURE = "results/figures/summary/stitching/{dataset}.png"

# a `source: hf` model's or dataset's download into the hub cache (local rule fetch_hub): what was fetched
HUB_FETCH = "results/hub/{kind}/{name}.json"

FINDINGS = "results/tables/findings.parquet"
FINDINGS_CSV = "results/tables/findings.csv"
# every claim under every measure; the measures' rank agreement; model pairs two measures order oppositely
FINDINGS_BY_MEASURE = "results/tables/findings_by_measure.parquet"
MEASURE_AGREEMENT = "results/tables/measure_agreement.parquet"
DISCORDANCE = "results/tables/discordant_orderings.parquet"
MEASURE_AGREEMENT_FIGURE = "results/figures/summary/measure_agreement.png"

# the model × model summary per measure family, one figure per representation and dataset
MODEL_SUMMARY_FIGURE = "results/figures/summary/model_summary/{representation}/{dataset}.png"

# the report: the main page (findings and summaries) and its linked detail pages, all in one folder
# which measure to believe (stage grounding): a fine-tuned model's outputs on the compared rows, each measure's
# scores on the sensitivity and specificity tests, and all measures' scores ranked in one table
PREDICTIONS = "results/grounding/predictions/{dataset}/{model}.parquet"
DELETION_PROBES = "results/grounding/probes/{dataset}/{model}.parquet"
MEASURE_TESTS_PART = "results/grounding/measures/{label}.parquet"
MEASURE_TESTS = "results/tables/measure_tests.parquet"
# each universality study model's competence on one yardstick: a linear probe of the labels on every layer,
# nested-cross-validated on the compared rows (rule competence_probe)
COMPETENCE = "results/grounding/competence/{dataset}/{model}.parquet"

# what is universal (stage universality): each factor level's share of seed-level similarity per measure and depth,
# and per sense of similarity and third; cross-seed similarity over training time and its claims, and the statement
# written out from them
UNIVERSALITY = "results/tables/universality.parquet"
# the dimension placebo's pair tables (rule dimension_placebo): the reference seeds reduced by one method to one width
# ({placebo}: e.g. random64), each against the reference's other seeds
DIMENSION_PLACEBO = "results/universality/placebo/{placebo}.parquet"
DIMENSION_PLACEBO_RESAMPLES = "results/universality/placebo/{placebo}.resamples.parquet"
# the functional sense's stitch jobs (rule function_stitch): model_a's layers stitched into the reference model model_b
# at every layer of model_b, a learned affine map between
FUNCTION_STITCH = "results/universality/function/{dataset}/{model_a}__{model_b}.parquet"
FUNCTION_STITCH_RESAMPLES = "results/universality/function/{dataset}/{model_a}__{model_b}.resamples.parquet"
UNIVERSALITY_SENSES = "results/tables/universality_senses.parquet"
UNIVERSALITY_CONTROLS = "results/tables/universality_controls.parquet"
UNIVERSALITY_CONVERGENCE = "results/tables/universality_convergence.parquet"
UNIVERSALITY_CLAIMS = "results/tables/universality_claims.parquet"
UNIVERSALITY_STATEMENT = "results/tables/universality_statement.parquet"
# its figures (the report): the factor × depth matrix of verdicts per measure; cross-seed similarity over training
UNIVERSALITY_FIGURE = "results/figures/summary/universality.png"
# the factor × sense matrix (per sense of similarity: each level's u per third, coloured by its verdict)
SENSES_FIGURE = "results/figures/summary/universality_senses.png"
CONVERGENCE_FIGURE = "results/figures/summary/convergence.png"

REPORT = "results/report/index.html"
REPORT_PAIRS = "results/report/pairs.html"
REPORT_MODELS = "results/report/models.html"
REPORT_ALIGNMENT = "results/report/alignment.html"
REPORT_ATTENTION = "results/report/attention.html"
REPORT_STITCHING = "results/report/stitching.html"
REPORT_MEASURES = "results/report/measures.html"
REPORT_UNIVERSALITY = "results/report/universality.html"


def log(template: str) -> str:
    """The log file of the job that writes `template`: the same path under results/logs, ending .log."""
    relative = template.removeprefix(RESULTS + "/")
    for suffix in (".parquet", ".png", ".zarr", ".html"):
        relative = relative.removesuffix(suffix)
    return f"{RESULTS}/logs/{relative}.log"


# The rule(s) that write each output (rules/*.smk; tests/unit/test_integrity.py checks the two agree).
# `reprsim verify` names them; a job's own errors do not, so no job's code depends on this table.
MADE_BY = {
    DATASET: "prepare_dataset",
    MODEL: "materialize_model or finetune_model or pretrain_model or checkpoint_model",
    STORE: "extract_activations or import_activations",
    EXPORT: "export_activations",
    MODEL_TERMS: "model_terms",
    PAIR_TABLE: "compare_pair", PAIR_RESAMPLES: "compare_pair", PAIR_HEATMAP: "pair_heatmap",
    TOKEN_TABLE: "token_cka", TOKEN_TABLES: "aggregate_tokens",
    ATTENTION_TABLE: "compare_attention", ATTENTION_RESAMPLES: "compare_attention", ATTENTION_HEADS: "compare_attention",
    ATTENTION_HEATMAP: "attention_heatmap", ATTENTION_HEADS_FIGURE: "attention_heads_figure",
    ATTENTION: "aggregate_attention", ATTENTION_RESAMPLES_ALL: "aggregate_attention",
    ATTENTION_HEADS_ALL: "aggregate_attention", ATTENTION_LAYERS_FIGURE: "attention_layers_figure",
    PAIRS: "aggregate_pairs", PAIR_RESAMPLES_ALL: "aggregate_pairs", PAIR_SUMMARY: "aggregate_pairs",
    MODEL_DISTANCES: "model_distances", LOCALIZATION: "localization_scores",
    MODEL_DISTANCE_FIGURE: "model_distance_figure", LOCALIZATION_FIGURE: "localization_figure",
    TRUNCATION_TABLE: "truncation", TRUNCATION_FIGURE: "truncation_figure",
    SKIP_TABLE: "skip", SKIP_FIGURE: "skip_figure",
    LAYER_VIEWS_TABLE: "layer_views", LAYER_BLOCKS_TABLE: "layer_views", LAYER_VIEWS_FIGURE: "layer_views_figure",
    ALIGNER_TABLE: "align_layers", ALIGNER_ROWS: "align_layers", ALIGNER_FIGURE: "aligner_figure",
    SYNTHETIC_TABLE: "synthetic_recovery", INJECTION_TABLE: "layer_injection",
    STITCH_TABLE: "stitch", STITCH_RESAMPLES: "stitch", STITCHING: "aggregate_stitching",
    STITCHING_RESAMPLES: "aggregate_stitching", STITCH_FIGURE: "stitch_figure", STITCHING_FIGURE: "stitching_figure",
    HUB_FETCH: "fetch_hub",
    FINDINGS: "findings", FINDINGS_CSV: "findings", FINDINGS_BY_MEASURE: "findings",
    MEASURE_AGREEMENT: "measure_agreement", DISCORDANCE: "measure_agreement",
    MEASURE_AGREEMENT_FIGURE: "measure_agreement_figure",
    MODEL_SUMMARY_FIGURE: "model_summary_figure",
    REPORT: "report", REPORT_PAIRS: "report", REPORT_MODELS: "report", REPORT_ALIGNMENT: "report",
    REPORT_ATTENTION: "report", REPORT_STITCHING: "report", REPORT_MEASURES: "report", REPORT_UNIVERSALITY: "report",
    COMPETENCE: "competence_probe", DIMENSION_PLACEBO: "dimension_placebo", DIMENSION_PLACEBO_RESAMPLES: "dimension_placebo",
    FUNCTION_STITCH: "function_stitch", FUNCTION_STITCH_RESAMPLES: "function_stitch",
    UNIVERSALITY: "universality", UNIVERSALITY_SENSES: "universality", UNIVERSALITY_CONTROLS: "universality",
    UNIVERSALITY_CONVERGENCE: "universality",
    UNIVERSALITY_CLAIMS: "universality", UNIVERSALITY_STATEMENT: "universality",
    UNIVERSALITY_FIGURE: "universality_figure", SENSES_FIGURE: "senses_figure",
    CONVERGENCE_FIGURE: "convergence_figure",
    PREDICTIONS: "model_predictions", DELETION_PROBES: "deletion_probes", MEASURE_TESTS_PART: "measure_tests", MEASURE_TESTS: "measure_tests_table",
}


def _pattern(template: str) -> re.Pattern:
    """`template` as a regular expression over a path's end: each wildcard one path component."""
    parts = re.split(r"\{\w+\}", template)
    return re.compile("(?:^|/)(" + "[^/]+".join(map(re.escape, parts)) + ")$")


# most literal characters first: the resamples table before the pair table it also matches
_PATTERNS = sorted(((template, _pattern(template)) for template in MADE_BY),
                   key=lambda item: -len(re.sub(r"\{\w+\}", "", item[0])))


def made_by(path: str) -> tuple[str, str] | None:
    """(the output as the workflow names it, e.g. results/models/m, and the rule that writes it) for `path`,
    an output or a file inside a directory output, written with any prefix before results/; None for
    anything else."""
    candidate = path.replace("\\", "/").rstrip("/")
    while candidate:
        for template, pattern in _PATTERNS:
            if match := pattern.search(candidate):
                return match.group(1), MADE_BY[template]
        candidate = candidate.rpartition("/")[0]
    return None
