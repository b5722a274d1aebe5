"""The report stage's pages and figures, built from small hand-made tables and figures (no workflow run)."""

from __future__ import annotations

import base64
import html
import io
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from reprsim.plotting import drawing  # noqa: E402
from reprsim.stages.report import figures  # noqa: E402
from reprsim.stages.report.common import caption, paragraphs  # noqa: E402
from reprsim.stages.report.html import PAGES, build_report  # noqa: E402
from reprsim.stages.report.inputs import ReportInputs  # noqa: E402

CAPTIONS = Path(__file__).resolve().parents[2] / "src" / "reprsim" / "stages" / "report" / "captions"
PNG = b"\x89PNG\r\n\x1a\n"
MAIN_HEADINGS = ["Findings", "Every finding under every measure", "Model × model summary per measure family", "Model distance and clustering", "Provenance"]
FILES = {"index": "index.html", "pairs": "pairs.html", "models": "models.html", "alignment": "alignment.html",
         "attention": "attention.html", "stitching": "stitching.html", "measures": "measures.html"}
FT = ["tiny-ft-s1", "tiny-ft-s2"]
MODELS = ["tiny-bert", *FT]
PAIRS = [("tiny-bert", "tiny-ft-s1"), ("tiny-bert", "tiny-ft-s2"), ("tiny-ft-s1", "tiny-ft-s2")]


def _png(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path, dpi=20)
    plt.close(fig)
    return str(path)


def _parquet(path: Path, rows: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path, index=False)
    return str(path)


def _meta_dir(path: Path, meta: dict) -> str:
    path.mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps(meta))
    return str(path)


def _summary_rows() -> list[dict]:
    """pair_summary as the contracts define it: linear CKA (symmetric) and neuronsim (both directions);
    the pair of seeds is beyond chance under CKA, the others are not."""
    rows = []
    for a, b in PAIRS:
        seeds = a.startswith("tiny-ft")
        rows.append({"dataset": "tiny", "representation": "mean", "model_a": a, "model_b": b, "measure": "linear_cka",
                     "kind": "similarity", "direction": "symmetric", "n_layers": 3,
                     "mean_over_matching_layers": 0.8 if seeds else 0.2, "null_mean": 0.15,
                     "ci_low": 0.75 if seeds else 0.1, "ci_high": 0.85 if seeds else 0.3, "beyond_chance": seeds,
                     "largest_null_p": 0.01, "n": 15, "warning": ""})
        for direction, value in (("a->b", 0.6), ("b->a", 0.4)):
            rows.append({**rows[-1], "measure": "neuronsim", "direction": direction, "mean_over_matching_layers": value,
                         "ci_low": value - 0.05, "ci_high": value + 0.05, "null_mean": 0.3, "beyond_chance": True,
                         "warning": "n/k = 15/32 < 5"})
    return rows


def _stitching_rows() -> tuple[list[dict], list[dict]]:
    """The stitching table and replicates of the two fine-tuned models (identity, layers 1..2, both ways and
    each into itself); the replicates shift every penalty by the same offsets."""
    rows, replicates = [], []
    for f in FT:
        for g in FT:
            for layer in (1, 2):
                penalty = 0.0 if f == g else 0.02 * layer + (0.01 if f == FT[0] else 0.0)
                rows.append({"dataset": "tiny", "objective": "classification", "model_a": f, "model_b": g,
                             "layer_a": layer, "layer_b": layer, "n_layers_a": 2, "n_layers_b": 2, "phi": "identity",
                             "seed": 0, "metric": "accuracy", "higher_is_better": True, "value": 0.7 - penalty,
                             "chance": 0.5, "ci_low": 0.6 - penalty, "ci_high": 0.8 - penalty, "top_score": 0.7,
                             "penalty": penalty, "penalty_low": penalty - 0.01, "penalty_high": penalty + 0.01,
                             "self_stitch": 0.7, "self_penalty": 0.0, "excess_penalty": penalty, "steps": 0,
                             "split": "validation", "n": 15})
                replicates += [{"dataset": "tiny", "model_a": f, "model_b": g, "layer_a": layer, "layer_b": layer,
                                "phi": "identity", "seed": 0, "metric": "accuracy", "replicate": r, "value": 0.7,
                                "penalty": penalty + 0.01 * (r - 2), "n": 15, "m": 7} for r in range(5)]
    return rows, replicates


FINDINGS = [
    {"claim_id": "adjacent", "claim": "Adjacent layers are more similar than distant ones",
     "source": "Kornblith et al.",
     "statistic": "CKA(l, l+1) − CKA(l, l+3)", "models": "all", "measure": "linear_cka", "estimate": 0.21,
     "ci_low": 0.18, "ci_high": 0.24, "reference": 0.0, "reference_kind": "zero", "n": 15, "verdict": "supported",
     "reason": "the interval lies above zero", "holds_under": "1 of 2",
     "across_measures": "supported under linear_cka; contradicted under neuronsim"},
    {"claim_id": "inn", "claim": "The INN aligns better than the linear map", "source": "Ren et al. 2023, Table 4",
     "statistic": "linear − INN relative error", "models": "tiny-bert vs tiny-ft-s1", "measure": "",
     "estimate": -0.01, "ci_low": -0.02, "ci_high": -0.004, "reference": 0.0, "reference_kind": "zero", "n": 15,
     "verdict": "contradicted", "reason": "the interval lies below zero: the linear map is better; 6 cells"},
    {"claim_id": "groups", "claim": "Models of the same group are closer", "source": "Brown et al. 2023",
     "statistic": "between − within groups", "models": "", "measure": "linear_cka", "estimate": np.nan,
     "ci_low": np.nan, "ci_high": np.nan, "reference": np.nan, "reference_kind": "", "n": 15,
     "verdict": "not applicable", "reason": "one group only: nothing to compare it with"},
]


