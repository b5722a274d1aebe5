"""Every results path of the workflow, spelled once.

Templates use Snakemake's wildcard names, so a rule names them as outputs and a target
function fills them with ``.format(...)``. Logs mirror outputs under ``results/logs``.
Torch-free: the rules import this whenever the DAG is built.
"""

from __future__ import annotations

RESULTS = "results"

DATASET = "results/datasets/{dataset}"
MODEL = "results/models/{model}"
STORE = "results/activations/{dataset}/{model}.zarr"

PAIR_TABLE = "results/pairs/{representation}/{dataset}/{model_a}__{model_b}.parquet"
# the pair job's half-sample replicates, long: layer_a, layer_b, measure, direction, replicate, value
PAIR_RESAMPLES = "results/pairs/{representation}/{dataset}/{model_a}__{model_b}.resamples.parquet"
PAIR_HEATMAP = "results/figures/pairs/{representation}/{dataset}/{model_a}__{model_b}.png"
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

FINDINGS = "results/tables/findings.parquet"
FINDINGS_CSV = "results/tables/findings.csv"

# the model × model summary per measure family, one figure per representation and dataset
MODEL_SUMMARY_FIGURE = "results/figures/summary/model_summary/{representation}/{dataset}.png"

# the report: the main page (findings and summaries) and its linked detail pages, all in one folder
REPORT = "results/report/index.html"
REPORT_PAIRS = "results/report/pairs.html"
REPORT_MODELS = "results/report/models.html"
REPORT_ALIGNMENT = "results/report/alignment.html"


def log(template: str) -> str:
    """The log file of the job that writes `template`: the same path under results/logs, ending .log."""
    relative = template.removeprefix(RESULTS + "/")
    for suffix in (".parquet", ".png", ".zarr", ".html"):
        relative = relative.removesuffix(suffix)
    return f"{RESULTS}/logs/{relative}.log"
