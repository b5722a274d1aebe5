"""End to end: the tiny configuration through the whole DAG, then incremental reruns.

One private copy of the workflow is run once per session (fixture `workflow`, shared with the
cluster tier); the tests then read its outputs and ask Snakemake (dry runs) what a change would
rerun.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import TINY, planned_jobs, planned_outputs, snakemake

from reprsim.io.store import open_store
from reprsim.workflow.paths import PAIRS

pytestmark = pytest.mark.workflow
MODELS = ["minilm", "tiny-bert-s0", "tiny-ft-s1", "tiny-ft-s2", "tiny-gpt2"]
LAYERS = {"minilm": 7, "tiny-bert-s0": 3, "tiny-ft-s1": 3, "tiny-ft-s2": 3, "tiny-gpt2": 4}
WIDTH = {"minilm": 384, "tiny-bert-s0": 32, "tiny-ft-s1": 32, "tiny-ft-s2": 32, "tiny-gpt2": 32}
N_PAIRS = len(MODELS) * (len(MODELS) + 1) // 2


def dry_run(root, *args):
    result = snakemake(root, "--dry-run", *args)
    return result.stdout + result.stderr


def test_zarr_stores_have_documented_shapes(workflow):
    for model in MODELS:
        store = open_store(workflow / "results" / "activations" / "tiny" / f"{model}.zarr")
        n = store.attrs["n_examples"]
        assert n == 60
        for pooling in ("mean", "cls", "last"):
            values = store[f"pooled/{pooling}"][:]
            assert values.shape == (LAYERS[model], n, WIDTH[model])
            assert np.isfinite(values).all()
        offsets = store["tokens/offsets"][:]
        assert store["tokens/hidden"].shape == (LAYERS[model], offsets[-1], WIDTH[model])
        assert store.attrs["model"] == model and store.attrs["device"] == "cpu"
        assert len(store.attrs["model_hash"]) == 64
    assert not list((workflow / "results" / "activations" / "tiny").glob("*.tmp-*"))


def test_pair_tables_are_tidy_and_self_cka_is_one(workflow):
    tables = sorted(p for p in (workflow / "results" / "pairs" / "mean" / "tiny").glob("*.parquet")
                    if not p.name.endswith(".resamples.parquet"))
    assert len(tables) == len(MODELS) * (len(MODELS) + 1) // 2
    for path in tables:
        table = pd.read_parquet(path)
        a, b = path.stem.split("__")
        cka = table[table["measure"] == "linear_cka"]
        assert len(cka) == LAYERS[a] * LAYERS[b]
        assert {"layer_a", "layer_b", "measure", "value", "kind", "split", "n"} <= set(table.columns)
        if a == b:
            diagonal = cka[cka["layer_a"] == cka["layer_b"]]["value"]
            np.testing.assert_allclose(diagonal, 1.0, atol=1e-10)
    # maps between spaces are the aligners' (one linear map: the align stage's `linear` aligner)
    assert not any(pd.read_parquet(p)["measure"].str.startswith("linear_map").any() for p in tables)


def test_every_defined_value_has_its_chance_level_and_interval(workflow):
    table = pd.read_parquet(workflow / "results" / "tables" / "pairs.parquet")
    labels = set(yaml.safe_load(TINY.read_text())["measures"])
    assert labels <= set(table["measure"])
    defined = table[table["value"].notna()]
    assert np.isfinite(defined[["null_mean", "null_std", "null_p", "ci_low", "ci_high"]].to_numpy()).all()
    assert (defined["ci_low"] <= defined["value"] + 1e-12).all() and (defined["value"] <= defined["ci_high"] + 1e-12).all()
    assert (defined["n_permutations"] == 19).all() and (defined["n_resamples"] == 20).all()
    # 15 rows against 3 + 3 compared dimensions: n/k = 2.5 < 5, said on every CCA-family row
    assert defined[defined["measure"].isin(["svcca", "pwcca"])]["warning"].str.contains("n/k = 15/").all()
    replicates = pd.read_parquet(workflow / "results" / "tables" / "pair_resamples.parquet")
    assert len(replicates) == 20 * len(table) and set(replicates["m"]) == {7}
    neuronsim = table[(table["measure"] == "neuronsim") & (table["model_a"] != table["model_b"])]
    assert set(neuronsim["direction"]) == {"a->b", "b->a"}


def test_summaries_cover_every_layer(workflow):
    scores = pd.read_parquet(workflow / "results" / "tables" / "localization.parquet")
    assert len(scores) == sum(LAYERS.values())
    assert np.isfinite(scores["localization"]).all()


def test_skip_table(workflow):
    table = pd.read_parquet(workflow / "results" / "finetune" / "tiny-ft-s1" / "skip.parquet")
    table = table[table["metric"] == "accuracy"]
    assert len(table) == 1 + 2 * 3 // 2  # nothing skipped, then every span of 2 blocks
    full = table[table["start"] == 0]["value"].item()
    truncation = pd.read_parquet(workflow / "results" / "finetune" / "tiny-ft-s1" / "truncation.parquet")
    assert full == truncation.query("mode == 'FULL' and metric == 'accuracy'")["value"].item()


def test_truncation_table(workflow):
    table = pd.read_parquet(workflow / "results" / "finetune" / "tiny-ft-s1" / "truncation.parquet")
    assert set(table["mode"]) == {"UNTUNED", "TUNED", "TUNEDORIG", "FULL", "MAJORITY"}
    assert set(table["metric"]) == {"accuracy", "matthews_correlation"}
    accuracy = table[table["metric"] == "accuracy"]
    for mode in ("UNTUNED", "TUNED", "TUNEDORIG"):
        assert sorted(accuracy[accuracy["mode"] == mode]["layer"]) == [0, 1, 2]
    untuned = accuracy[accuracy["mode"] == "UNTUNED"].sort_values("layer")
    assert untuned["value"].iloc[-1] == accuracy[accuracy["mode"] == "FULL"]["value"].item()


def test_layer_views_compare_seeds(workflow):
    table = pd.read_parquet(workflow / "results" / "finetune" / "tiny-ft-s1" / "layer_views.parquet")
    assert list(dict.fromkeys(table["view"])) == ["ORIG–ORIG", "FT–ORIG", "FT–FT", "FT[tiny-ft-s1]–FT[tiny-ft-s2]"]
    assert set(table[table["view"] == "ORIG–ORIG"]["model_a"]) == {"tiny-bert-s0"}
    assert len(table) == 4 * 3 * 3
    # BERT's first token at the embedding layer is one vector for every example: CKA undefined there
    undefined = table["value"].isna()
    assert ((table["layer_a"] == 0) | (table["layer_b"] == 0))[undefined].all()
    assert table[~undefined]["value"].between(0.5, 1 + 1e-9).all()


def test_stitching_tables(workflow):
    """The fine-tuned seeds stitched into each other and into themselves (stitching.pairs: null)."""
    table = pd.read_parquet(workflow / "results" / "tables" / "stitching.parquet")
    jobs = set(zip(table["model_a"], table["model_b"]))
    assert jobs == {("tiny-ft-s1", "tiny-ft-s1"), ("tiny-ft-s2", "tiny-ft-s2"), ("tiny-ft-s1", "tiny-ft-s2"),
                    ("tiny-ft-s2", "tiny-ft-s1")}
    assert set(table["phi"]) == {"identity", "affine"} and sorted(set(table["layer_a"])) == [1, 2]
    assert (table["layer_a"] == table["layer_b"]).all()  # matching depth, equal depths
    own = table[(table["model_a"] == table["model_b"]) & (table["phi"] == "identity")]
    assert (own["value"] == own["top_score"]).all() and (own["penalty"] == 0).all()
    assert table[["value", "chance", "ci_low", "ci_high", "penalty_low", "penalty_high", "self_stitch"]].notna().all().all()
    assert (table["n"] == len(pd.read_parquet(workflow / "results" / "datasets" / "tiny" / "validation.parquet"))).all()
    replicates = pd.read_parquet(workflow / "results" / "tables" / "stitching_resamples.parquet")
    assert len(replicates) == len(table) * replicates["replicate"].nunique()


def test_aligner_stage(workflow):
    """Every aligner per layer pair in both directions, synthetic recovery, and injection between the seeds."""
    aligners = set(yaml.safe_load(TINY.read_text())["align"]["aligners"])
    table = pd.read_parquet(workflow / "results" / "align" / "mean" / "tiny" / "tiny-bert-s0__tiny-gpt2.parquet")
    scored = table[table["role"] == "score"]
    assert set(scored["aligner"]) == aligners and set(scored["split"]) == {"test"}
    assert len(scored) == LAYERS["tiny-bert-s0"] * LAYERS["tiny-gpt2"] * len(aligners) * 2  # layers: all
    assert np.isfinite(scored["rel_error"]).all()
    synthetic = pd.read_parquet(workflow / "results" / "align" / "synthetic" / "tiny" / "tiny-bert-s0.parquet")
    assert set(synthetic["aligner"]) == aligners and set(synthetic["layer"]) == {2}
    injection = pd.read_parquet(workflow / "results" / "align" / "injection" / "tiny" / "tiny-ft-s1__tiny-ft-s2.parquet")
    assert {("tiny-ft-s1", "tiny-ft-s2"), ("tiny-ft-s2", "tiny-ft-s1")} == set(zip(injection["source"], injection["target"]))
    assert {"target model", "random embedding", "random label"} | aligners == set(injection["method"])


def test_findings_table(workflow):
    """The seed papers' claims on the tiny run: enough of them apply, each with a finite interval
    around its estimate; the CSV holds the same rows; the aligners' per-example errors exist."""
    tables = workflow / "results" / "tables"
    findings = pd.read_parquet(tables / "findings.parquet")
    assert len(findings) >= 6 and findings["claim_id"].is_unique and findings["reason"].str.len().gt(0).all()
    applicable = findings[findings["verdict"] != "not applicable"]
    assert len(applicable) >= 4
    assert np.isfinite(applicable[["estimate", "ci_low", "ci_high"]].to_numpy()).all()
    assert ((applicable["ci_low"] <= applicable["estimate"]) & (applicable["estimate"] <= applicable["ci_high"])).all()
    csv = pd.read_csv(tables / "findings.csv")
    assert list(csv["claim_id"]) == list(findings["claim_id"]) and list(csv["verdict"]) == list(findings["verdict"])
    # every claim that reads the pair tables under each of the 7 measures, summarised in the findings table
    by_measure = pd.read_parquet(tables / "findings_by_measure.parquet")
    adjacent = by_measure[(by_measure["claim_id"] == "adjacent_layers") & (by_measure["representation"] == "mean")]
    assert len(adjacent) == 7 and adjacent["measure"].is_unique
    row = findings[(findings["claim_id"] == "adjacent_layers") & (findings["representation"] == "mean")].iloc[0]
    assert row["holds_under"].endswith(" of 7") and row["across_measures"]
    assert list(csv.columns) == list(findings.columns)
    agreement = pd.read_parquet(tables / "measure_agreement.parquet")
    assert len(agreement[(agreement["representation"] == "mean") & (agreement["scope"] == "cells")]) == 21 * 2
    assert agreement["estimate"].between(-1, 1).all()
    rows = pd.read_parquet(workflow / "results" / "align" / "mean" / "tiny" / "tiny-bert-s0__tiny-gpt2.rows.parquet")
    assert set(rows["role"]) == {"score"} and (rows["sq_error"] >= 0).all() and (rows["target_sq"] > 0).all()