def _pair_rows(pairs) -> list[dict]:
    """Pair-job rows as the engine writes them (linear CKA on three-layer stacks of 40 rows): model_a's layers are
    model_b's rotated with noise, so each layer's best match is its own; the best-match columns included."""
    import reprsim

    rng = np.random.default_rng(0)
    rows = []
    for a, b in pairs:
        X = rng.normal(size=(3, 40, 6))
        Y = np.stack([layer @ np.linalg.qr(rng.normal(size=(6, 6)))[0] + 0.3 * rng.normal(size=(40, 6)) for layer in X])
        table = reprsim.compare(X, Y, {"linear_cka": "cka"}, permutations=19, resamples=10, names=(a, b))
        rows += table.assign(dataset="tiny", representation="mean", split="test").to_dict("records")
    return rows


@pytest.fixture
def inputs(tmp_path) -> dict:
    """Named inputs as the report rule passes them; no stores and no localization (those stay out)."""
    r = tmp_path / "results"
    base = {"source": "init", "architecture": "bert", "n_layers": 2, "hidden_size": 32, "n_parameters": 1.2e6}
    models = [_meta_dir(r / "models" / "tiny-bert", {"name": "tiny-bert", "seed": 0, **base})]
    models += [_meta_dir(r / "models" / m, {"name": m, **base, "source": "finetune", "parent": "tiny-bert", "seed": k,
                                           "dataset": "tiny", "validation_accuracy": 0.7, "content_hash": "ab" * 32})
               for k, m in enumerate(FT, 1)]
    shown = [("tiny-bert", "tiny-ft-s1"), ("tiny-ft-s1", "tiny-ft-s2")]
    truncation = [{"model": m, "layer": layer, "mode": mode, "metric": metric, "value": 0.5 + 0.1 * layer,
                   "split": "validation", "n": 15}
                  for m in FT for metric in ("accuracy", "matthews_correlation")
                  for mode, layers in (("UNTUNED", [0, 1, 2]), ("TUNED", [0, 1, 2]), ("FULL", [2]), ("MAJORITY", [-1]))
                  for layer in layers]
    aligned = [{"layer_a": layer, "layer_b": layer, "direction": direction, "aligner": aligner, "method": aligner,
                "split": split, "n": 10, "rel_error": 0.1 * (layer + 1), "role": role, "dataset": "tiny",
                "model_a": "tiny-bert", "model_b": "tiny-ft-s1"}
               for layer in range(3) for direction in ("a->b", "b->a") for aligner in ("linear", "inn")
               for split, role in (("train", "fit"), ("test", "score"))]
    return {
        "datasets": [_meta_dir(r / "datasets" / "tiny", {
            "name": "tiny", "source": "builtin", "task": "classification", "label_names": ["neg", "pos"],
            "sizes": {"train": 30, "validation": 15, "test": 15}, "content_hash": "cd" * 32})],
        "models": models,
        "stores": [],
        "findings": [_parquet(r / "tables" / "findings.parquet", FINDINGS)],
        "pair_summary": _parquet(r / "tables" / "pair_summary.parquet", _summary_rows()),
        "pairs": [_parquet(r / "tables" / "pairs.parquet", _pair_rows(shown))],
        "model_summary_figures": [_png(r / "figures" / "summary" / "model_summary" / "mean" / "tiny.png")],
        "heatmaps": [_png(r / "figures" / "pairs" / "mean" / "tiny" / f"{a}__{b}.png") for a, b in shown],
        "model_distances": [_parquet(r / "tables" / "model_distances.parquet", [
            {"dataset": "tiny", "representation": "mean", "measure": "linear_cka", "depth": 2, "model_a": a,
             "model_b": b, "distance": float(a != b), "ci_low": 0.9 * (a != b), "ci_high": 1.1 * (a != b)}
            for a in MODELS for b in MODELS])],
        "model_distance_figure": [_png(r / "figures" / "summary" / "model_distance.png")],
        "localization": [],
        "localization_figure": [],
        "truncation_tables": [_parquet(r / "finetune" / m / "truncation.parquet",
                                       [row for row in truncation if row["model"] == m]) for m in FT],
        "truncation_figures": [_png(r / "figures" / "finetune" / m / "truncation.png") for m in FT],
        "skip_tables": [],
        "skip_figures": [_png(r / "figures" / "finetune" / m / "skip.png") for m in FT],
        "layer_views": [],
        "layer_blocks": [_parquet(r / "finetune" / m / "layer_blocks.parquet", [
            {"model": m, "view": view, "split": 2, "contrast": 0.3, "within": 0.9, "between": 0.6}
            for view in ("ORIG–ORIG", "FT–FT")]) for m in FT],
        "layer_view_figures": [_png(r / "figures" / "finetune" / m / "layer_views.png") for m in FT],
        "aligner_tables": [_parquet(r / "align" / "mean" / "tiny" / "tiny-bert__tiny-ft-s1.parquet", aligned)],
        "aligner_figures": [_png(r / "figures" / "align" / "mean" / "tiny" / "tiny-bert__tiny-ft-s1.png")],
        "synthetic_tables": [_parquet(r / "align" / "synthetic" / "tiny" / "tiny-bert.parquet", [
            {"layer": 2, "aligner": aligner, "method": aligner, "split": "test", "rel_error": 0.2, "map_seed": 0,
             "role": "score", "dataset": "tiny", "model": "tiny-bert"} for aligner in ("linear", "inn")])],
        "injection_tables": [_parquet(r / "align" / "injection" / "tiny" / "tiny-ft-s1__tiny-ft-s2.parquet", [
            {"source": s, "target": t, "method": method, "metric": metric, "value": 0.6, "rel_error": 0.3,
             "dataset": "tiny", "split": "test", "n": 15}
            for s, t in (("tiny-ft-s1", "tiny-ft-s2"), ("tiny-ft-s2", "tiny-ft-s1"))
            for method in ("target model", "linear", "random label") for metric in ("accuracy", "matthews_correlation")])],
        "token_tables": [_parquet(r / "tables" / "token_pairs.parquet", [
            {"dataset": "tiny", "model_a": "tiny-bert", "model_b": "tiny-ft-s1", "layer_a": la, "layer_b": lb,
             "value": 0.8, "ci_low": 0.75, "ci_high": 0.85, "null_mean": 0.01, "beyond_chance": True, "n": 512}
            for la in range(3) for lb in range(3)])],
        "attention": [_parquet(r / "tables" / "attention.parquet", [
            {"dataset": "tiny", "model_a": "tiny-bert", "model_b": b, "layer_a": la, "layer_b": lb,
             "measure": "attn_pearson", "direction": direction, "value": 0.9 - 0.2 * la, "ci_low": 0.85 - 0.2 * la,
             "ci_high": 0.95 - 0.2 * la, "null_mean": 0.3, "beyond_chance": True, "n": 12}
            for b in FT for la in (1, 2) for lb in (1, 2) for direction in ("a->b", "b->a")])],
        "attention_heatmaps": [_png(r / "figures" / "pairs" / "attention" / "tiny" / f"tiny-bert__{m}.png") for m in FT],
        "attention_head_figures": [_png(r / "figures" / "pairs" / "attention" / "tiny" / f"tiny-bert__{m}.heads.png")
                                   for m in FT],
        "attention_layer_figures": [_png(r / "figures" / "summary" / "attention_layers" / "tiny.png")],
        "stitching": [_parquet(r / "tables" / "stitching.parquet", _stitching_rows()[0])],
        "stitching_replicates": [_parquet(r / "tables" / "stitching_resamples.parquet", _stitching_rows()[1])],
        "stitch_figures": [_png(r / "figures" / "stitching" / "tiny" / f"{FT[0]}__{FT[1]}.png")],
        "stitching_figures": [_png(r / "figures" / "summary" / "stitching" / "tiny.png")],
        "measure_tests": [_parquet(r / "tables" / "measure_tests.parquet", _measure_test_rows())],
        "findings_by_measure": [_parquet(r / "tables" / "findings_by_measure.parquet", _by_measure_rows())],
        "measure_agreement": [_parquet(r / "tables" / "measure_agreement.parquet", [
            {"dataset": "tiny", "representation": "mean", "scope": scope, "measure_x": "linear_cka",
             "measure_y": "neuronsim", "statistic": statistic, "estimate": 0.6, "ci_low": 0.5, "ci_high": 0.7,
             "n_items": 27 if scope == "cells" else 3, "n": 15, "m": 7}
            for scope in ("cells", "model pairs") for statistic in ("kendall_tau_b", "spearman_rho")])],
        "discordance": [_parquet(r / "tables" / "discordant_orderings.parquet", [
            {"dataset": "tiny", "representation": "mean", "measure_x": "linear_cka", "measure_y": "neuronsim",
             "pair_1": "tiny-bert vs tiny-ft-s1", "pair_2": "tiny-ft-s1 vs tiny-ft-s2", "difference_x": 0.19,
             "x_low": 0.18, "x_high": 0.21, "difference_y": -0.24, "y_low": -0.25, "y_high": -0.23,
             "strength": 15.0, "n": 15, "m": 7}])],
        "measure_agreement_figure": [_png(r / "figures" / "summary" / "measure_agreement.png")],
    }


