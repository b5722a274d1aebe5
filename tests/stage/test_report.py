"""The report stage's HTML page, built from small hand-made tables and figures (no workflow run)."""

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
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from reprsim.stages.report.html import SECTIONS, ReportInputs, build_report, caption  # noqa: E402

CAPTIONS = Path(__file__).resolve().parents[2] / "src" / "reprsim" / "stages" / "report" / "captions"
# Every h2 heading the report can show, in the documented order of its sections.
ORDER = ["Datasets", "Models", "Activation stores", "Layer-by-layer similarity", "Model distance", "Localization",
         "Aligners", "Fine-tuned models: truncation and layer similarity", "Fine-tuned models: skipping blocks"]
PNG = b"\x89PNG\r\n\x1a\n"


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


@pytest.fixture
def inputs(tmp_path) -> dict:
    """Named inputs as the report rule passes them; no stores and no localization (those sections stay out)."""
    r = tmp_path / "results"
    ft = ["tiny-ft-s1", "tiny-ft-s2"]
    base = {"source": "init", "architecture": "bert", "n_layers": 2, "hidden_size": 32, "n_parameters": 1.2e6}
    models = [_meta_dir(r / "models" / "tiny-bert", {"name": "tiny-bert", "seed": 0, **base})]
    models += [_meta_dir(r / "models" / m, {"name": m, **base, "source": "finetune", "parent": "tiny-bert",
                                           "validation_accuracy": 0.7, "content_hash": "ab" * 32}) for m in ft]
    pairs = [("tiny-bert", "tiny-ft-s1"), ("tiny-ft-s1", "tiny-ft-s2")]
    truncation = [{"model": m, "layer": layer, "mode": mode, "metric": metric, "value": 0.5 + 0.1 * layer}
                  for m in ft for metric in ("accuracy", "matthews_correlation")
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
        "pair_summary": _parquet(r / "tables" / "pair_summary.parquet", [
            {"model_a": a, "model_b": b, "measure": "linear_cka", "direction": "symmetric",
             "mean_over_matching_layers": 0.8, "null_mean": 0.1, "largest_null_p": 0.05} for a, b in pairs]),
        "heatmaps": [_png(r / "figures" / "pairs" / "mean" / "tiny" / f"{a}__{b}.png") for a, b in pairs],
        "model_distances": [_parquet(r / "tables" / "model_distances.parquet", [
            {"measure": "linear_cka", "depth": 2, "model_a": a, "model_b": b, "distance": float(a != b)}
            for a in ["tiny-bert", *ft] for b in ["tiny-bert", *ft]])],
        "model_distance_figure": [_png(r / "figures" / "summary" / "model_distance.png")],
        "localization": [],
        "localization_figure": [],
        "truncation_tables": [_parquet(r / "finetune" / m / "truncation.parquet",
                                       [row for row in truncation if row["model"] == m]) for m in ft],
        "truncation_figures": [_png(r / "figures" / "finetune" / m / "truncation.png") for m in ft],
        "skip_tables": [],
        "skip_figures": [_png(r / "figures" / "finetune" / m / "skip.png") for m in ft],
        "layer_views": [],
        "layer_blocks": [_parquet(r / "finetune" / m / "layer_blocks.parquet", [
            {"model": m, "view": view, "split": 2, "contrast": 0.3, "within": 0.9, "between": 0.6}
            for view in ("ORIG–ORIG", "FT–FT")]) for m in ft],
        "layer_view_figures": [_png(r / "figures" / "finetune" / m / "layer_views.png") for m in ft],
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
    }


def _figures(named: dict) -> int:
    return sum(len(paths) for name, paths in named.items() if name == "heatmaps" or "figure" in name)


def _page(tmp_path, named) -> str:
    out = tmp_path / "report" / "index.html"
    build_report(out, ReportInputs.from_named(named, title="Tiny <report>",
                                              task_metrics={"tiny-ft-s1": "accuracy", "tiny-ft-s2": "accuracy"}))
    assert [p.name for p in out.parent.iterdir()] == ["index.html"]  # written atomically: no temporary left
    return out.read_text()