def test_report_shows_figures_and_provenance(workflow):
    report = workflow / "results" / "report"
    pages = {name: (report / f"{name}.html").read_text() for name in ("index", "pairs", "models", "alignment")}
    embedded = {name: page.count("<img src=\"data:image/png;base64,") for name, page in pages.items()}
    # main page: the model × model summary and the model distances; then pair heatmaps and localization,
    # per fine-tuned model truncation, skip and layer views, aligners
    assert embedded == {"index": 2, "pairs": N_PAIRS + 1, "models": 2 * 3, "alignment": 1}
    main = pages["index"]
    assert main.index("<h2 id='findings'>") < main.index("<img")
    for model in MODELS:
        assert model in main
    assert "content hash" in main and "builtin" in main and "Block structure" in pages["models"]
    for figure in (workflow / "results" / "figures").rglob("*.png"):
        assert figure.read_bytes()[:4] == b"\x89PNG"


def test_second_run_has_nothing_to_do(workflow):
    assert planned_jobs(dry_run(workflow, "--configfile", "tiny.yaml")) == {}


def test_touching_sources_reruns_nothing(workflow):
    for path in (workflow / "src" / "reprsim").rglob("*.py"):
        path.touch()
    for path in (workflow / "scripts").glob("*.py"):
        path.touch()
    assert planned_jobs(dry_run(workflow, "--configfile", "tiny.yaml")) == {}