def _by_measure_rows() -> list[dict]:
    """The adjacent-layers claim under two measures (neuronsim failed a grounding test), and a claim about function."""
    base = {**FINDINGS[0], "dataset": "tiny", "representation": "mean"}
    base = {key: value for key, value in base.items() if key not in ("holds_under", "across_measures")}
    return [{**base, "family": "CKA", "grounding_failed": ""},
            {**base, "measure": "neuronsim", "estimate": -0.1, "ci_low": -0.2, "ci_high": -0.05,
             "verdict": "contradicted", "family": "neuron-level", "grounding_failed": "monotonicity:spearman"},
            {**FINDINGS[1], "dataset": "tiny", "representation": "mean", "family": "", "grounding_failed": ""}]


DELETION_CHECKED = [{"models": FT, "layer": 2, "k": [0, 50, 60], "used": False,
                     "why": "deleting components does not lower tiny-ft-s1's probe accuracy (0.800 at k = 0, 0.810 "
                            "at k = 60)",
                     "probe": {"tiny-ft-s1": {"accuracy": [0.8, 0.805, 0.81], "change": [0, 0.005, 0.01],
                                              "drop": -0.01, "drop_se": 0.004, "trend": 1.0, "falls": False,
                                              "head_accuracy": 0.81, "short_of_head": 0.01},
                               "tiny-ft-s2": {"accuracy": [0.82, 0.7, 0.6], "change": [0, -0.12, -0.22],
                                              "drop": 0.22, "drop_se": 0.02, "trend": -1.0, "falls": True,
                                              "head_accuracy": None, "short_of_head": None}}}]