def _first_table(fragment: str) -> list[list[str]]:
    """The cells of the first HTML table in `fragment`, row by row (header first)."""
    table = fragment.split("<table", 1)[1].split("</table>", 1)[0]
    return [[html.unescape(cell.strip()) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)]


def _rst(name: str) -> str:
    return (CAPTIONS / f"{name}.rst").read_text()


def test_every_figure_is_embedded_as_a_valid_png(tmp_path, inputs):
    page = _page(tmp_path, inputs)
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == page.count("<img") == _figures(inputs) == 10
    for data in images:
        raw = base64.b64decode(data, validate=True)
        assert raw.startswith(PNG)
        Image.open(io.BytesIO(raw)).verify()


def test_sections_appear_in_the_documented_order_and_empty_ones_are_absent(tmp_path, inputs):
    page = _page(tmp_path, inputs)
    headings = [html.unescape(h) for h in re.findall(r"<h2>(.*?)</h2>", page)]
    assert headings == [h for h in ORDER if h not in ("Activation stores", "Localization")]
    assert page.count("<h1>") == 1 and "Tiny &lt;report&gt;" in page
    assert "Activation stores" not in page and "Localization" not in page
    for heading in ("Summary per model pair", "Models with 2 blocks", "Synthetic recovery (Table 3)",
                    "Aligners between models (Table 4)", "Layer injection (Table 5)", "Block structure",
                    "Truncation scores"):
        assert heading in page
    assert "linear_map" not in page and "{{" not in page and "{%" not in page


def test_captions_come_from_the_rst_files(tmp_path, inputs):
    page = _page(tmp_path, inputs)
    shown = sorted(p.stem for p in CAPTIONS.glob("*.rst") if p.stem != "localization")  # no localization input
    for name in shown:
        text = _rst(name)
        before_placeholder = " ".join(text.split("{{")[0].split())
        assert html.escape(before_placeholder) in page, name
        assert html.escape(caption(name)) in page, name
    assert html.escape(" ".join(_rst("localization").split())) not in page
    # the heatmap caption names every configured measure's panels, its placeholders filled with neutral words
    assert "Every configured measure" in _rst("heatmap") and "model A (rows)" in caption("heatmap")
    assert caption("heatmap", model_a="x", model_b="y").count("x (rows)") == 1
    assert not (CAPTIONS / "alignment.rst").exists()


def test_the_task_metric_and_display_reshaping(tmp_path, inputs):
    page = _page(tmp_path, inputs)
    truncation = page.split("<h3>Truncation scores</h3>")[1]
    assert "accuracy" in truncation and "matthews_correlation" not in truncation and "majority" in truncation
    injection = page.split("<h3>Layer injection (Table 5)</h3>")[1].split("<h3>")[0].split("<h2>")[0]
    assert "random label" in injection and "matthews_correlation" not in injection
    # Table 4: one row per dataset, pair and direction, a column per aligner (mean over the score rows)
    header, *rows = _first_table(page.split("<h3>Aligners between models (Table 4)</h3>")[1])
    assert len(rows) == 2 and {"linear", "inn"} <= set(header)
    assert [float(row[header.index("linear")]) for row in rows] == pytest.approx([0.2, 0.2])


def test_named_inputs_single_paths_and_unknown_names(tmp_path, inputs):
    named = ReportInputs.from_named(inputs, title="t")
    assert named.pair_summary == (inputs["pair_summary"],) and named.stores == ()
    with pytest.raises(ValueError, match="alignment"):
        ReportInputs.from_named({**inputs, "alignment": []}, title="t")


def test_a_report_with_no_inputs_is_just_the_header(tmp_path):
    page = _page(tmp_path, {})
    assert "<h2>" not in page and "<img" not in page and "versions:" in page
    assert len(SECTIONS) == len(ORDER) + 1  # the header, then one section per heading