def rules_with_code_input(output: str, fragment: str) -> set[str]:
    """Rules of a dry run that list a file whose path contains `fragment` among their inputs."""
    found, rule = set(), None
    for line in output.splitlines():
        line = line.strip()
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            rule = line.split(" ", 1)[1][:-1]
        elif line.startswith("input:") and rule and fragment in line:
            found.add(rule)
    return found


def jobs_after_edit(workflow, relative_path):
    """The jobs a dry run plans after a real (content) edit of one source file; the edit is undone after."""
    source = workflow / relative_path
    original = source.read_text()
    try:
        source.write_text(original + "\n# a real edit\n")
        return planned_jobs(dry_run(workflow, "--configfile", "tiny.yaml"))
    finally:
        source.write_text(original)


def grounding(predictions: int = 0, probes: int = 0) -> dict[str, int]:
    """The grounding jobs that rerun when a model's outputs change: a fine-tuned model's predictions (its head, which
    the deletion test checks its probe against; all of them once three allow the prediction test) and a trained
    model's probes (deletion and Ding's layer test: random initialisations have none), then every measure's tests
    (they compare all models) and their table; tiny.yaml configures 7 measures."""
    return {**({"model_predictions": predictions} if predictions else {}),
            **({"deletion_probes": probes} if probes else {}), "measure_tests": 7, "measure_tests_table": 1}