def _measure_test_rows() -> list[dict]:
    """Two measures on the grounding tests, as measure_tests.parquet holds them: CKA passes monotonicity and fails
    recipe groups, neuronsim the other way; the recipe groups' d′ is descriptive, the layer test has too few items,
    the deletion test cannot rank (its probes do not fall)."""
    rows = []
    common = {"measure_name": "cka", "higher_is_better": True, "n_rows": 512, "null_draws": 999,
              "null_exact": False, "detail": "{}"}
    for measure, rank_mono, (mono, mono_low, mono_p), (seeds, seeds_low, seeds_p) in (
            ("linear_cka", 1, (0.9, 0.8, 0.001), (0.30, 0.20, 0.6)),
            ("neuronsim", 2, (0.2, -0.1, 0.21), (0.95, 0.90, 0.003))):
        mono_decision = "pass" if mono_low > 0 and mono_p <= 0.1 else "fail"
        seeds_decision = "pass" if seeds_low > 0.37 and seeds_p <= 0.1 else "fail"
        rows.append({**common, "measure": measure, "test": "monotonicity", "variant": "spearman",
                     "score": mono, "ci_low": mono_low, "ci_high": mono + 0.05, "chance": 0.0, "units": "Spearman ρ",
                     "beyond_chance": mono_low > 0.0, "n_items": 21, "null": "layer order permuted",
                     "null_mean": 0.0, "null_quantile": 0.41, "p_value": mono_p, "min_p": 0.001,
                     "decision": mono_decision, "passes": mono_decision == "pass", "rank": rank_mono})
        rows.append({**common, "measure": measure, "test": "seeds", "variant": "auprc",
                     "score": seeds, "ci_low": seeds_low, "ci_high": seeds + 0.02, "chance": 0.37, "units": "AUPRC",
                     "beyond_chance": seeds_low > 0.37, "n_items": 12, "null": "random rankings of the pairs",
                     "null_mean": 0.37, "null_quantile": 0.62, "p_value": seeds_p, "min_p": 0.001,
                     "decision": seeds_decision, "passes": seeds_decision == "pass", "rank": 3 - rank_mono})
        rows.append({**rows[-1], "variant": "d_prime", "score": 2.0 * rank_mono, "ci_low": 1.0, "ci_high": 5.0,
                     "chance": 0.0, "units": "d′", "beyond_chance": True, "null": "", "null_mean": float("nan"),
                     "null_quantile": float("nan"), "p_value": float("nan"), "min_p": float("nan"), "null_draws": 0,
                     "decision": "descriptive", "passes": False, "rank": 3 - rank_mono})
        rows.append({**common, "measure": measure, "test": "layer", "variant": "spearman", "score": 0.7,
                     "ci_low": 0.5, "ci_high": 0.8, "chance": 0.0, "units": "Spearman ρ", "beyond_chance": True,
                     "n_items": 6, "null": "accuracy differences permuted over the layers", "null_mean": 0.0,
                     "null_quantile": 0.7, "p_value": 0.08, "min_p": 0.0014, "decision": "too few items",
                     "passes": False, "rank": 1})
        rows.append({**common, "measure": measure, "test": "deletion", "variant": "spearman", "score": float("nan"),
                     "ci_low": float("nan"), "ci_high": float("nan"), "chance": 0.0, "units": "Spearman ρ",
                     "beyond_chance": False, "n_items": 0, "null": "", "null_mean": float("nan"),
                     "null_quantile": float("nan"), "p_value": float("nan"), "min_p": float("nan"), "null_draws": 0,
                     "decision": "cannot rank", "passes": False, "rank": float("nan"),
                     "detail": json.dumps({"cells": [], "checked": DELETION_CHECKED,
                                           "why": DELETION_CHECKED[0]["why"]})})
    # a measure the test leaves undefined here (no interval on the half-samples): no score, no rank
    rows.append({**rows[0], "measure": "svcca", "score": float("nan"), "ci_low": float("nan"),
                 "ci_high": float("nan"), "beyond_chance": False, "p_value": float("nan"), "decision": "undefined",
                 "passes": False, "rank": float("nan")})
    return rows


def _report(tmp_path, named, pages=tuple(FILES)) -> dict[str, str]:
    """Build the report's pages into tmp_path/report; page name -> HTML."""
    out = tmp_path / "report"
    build_report({name: out / FILES[name] for name in pages},
                 ReportInputs.from_named(named, title="Tiny <report>", task_metrics={m: "accuracy" for m in FT},
                                         split="test", confidence=0.9,
                                         measures={"linear_cka": "cka", "neuronsim": "neuronsim"},
                                         grounding_tests=("monotonicity", "prediction", "seeds")))
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES[name] for name in pages)  # atomic: no temporaries
    return {name: (out / FILES[name]).read_text() for name in pages}


def _first_table(fragment: str) -> list[list[str]]:
    """The cells of the first HTML table in `fragment`, row by row (header first)."""
    table = fragment.split("<table", 1)[1].split("</table>", 1)[0]
    return [[html.unescape(re.sub(r"<[^>]+>", " ", cell).strip())
             for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)]