# the measures' agreement and its figure rerun whenever the pair tables change (tiny.yaml has 7 measures)
AGREEMENT = {"measure_agreement": 1, "measure_agreement_figure": 1}


def test_code_edit_reruns_the_stage_and_its_dependents(workflow):
    summaries = {"model_distances": 1, "localization_scores": 1, "model_distance_figure": 1, "localization_figure": 1,
                 "model_summary_figure": 1}
    finetune_figures = {"truncation_figure": 2, "skip_figure": 2, "layer_views_figure": 2}
    stitching_figures = {"stitch_figure": 1, "stitching_figure": 1}  # one pair of fine-tuned seeds, one dataset
    assert jobs_after_edit(workflow, "src/reprsim/stages/report/figures/__init__.py") == {
        "pair_heatmap": N_PAIRS, **finetune_figures, "aligner_figure": 1, "model_distance_figure": 1,
        "model_summary_figure": 1, "localization_figure": 1, **stitching_figures, "measure_agreement_figure": 1,
        "report": 1, "all": 1}
    # the fine-tuning code reruns the fine-tuned models and everything downstream of them, nothing else
    untouched_pairs = 6  # among minilm, tiny-bert-s0 and tiny-gpt2
    # the layer views' CLS-token pairs (representation cls): the base with itself, each seed with the base,
    # itself and its sibling; all but the base's own involve a fine-tuned seed. Each seed's terms, per representation
    view_pairs = 5
    assert jobs_after_edit(workflow, "scripts/finetune_model.py") == {
        "finetune_model": 2, "extract_activations": 2, "truncation": 2, "skip": 2, "layer_views": 2,
        **finetune_figures, "model_terms": 2 * 2, "compare_pair": N_PAIRS - untouched_pairs + view_pairs,
        "pair_heatmap": N_PAIRS - untouched_pairs,
        "layer_injection": 1, "aggregate_pairs": 1, **summaries, "stitch": 4, "aggregate_stitching": 1,
        **stitching_figures, "findings": 1, **AGREEMENT, **grounding(predictions=2, probes=2), "report": 1,
        "all": 1}