def _h2(page: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", h)).strip() for h in re.findall(r"<h2[^>]*>(.*?)</h2>", page)]


def _figure_inputs(named: dict) -> int:
    return sum(len(paths) for name, paths in named.items() if name.endswith("heatmaps") or "figure" in name)


def test_the_main_page_leads_with_what_was_compared_then_the_findings(tmp_path, inputs):
    page = _report(tmp_path, inputs)["index"]
    assert page.count("<h1>") == 1 and "Tiny &lt;report&gt;" in page
    lead = page.split("<p class='lead'>", 1)[1].split("</p>", 1)[0]
    assert "3 models" in lead and "tiny" in lead and "test split" in lead and "n = 15 rows" in lead
    assert "2 measures" in lead and "linear CKA" in lead and "90% interval" in lead and "chance level" in lead
    for model in MODELS:
        assert f"<b>{model}</b>" in page
    # contents, then the findings, before any figure
    toc, findings = page.index("<nav class='toc'>"), page.index("<h2 id='findings'>")
    assert toc < findings < page.index("<img") and page.index("</table>", findings) < page.index("<img")
    assert _h2(page) == MAIN_HEADINGS
    header, *rows = _first_table(page[findings:])
    assert header[:2] == ["verdict", "claim"] and "reason" in header and "estimate [90% interval]" in header
    assert [row[0].split("  ")[0] for row in rows] == ["✓ supported", "✗ contradicted", "– not applicable"]
    assert rows[0][0].endswith("holds under 1 of 2 measures") and rows[1][0] == "✗ contradicted"
    estimate = header.index("estimate [90% interval]")
    assert rows[0][estimate] == "0.210 [0.180, 0.240]" and rows[1][estimate] == "-0.010 [-0.020, -0.004]"
    assert rows[2][estimate] == "–" and rows[2][-1] == "one group only: nothing to compare it with"
    assert rows[0][header.index("reference")] == "0" and "Kornblith et al." in rows[0][1]
    assert "the linear map is better<details><summary>how</summary>6 cells" in page
    assert "class='verdict supported'" in page and "class='verdict not-applicable'" in page
    assert "1 supported · 1 contradicted · 1 not applicable" in page
    # model distances with their intervals; provenance collapsed at the end
    distances = page.split("<h3>Models with 2 blocks", 1)[1]
    assert "1.00 [0.90, 1.10]" in _first_table(distances)[1]
    provenance = page.split("<h2 id='provenance'>", 1)[1]
    assert provenance.startswith("Provenance</h2><details>") and "content hash" in provenance
    # nothing per pair, per fine-tuned model or per aligner on the main page
    for detail in ("Truncation scores", "Layer injection", "Block structure", "A: tiny-bert"):
        assert detail not in page


def test_contents_and_links_resolve(tmp_path, inputs):
    pages = _report(tmp_path, inputs)
    ids = {name: set(re.findall(r"id='([^']+)'", page)) for name, page in pages.items()}
    files = {FILES[name]: name for name in pages}
    toc = pages["index"].split("<nav class='toc'>", 1)[1].split("</nav>", 1)[0]
    assert re.findall(r"href='#([^']+)'", toc) == ["findings", "by-measure", "summary", "distance", "provenance"]
    assert re.findall(r"href='([^'#]+)'", toc) == ["pairs.html", "models.html", "alignment.html", "attention.html",
                                                   "stitching.html", "measures.html"]
    for name, page in pages.items():
        assert not re.search(r"(src|href)=['\"](?!data:image/png;base64,|#|[\w-]+\.html)", page), name  # self-contained
        for target, anchor in re.findall(r"href='([\w-]+\.html)?#?([^']*)'", page):
            linked = files[target] if target else name  # a missing page raises KeyError here
            assert not anchor or anchor in ids[linked], (name, target, anchor)
        if name != "index":
            assert "href='index.html'" in page  # every detail page leads back


def test_every_figure_is_embedded_once_as_a_valid_png(tmp_path, inputs):
    pages = _report(tmp_path, inputs)
    images = [data for page in pages.values()
              for data in re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]
    assert len(images) == sum(page.count("<img") for page in pages.values()) == _figure_inputs(inputs) == 19
    for data in images:
        raw = base64.b64decode(data, validate=True)
        assert raw.startswith(PNG)
        Image.open(io.BytesIO(raw)).verify()
    assert pages["index"].count("<img") == 2  # the model × model summary and the model distance figure
    assert pages["pairs"].count("<img") == 2 and pages["models"].count("<img") == 6
    assert pages["alignment"].count("<img") == 1 and pages["attention"].count("<img") == 5
    assert pages["stitching"].count("<img") == 2  # identity stitching beside CKA, and the one model pair
    # every figure's caption gives n and the chance level
    for page in pages.values():
        for text in re.findall(r"<figcaption>(.*?)</figcaption>", page, re.S):
            assert re.search(r"\bn (= |and |in )", text), text
            assert "chance" in text, text


def test_detail_pages_hold_the_rest(tmp_path, inputs):
    pages = _report(tmp_path, inputs)
    assert _h2(pages["pairs"]) == ["Summary per model pair (mean over matching layers)", "Layer-by-layer similarity",
                                   "Token level (minibatch CKA)"]
    assert "<nav class='pairs'>" in pages["pairs"] and pages["pairs"].count("<h3 id='pair-mean-tiny-") == 2
    header, *rows = _first_table(pages["pairs"].split("<h2 id='pair-summary'>")[1])
    assert {"beyond chance", "chance", "warning", "mean [90% interval]"} <= set(header) and len(rows) == 9
    assert rows[0][header.index("mean [90% interval]")] == "0.20 [0.10, 0.30]"
    assert _h2(pages["models"]) == [*FT, "Block structure", "Truncation scores"]
    assert "chance: the majority class, 0.400" in pages["models"]  # from the truncation table's MAJORITY row
    assert _h2(pages["alignment"]) == ["Synthetic recovery (Table 3)", "Aligners between models (Table 4)",
                                       "Layer injection (Table 5)"]
    assert _h2(pages["stitching"]) == ["Stitching beside CKA", "Per model pair", "Asymmetry: a → b against b → a",
                                       "The stitching table"]
    header, *rows = _first_table(pages["stitching"].split("<h2 id='stitching-asymmetry'>")[1])
    # tiny-ft-s1 → tiny-ft-s2 costs 0.01 more at every layer, on every replicate: a zero-width interval
    assert rows[0][header.index("difference (a → b) − (b → a) [90% interval]")] == "0.01 [0.01, 0.01]"
    assert [row[header.index("layers (l of a / m of b)")] for row in rows] == ["1 / 1", "2 / 2", "mean of 2 cells"]
    for name, page in pages.items():
        assert "{{" not in page and "{%" not in page and "linear_map" not in page, name


def test_each_pair_shows_its_layers_best_matches_corrected_for_the_choice(tmp_path, inputs):
    page = _report(tmp_path, inputs)["pairs"]
    assert page.count("Best match of each layer of") == 2 and "<h3 id='best-match'>Reading the best matches" in page
    section = page.split("Best match of each layer of tiny-bert in tiny-ft-s1")[1]
    header, *rows = _first_table(section)
    assert {"best layer of B", "p (that cell)", "p (best of B's layers)", "chosen on half the rows",
            "rows (choose / estimate)"} <= set(header) and len(rows) == 3
    assert [row[header.index("best layer of B")] for row in rows] == ["0", "1", "2"]
    assert all(row[header.index("rows (choose / estimate)")] == "20 / 20" for row in rows)
    # the best of three layers against the null of the best: never below its cell's own p
    assert all(float(row[header.index("p (best of B's layers)")]) >= float(row[header.index("p (that cell)")])
               for row in rows)


def test_captions_come_from_the_rst_files(tmp_path, inputs):
    everything = html.unescape("".join(_report(tmp_path, inputs).values()))
    # no localization input; no universality study (its captions: test_report_universality.py)
    shown = sorted(p.stem for p in CAPTIONS.glob("*.rst")
                   if p.stem not in ("localization", "universality", "universality_senses", "universality_controls",
                                     "universality_matrix",
                                     "convergence"))
    for name in shown:
        before_placeholder = " ".join(re.split(r"\n\s*\n", _rst(name))[0].split("{{")[0].split())
        assert before_placeholder in everything, name
        for paragraph in paragraphs(name):  # a blank line in the .rst starts a new paragraph
            assert f"<p class='caption'>{paragraph}</p>" in everything, name
    assert caption("localization") not in everything
    # the heatmap caption names every configured measure's panels, its placeholders filled with neutral words
    assert "Every configured measure" in _rst("heatmap") and "model A (rows)" in caption("heatmap")
    assert caption("heatmap", model_a="x", model_b="y").count("x (rows)") == 1
    assert "Hatched cells" in caption("heatmap") and "chance level" in caption("model_summary")


def _rst(name: str) -> str:
    return (CAPTIONS / f"{name}.rst").read_text()


def test_the_task_metric_and_display_reshaping(tmp_path, inputs):
    pages = _report(tmp_path, inputs)
    truncation = pages["models"].split("<h2 id='truncation-scores'>Truncation scores</h2>")[1]
    assert "accuracy" in truncation and "matthews_correlation" not in truncation and "majority" in truncation
    injection = pages["alignment"].split("Layer injection (Table 5)</h2>")[1]
    assert "random label" in injection and "matthews_correlation" not in injection
    # Table 4: one row per dataset, pair and direction, a column per aligner (mean over the score rows)
    header, *rows = _first_table(pages["alignment"].split("Aligners between models (Table 4)</h2>")[1])
    assert len(rows) == 2 and {"linear", "inn"} <= set(header)
    assert [float(row[header.index("linear")]) for row in rows] == pytest.approx([0.2, 0.2])


def test_named_inputs_and_the_pages_the_rule_asks_for(tmp_path, inputs):
    named = ReportInputs.from_named(inputs, title="t")
    assert named.pair_summary == (inputs["pair_summary"],) and named.stores == ()
    with pytest.raises(ValueError, match="alignment"):
        ReportInputs.from_named({**inputs, "alignment": []}, title="t")
    # the rule's outputs and the inputs must agree: no page with content left out, none empty
    with pytest.raises(ValueError, match=r"no output \['alignment'\]"):
        _report(tmp_path / "a", inputs, pages=("index", "pairs", "models", "attention", "stitching", "measures"))
    with pytest.raises(ValueError, match=r"nothing to show \['alignment'\]"):
        _report(tmp_path / "b", {k: v for k, v in inputs.items() if "align" not in k and "synthetic" not in k
                                 and "injection" not in k})
    assert set(PAGES) == set(FILES) | {"universality"}  # the study's page: test_report_universality.py


def test_a_report_with_no_inputs_is_just_the_header(tmp_path):
    page = _report(tmp_path, {}, pages=("index",))["index"]
    assert "<h2" not in page and "<img" not in page and "Report pages" not in page and "<h1>" in page


# ----------------------------------------------------------------- figures


def test_chance_marks_follow_the_interval_or_the_permutation_p():
    rows = pd.DataFrame({"value": [0.5, 0.5, np.nan, 0.5], "beyond_chance": [True, False, False, None]})
    assert drawing.not_beyond_chance(rows).tolist() == [False, True, False, False]  # undefined: unmarked
    legacy = pd.DataFrame({"value": [0.5, 0.5, 0.5], "null_p": [0.01, 0.2, np.nan]})
    assert drawing.not_beyond_chance(legacy).tolist() == [False, True, False]
    assert drawing.chance_text(pd.Series([0.031, 0.035])) == "chance 0.03"
    assert drawing.chance_text(pd.Series([0.5, 0.9])) == "chance 0.50–0.90"
    assert drawing.chance_text(pd.Series([-0.001, 0.02])) == "chance 0.00–0.02"  # no "-0.00"


def test_model_summary_cells_and_figure(tmp_path):
    summary = pd.DataFrame(_summary_rows())
    cells = drawing.summary_cells(summary[summary["measure"] == "neuronsim"], MODELS)
    # asymmetric: cell (row x, column y) is the direction with x's layer as X; the diagonal stays empty
    assert cells["value"].loc["tiny-bert", "tiny-ft-s1"] == 0.6 and cells["value"].loc["tiny-ft-s1", "tiny-bert"] == 0.4
    assert np.isnan(cells["value"].loc["tiny-bert", "tiny-bert"])
    cka = drawing.summary_cells(summary[summary["measure"] == "linear_cka"], MODELS)
    assert cka["marked"].loc["tiny-bert", "tiny-ft-s2"] and cka["marked"].loc["tiny-ft-s2", "tiny-bert"]
    assert not cka["marked"].loc["tiny-ft-s1", "tiny-ft-s2"]
    assert figures.index._pack({"CKA": ["a", "b", "c"], "CCA family": ["d", "e"], "neuron-level": ["f"],
                                "Procrustes": ["g"]}, 3) == [["a", "b", "c"], ["d", "e", "f"], ["g", None, None]]
    out = tmp_path / "summary.png"
    figures.draw("model_summary", {"table": summary}, out, dataset="tiny", representation="mean",
                 measures={"linear_cka": "cka", "neuronsim": "neuronsim"}, split="test")
    assert out.read_bytes().startswith(PNG)


def test_heatmap_panels_hatch_the_cells_not_beyond_chance(tmp_path):
    rows = pd.DataFrame([{"layer_a": i, "layer_b": j, "value": 0.1 * (i + j), "kind": "similarity",
                          "measure": "linear_cka", "null_mean": 0.1, "beyond_chance": i + j > 1}
                         for i in range(3) for j in range(3)])
    fig, ax = plt.subplots()
    drawing.heatmap_panel(ax, rows, "linear CKA", "a", "b", "cka")
    hatched = [p for p in ax.patches if p.get_hatch()]
    assert len(hatched) == 3 and "chance 0.10" in ax.get_title()
    plt.close(fig)
    table = rows.assign(model_a="a", model_b="b", representation="mean", dataset="tiny", split="test", n=15,
                        direction="symmetric")
    figures.draw("heatmap", {"table": table}, tmp_path / "pair.png", measures={"linear_cka": "cka"})
    assert (tmp_path / "pair.png").read_bytes().startswith(PNG)


def test_the_agreement_figure_of_two_measures_draws_their_one_pair(tmp_path, monkeypatch):
    """Two measures give one row per panel (dataset, representation, scope): the figure draws each panel's 2 × 2
    matrix (a run with two measures once stopped here)."""
    table = pd.DataFrame([{"dataset": "tiny", "representation": "mean", "scope": scope, "measure_x": "linear_cka",
                           "measure_y": "linear_cka_clip", "statistic": "kendall_tau_b", "estimate": 0.6,
                           "ci_low": 0.5, "ci_high": 0.7, "n_items": 9, "n": 15, "m": 7}
                          for scope in ("cells", "model pairs")])
    drawn = []
    monkeypatch.setattr(figures.measures, "_save", lambda fig, path, *a, **k: drawn.append(
        [ax.get_images()[0].get_array().shape for ax in fig.axes if ax.get_images()]))
    figures.draw("measure_agreement", {"table": table}, tmp_path / "agreement.png", measures={"linear_cka": "cka"})
    assert drawn == [[(2, 2), (2, 2)]]


def test_an_undefined_panel_says_why():
    rows = pd.DataFrame(_summary_rows())
    rows = rows[rows["measure"] == "linear_cka"].assign(mean_over_matching_layers=np.nan, ci_low=np.nan,
                                                        ci_high=np.nan, warning="n − 1 < k_x + k_y: undefined")
    fig, ax = plt.subplots()
    drawing.summary_panel(ax, fig, rows, MODELS, "CKA · linear CKA")
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("n/a") == 6 and any("k_x + k_y" in t for t in texts)
    plt.close(fig)


def test_the_attention_page_quotes_matching_layers_with_interval_and_chance(tmp_path, inputs):
    page = _report(tmp_path, inputs)["attention"]
    assert _h2(page) == ["Matching layers along depth", "Every layer pair", "Head by head"]
    rows = _first_table(page.split("Matching layers along depth", 1)[1])
    assert rows[0] == ["dataset", "pair", "measure", "heads matched", "layers", "value [90% interval]", "chance",
                       "beyond chance", "n (sentences)"]
    # matching layers only (1/1 and 2/2), both directions, per fine-tuned model
    assert len(rows) == 1 + 2 * 2 * 2 and {r[4] for r in rows[1:]} == {"1 / 1", "2 / 2"}
    assert ["tiny", "tiny-bert vs tiny-ft-s1", "attn_pearson", "tiny-bert → tiny-ft-s1", "2 / 2",
            "0.50 [0.45, 0.55]", "0.3", "yes", "12"] in rows
    assert page.count("<img") == 1 + 2 + 2
    tokens = _report(tmp_path / "t", inputs)["pairs"].split("Token level (minibatch CKA)", 1)[1]
    assert ["tiny", "tiny-bert vs tiny-ft-s1", "0 / 1", "0.80 [0.75, 0.85]", "0.01", "yes", "512"] in _first_table(tokens)


def test_which_measure_page_names_who_passes_each_test(tmp_path, inputs):
    page = _report(tmp_path, inputs)["measures"]
    assert _h2(page) == ["Every measure on every test these models allow", "Do the measures agree?"]
    assert "<h1>Which measure?" in page
    header, chance, items, quantile, min_p, *rows = _first_table(page.split("<h2 id='which-measure'>")[1])
    assert header == ["measure", "layer monotonicity ρ", "recipe groups AUPRC", "recipe groups d′", "layer probe ρ",
                      "PC deletion ρ"]
    assert chance == ["chance", "0", "0.37", "0", "0", "0"] and items == ["items", "21", "12", "12", "6", "0"]
    assert quantile == ["null 95%", "0.41", "0.62", "–", "0.7", "–"]
    assert min_p == ["min p", "0.001", "0.001", "–", "0.0014", "–"]
    cells = [[" ".join(cell.split()) for cell in row] for row in rows]
    # the mark is the decision's (item-level null and interval); ranks only where the test ranks
    assert cells[0] == ["linear CKA", "✓ 0.90 #1 [0.80, 0.95] p 0.001", "✗ 0.30 #2 [0.20, 0.32] p 0.6",
                        "2.00 [1.00, 5.00] descriptive", "0.70 [0.50, 0.80] p 0.08 · too few", "cannot rank"]
    assert cells[1][:3] == ["neuronsim", "✗ 0.20 #2 [-0.10, 0.25] p 0.21", "✓ 0.950 #1 [0.900, 0.970] p 0.003"]
    assert cells[2] == ["SVCCA", "–", "–", "–", "–", "–"]
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())
    assert ("layer monotonicity ρ (21 items; null: layer order permuted): passes: linear CKA; fails: neuronsim "
            "(best first); undefined here: SVCCA.") in text
    assert "recipe groups AUPRC (12 items; null: random rankings of the pairs): passes: neuronsim; fails: " \
           "linear CKA (best first)." in text
    assert "recipe groups d′ (12 items): descriptive, shown but not ranked or passed (d′ changes under" in text
    assert "layer probe ρ (6 items; null: accuracy differences permuted over the layers): too few items (6 items, " \
           "fewer than grounding.min_items): not ranked." in text
    assert ("PC deletion ρ: cannot rank: deleting components does not lower tiny-ft-s1's probe accuracy "
            "(0.800 at k = 0, 0.810 at k = 60).") in text
    assert "Not run on these models: prediction, because it needs at least three models of one recipe" in text
    assert "share of within-group pairs, which" in text and "1/L" in text
    probes = _first_table(page.split("<h3 id='deletion-probes'>")[1])
    assert probes[0] == ["layer", "model", "probe at k = 0", "last k", "probe at last k", "drop (± s.e.)",
                         "own head", "falls", "used"]
    assert probes[1:] == [["2", "tiny-ft-s1", "0.800", "60", "0.810", "-0.010 ± 0.004", "0.810", "no", "no"],
                          ["2", "tiny-ft-s2", "0.820", "60", "0.600", "0.220 ± 0.020", "–", "yes", "no"]]