def test_a_measure_edit_names_only_measure_jobs_as_changed(workflow):
    """Editing CKA reruns what computes measures with it; figures and the report rerun only because
    their tables change, never because they count the measure code as their own input."""
    source = workflow / "src" / "reprsim" / "metrics" / "cka.py"
    original = source.read_text()
    try:
        source.write_text(original + "\n# a real edit\n")
        output = dry_run(workflow, "--configfile", "tiny.yaml")
    finally:
        source.write_text(original)
    planned = set(planned_jobs(output))
    assert {"pair_heatmap", "layer_views_figure", "report"} <= planned  # their tables change
    assert not {"truncation", "truncation_figure", "skip", "finetune_model"} & planned  # no measure there
    # only the jobs that run CKA: not the aligners (they import the CCA module, not the measure api), not the model
    # distances (metrics/distance.py alone), not the layer views (their CKA comes from pair tables), not
    # deletion_probes (the probes import no measure)
    assert rules_with_code_input(output, "metrics/cka.py") == {"model_terms", "compare_pair", "measure_tests"}


def test_adding_a_model_runs_only_its_jobs(workflow):
    config = yaml.safe_load((workflow / "tiny.yaml").read_text())
    config["models"]["tiny-bert-s9"] = {**config["models"]["tiny-bert-s0"], "seed": 9}
    (workflow / "more.yaml").write_text(yaml.safe_dump(config))
    output = dry_run(workflow, "--configfile", "more.yaml")
    jobs = planned_jobs(output)
    assert jobs == {"materialize_model": 1, "extract_activations": 1, "model_terms": 1, "compare_pair": 6,
                    "pair_heatmap": 6,
                    "aggregate_pairs": 1, "model_distances": 1, "localization_scores": 1,
                    "model_distance_figure": 1, "localization_figure": 1, "model_summary_figure": 1, "findings": 1,
                    "stitching_figure": 1, **AGREEMENT, **grounding(), "report": 1,
                    "all": 1}  # the stitching figure's CKA panel reads the pair table
    pair_outputs = {p for p in planned_outputs(output) if p.startswith("results/pairs/")}
    assert all("tiny-bert-s9" in p for p in pair_outputs) and len(pair_outputs) == 2 * 6  # tables and replicates


def test_adding_a_seed_trains_only_that_seed(workflow):
    """A third seed: its own fine-tuning and evaluations, its pairs, and the seed views of its siblings."""
    config = yaml.safe_load((workflow / "tiny.yaml").read_text())
    config["models"]["tiny-ft"]["seeds"] = [1, 2, 3]
    (workflow / "seeds.yaml").write_text(yaml.safe_dump(config))
    output = dry_run(workflow, "--configfile", "seeds.yaml")
    assert planned_jobs(output) == {
        "finetune_model": 1, "extract_activations": 1, "truncation": 1, "truncation_figure": 1, "skip": 1,
        "skip_figure": 1, "layer_views": 3, "layer_views_figure": 3, "model_terms": 2,
        "compare_pair": 6 + 4, "pair_heatmap": 6,  # its 6 pairs, and its views' CLS pairs: base, itself, 2 siblings
        "layer_injection": 2, "stitch": 5, "aggregate_stitching": 1, "stitch_figure": 2, "stitching_figure": 1,
        "aggregate_pairs": 1, "model_distances": 1, "localization_scores": 1, "model_distance_figure": 1,
        "localization_figure": 1, "model_summary_figure": 1, "findings": 1, **AGREEMENT,
        **grounding(predictions=1, probes=1), "report": 1, "all": 1}  # a third seed: the prediction test runs
    planned = planned_outputs(output)
    assert "results/models/tiny-ft-s3" in planned and "results/models/tiny-ft-s1" not in planned
    assert all("tiny-ft-s3" in p for p in planned if p.startswith("results/pairs/"))