def test_which_measure_reads_a_table_from_before_the_item_level_nulls(tmp_path, inputs):
    """A measure_tests table without `decision`: its interval alone decides, as it did when it was written."""
    old = [{key: value for key, value in row.items()
            if key not in ("null", "null_mean", "null_quantile", "p_value", "min_p", "null_draws", "null_exact",
                           "decision", "passes")}
           for row in _measure_test_rows() if row["test"] == "monotonicity"]
    named = {**inputs, "measure_tests": [_parquet(tmp_path / "old" / "measure_tests.parquet", old)]}
    page = _report(tmp_path, named)["measures"]
    header, chance, items, quantile, min_p, *rows = _first_table(page.split("<h2 id='which-measure'>")[1])
    assert header == ["measure", "layer monotonicity ρ"] and quantile == ["null 95%", "–"]
    assert [" ".join(cell.split()) for cell in rows[0]] == ["linear CKA", "✓ 0.90 #1 [0.80, 0.95]"]
    assert [" ".join(cell.split()) for cell in rows[1]] == ["neuronsim", "✗ 0.20 #2 [-0.10, 0.25]"]
    assert "<h3 id='deletion-probes'>" not in page


def test_every_finding_under_every_measure_on_the_main_page(tmp_path, inputs):
    pages = _report(tmp_path, inputs)
    page = pages["index"]
    findings = page.split("<h2 id='findings'>")[1].split("<h2")[0]
    text = html.unescape(re.sub(r"<[^>]+>", " ", findings))
    assert "holds under 1 of 2 measures" in text
    assert "Across measures: supported under linear_cka; contradicted under neuronsim." in " ".join(text.split())
    section = page.split("<h2 id='by-measure'>")[1].split("<h2")[0]
    header, *rows = _first_table(section)
    assert header == ["claim", "linear CKA", "neuronsim†"]  # † : failed a grounding test here
    assert [row[1:] for row in rows] == [["✓", "✗"]]  # the claim about function has no measure column
    assert rows[0][0].startswith("Adjacent layers are more similar than distant ones")
    words = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", section)).split())
    assert ("linear CKA rates tiny-bert vs tiny-ft-s1 more alike than tiny-ft-s1 vs tiny-ft-s2 (by 0.190 "
            "[0.180, 0.210]); neuronsim rates it less alike (by 0.240 [0.230, 0.250])") in words
    assert "href='measures.html#agreement'" in section
    measures = pages["measures"].split("<h2 id='agreement'>")[1]
    assert measures.count("<img") == 1 and "Discordant orderings" in measures
    agreement = _first_table(measures)
    assert agreement[0] == ["dataset", "representation", "scope", "measures", "items", "Kendall τ_b", "Spearman ρ"]
    assert agreement[1][3:] == ["linear CKA · neuronsim", "27", "0.60 [0.50, 0.70]", "0.60 [0.50, 0.70]"]