def test_snakemake_report_builds(workflow, tmp_path):
    snakemake(workflow, "--configfile", "tiny.yaml", "--report", str(tmp_path / "report.zip"))
    assert (tmp_path / "report.zip").stat().st_size > 10_000


def test_every_measure_is_scored_on_the_tests_its_models_allow(workflow):
    """results/tables/measure_tests.parquet: every configured measure on the tests tiny.yaml's models allow (two
    fine-tuned seeds: no prediction test), each score with its interval and a rank within its test."""
    config = yaml.safe_load((workflow / "tiny.yaml").read_text())
    table = pd.read_parquet(workflow / "results" / "tables" / "measure_tests.parquet")
    assert set(table["measure"]) == set(config["measures"])
    for _, rows in table.groupby("measure"):
        assert {"monotonicity", "deletion", "seeds"} <= set(rows["test"]) and "prediction" not in set(rows["test"])
    scored = table.dropna(subset=["score"])
    assert scored[["ci_low", "ci_high"]].notna().all().all()
    decided = table["decision"].isin(["pass", "fail"])
    assert table.loc[decided, "rank"].notna().all() and table.loc[~decided, "rank"].isna().all()
    assert (table["passes"] == (table["decision"] == "pass")).all()
    # a decided row rests on its item-level null; a test with too few items says why (tiny.yaml's layer test: 4)
    assert (table.loc[decided, "null_draws"] > 0).all() and table.loc[decided, "null_quantile"].notna().all()
    few = table["decision"] == "too few items"
    assert ((table.loc[few, "n_items"] < 10) | (table.loc[few, "min_p"] > 0.05)).all()
    assert ((scored["ci_low"] <= scored["score"] + 1e-9) & (scored["score"] <= scored["ci_high"] + 1e-9)).all()
    page = (workflow / "results" / "report" / "measures.html").read_text()
    assert "Which measure?" in page and "prediction, because it needs at least three models" in page


def test_pair_blocks_give_the_same_pairs_and_rerun_only_the_blocks_of_an_added_model(workflow, tmp_path):
    """similarity.block_size 2 (reprsim.workflow.pair_blocks): the 5 models in blocks [2, 2, 1], one pair job per pair
    of blocks (6, not 15), the same pairs table as one job per pair; a model added at the end of the configuration
    joins the last block, so only the 3 pair jobs of that block rerun; a measure added reruns every pair job."""
    root = shutil.copytree(workflow, tmp_path / "blocks", symlinks=True)
    config = yaml.safe_load((root / "tiny.yaml").read_text())
    config["similarity"]["block_size"] = 2
    (root / "blocks.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = snakemake(root, PAIRS, "--configfile", "blocks.yaml", "--max-threads", "1")
    output = result.stdout + result.stderr
    assert planned_jobs(output).get("compare_pair") == 6 and "model_terms" not in planned_jobs(output)
    blocked, single = (pd.read_parquet(p / PAIRS) for p in (root, workflow))
    keys = ["model_a", "model_b", "layer_a", "layer_b", "measure", "direction"]
    blocked, single = (t.sort_values(keys, ignore_index=True) for t in (blocked, single))
    pd.testing.assert_frame_equal(blocked, single, check_exact=False, rtol=1e-12)  # same rows, same draws

    config["models"]["tiny-bert-s9"] = {**config["models"]["tiny-bert-s0"], "seed": 9}
    (root / "more.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    output = dry_run(root, PAIRS, "--configfile", "more.yaml")  # the target first: --configfile takes several
    reruns = {p for p in planned_outputs(output) if p.startswith("results/pairs/") and ".resamples." not in p}
    assert planned_jobs(output)["compare_pair"] == 3
    assert {Path(p).stem.split("__")[1] for p in reruns} == {"block002"}  # (0, 2), (1, 2), (2, 2)

    del config["models"]["tiny-bert-s9"]
    config["measures"]["rbf_cka"] = {"measure": "cka", "params": {"kernel": "rbf"}}
    (root / "measure.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert planned_jobs(dry_run(root, PAIRS, "--configfile", "measure.yaml"))["compare_pair"] == 6
