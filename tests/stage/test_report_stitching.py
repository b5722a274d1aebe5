"""The stitching figures and report page, drawn from a small copy of a real stitching run (the default
configuration's fine-tuned MiniLM seeds on the SST-2 sample, accuracy on 500 validation rows), built in code."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from reprsim.inference.resampling import interval
from reprsim.stages.report import figures
from reprsim.stages.report.common import _with_interval
from reprsim.stages.report.html import PAGES, build_report
from reprsim.stages.report.inputs import ReportInputs
from reprsim.tables.stitching import asymmetry

PNG = b"\x89PNG\r\n\x1a\n"
A, B = "minilm-ft-s1", "minilm-ft-s2"
TOP = {A: 0.848, B: 0.850}  # each model's own validation accuracy
N, R = 500, 20
# (value, penalty_low, penalty_high) per layer l = m = 1..6, from the run's stitching.parquet
EXAMPLE = {
    (A, A, "affine"): [(0.844, -0.016, 0.0164), (0.838, -0.0062, 0.0301), (0.844, -0.016, 0.0241),
                       (0.848, -0.0161, 0.0121), (0.846, -0.0142, 0.018), (0.856, -0.012, 0.0)],
    (A, B, "affine"): [(0.844, -0.0142, 0.026), (0.846, -0.012, 0.0162), (0.854, -0.0224, 0.014),
                       (0.846, -0.0161, 0.016), (0.856, -0.0244, 0.0081), (0.852, -0.0181, 0.014)],
    (A, B, "identity"): [(0.844, -0.0061, 0.014), (0.846, -0.0161, 0.0161), (0.852, -0.022, 0.0141),
                         (0.858, -0.0202, 0.0041), (0.854, -0.02, 0.0121), (0.85, -0.016, 0.0162)],
    (B, A, "affine"): [(0.832, -0.0003, 0.0361), (0.86, -0.0281, 0.02), (0.856, -0.0281, 0.0083),
                       (0.852, -0.024, 0.0083), (0.858, -0.024, 0.004), (0.86, -0.0222, 0.002)],
    (B, A, "identity"): [(0.856, -0.0121, 0.0), (0.856, -0.016, 0.0001), (0.854, -0.0182, 0.006),
                         (0.85, -0.0182, 0.0062), (0.856, -0.0203, 0.0041), (0.848, -0.0241, 0.0122)],
    (B, B, "affine"): [(0.858, -0.0401, 0.008), (0.854, -0.018, 0.0182), (0.856, -0.0263, 0.01),
                       (0.854, -0.0161, 0.008), (0.86, -0.022, -0.0018), (0.86, -0.022, -0.0059)],
    (A, A, "identity"): [(TOP[A], 0.0, 0.0)] * 6,  # f into itself through the identity is f: no penalty
    (B, B, "identity"): [(TOP[B], 0.0, 0.0)] * 6,
}


def example_tables(all_layers: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The stitching table and replicates (synthetic: the penalty plus seeded offsets, R per cell). With
    `all_layers`, the cross jobs stitch every (l, m) but (l + m) % 5 == 0: a layer-by-layer heatmap with gaps."""
    rows = []
    for (f, g, phi), cells in EXAMPLE.items():
        for layer, (value, low, high) in enumerate(cells, 1):
            targets = [layer] if f == g or not all_layers else [m for m in range(1, 7) if (layer + m) % 5]
            for m in targets:
                shift = 0.0 if m == layer else 0.01 * abs(layer - m)
                penalty = TOP[g] - value + shift
                rows.append({"dataset": "sst2", "objective": "classification", "model_a": f, "model_b": g,
                             "layer_a": layer, "layer_b": m, "n_layers_a": 6, "n_layers_b": 6, "phi": phi, "seed": 0,
                             "metric": "accuracy", "higher_is_better": True, "value": value - shift,
                             "chance": 0.5, "ci_low": value - shift - 0.03, "ci_high": value - shift + 0.03,
                             "top_score": TOP[g], "top_low": TOP[g] - 0.03, "top_high": TOP[g] + 0.03,
                             "penalty": penalty, "penalty_low": low + shift, "penalty_high": high + shift,
                             "steps": 0 if phi == "identity" else 30, "split": "validation", "n": N})
    table = pd.DataFrame(rows)
    own = table[table["model_a"] == table["model_b"]][["model_a", "layer_a", "phi", "value", "penalty"]].rename(
        columns={"value": "self_stitch", "penalty": "self_penalty"})
    table = table.merge(own, on=["model_a", "layer_a", "phi"], how="left")
    table["excess_penalty"] = table["penalty"] - table["self_penalty"]
    rng = np.random.default_rng(0)
    reps = table.loc[table.index.repeat(R), ["dataset", "model_a", "model_b", "layer_a", "layer_b", "phi", "seed",
                                              "metric", "value", "penalty"]].reset_index(drop=True)
    reps["replicate"] = np.tile(np.arange(R), len(table))
    reps["penalty"] += 0.01 * rng.normal(size=len(reps))
    return table, reps.assign(n=N, m=N // 2)


def job(table: pd.DataFrame, f: str, g: str) -> pd.DataFrame:
    return table[(table["model_a"] == f) & (table["model_b"] == g)]


def pair_inputs(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The stitch_figure rule's inputs: both directions and both self-stitches."""
    return {"forward": job(table, A, B), "backward": job(table, B, A), "self_a": job(table, A, A),
            "self_b": job(table, B, B)}


def cka_table() -> pd.DataFrame:
    """pairs.parquet rows of the two models (linear CKA, mean pooling, layers 0..6), CKA falling with depth."""
    return pd.DataFrame([{"dataset": "sst2", "representation": "mean", "model_a": A, "model_b": B, "layer_a": i,
                          "layer_b": j, "measure": "linear_cka", "kind": "similarity", "direction": "symmetric",
                          "split": "test", "n": 872, "value": 0.98 - 0.04 * max(i, j) - 0.05 * abs(i - j),
                          "ci_low": 0.96 - 0.04 * max(i, j) - 0.05 * abs(i - j),
                          "ci_high": 0.99 - 0.04 * max(i, j) - 0.05 * abs(i - j), "null_mean": 0.04}
                         for i in range(7) for j in range(7)])


@pytest.fixture
def captured(monkeypatch):
    """The figures a draw call would save, kept open for inspection."""
    kept = []
    monkeypatch.setattr(figures.stitching, "_save", lambda fig, path: kept.append(fig))
    return kept


def _texts(fig) -> str:
    return " | ".join([t.get_text() for t in fig.texts] + [t for ax in fig.axes for t in (
        ax.get_title(), ax.get_xlabel(), ax.get_ylabel())])


def test_penalty_figures_write_pngs(tmp_path):
    table, _ = example_tables()
    figures.draw("stitch_penalties", pair_inputs(table), tmp_path / "pair.png", model_a=A, model_b=B)
    figures.draw("stitch_penalties", pair_inputs(example_tables(all_layers=True)[0]), tmp_path / "grid.png",
                 model_a=A, model_b=B)
    figures.draw("stitching_summary", {"table": table, "pairs": cka_table()}, tmp_path / "summary.png",
                 dataset="sst2", measure_label="linear_cka")
    for name in ("pair", "grid", "summary"):
        path = tmp_path / f"{name}.png"
        assert path.read_bytes().startswith(PNG) and min(Image.open(path).size) > 300
    assert not list(tmp_path.glob("*.tmp-*"))


def test_matching_layers_draw_penalty_lines_per_direction(captured):
    """layers: matching: one line per map against the layer of f, the layer of g on the top axis, f's
    self-stitch dashed, hollow markers where the interval contains 0."""
    table, _ = example_tables()
    figures.stitching.stitch_penalties(pair_inputs(table), "unused.png", model_a=A, model_b=B)
    fig, = captured
    text = _texts(fig)
    assert "layer of f (bottom)" in text and "layer of g (top)" in text and "accuracy of g" in text
    assert f"f = {A} into g = {B}" in text and f"f = {B} into g = {A}" in text
    assert "penalty at chance ≈ 0.35 (off this scale)" in text and "interval contains 0" in text
    first = fig.axes[0]
    labels = [line.get_label() for line in first.get_lines()]
    assert f"{A} → {B}, φ = identity" in labels and f"{A} → {A} (self-stitch), φ = affine" in labels
    affine = next(line for line in first.get_lines() if line.get_label() == f"{A} → {B}, φ = affine")
    assert list(affine.get_ydata()) == pytest.approx([TOP[B] - v for v, _, _ in EXAMPLE[(A, B, "affine")]])


def test_every_layer_pair_draws_hatched_heatmaps_with_blank_cells(captured):
    table = example_tables(all_layers=True)[0]
    figures.stitching.stitch_penalties(pair_inputs(table), "unused.png", model_a=A, model_b=B)
    fig, = captured
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert len(panels) == 4  # 2 directions x 2 maps
    titles = [ax.get_title() for ax in panels]
    assert titles[0].startswith(f"{A} → {B}, φ = affine") and titles[3].startswith(f"{B} → {A}, φ = identity")
    assert panels[0].get_xlabel() == f"layer of f (bottom): {A}" and panels[0].get_ylabel() == f"layer of g (top): {B}"
    cells = job(table, A, B)
    cells = cells[cells["phi"] == "affine"]
    image = panels[0].get_images()[0].get_array()
    assert np.ma.count_masked(image) == 36 - len(cells)  # not stitched: blank
    containing = ((cells["penalty_low"] <= 0) & (cells["penalty_high"] >= 0)).sum()
    assert sum(1 for p in panels[0].patches if p.get_hatch()) == containing > 0
    annotated = [t.get_text() for t in panels[0].texts]
    assert len(annotated) == len(cells) and figures.stitching._two(float(cells["penalty"].iloc[0])) in annotated
    assert "hatched: the 95% interval contains 0" in _texts(fig)


def test_the_summary_puts_identity_stitching_beside_cka(captured):
    table, _ = example_tables()
    figures.stitching.stitching_summary({"table": table, "pairs": cka_table()}, "unused.png", dataset="sst2",
                                        measure_label="linear_cka")
    figures.stitching.stitching_summary({"table": table}, "unused.png", dataset="sst2", measure_label="linear_cka")
    figures.stitching.stitching_summary({"table": table, "pairs": cka_table().assign(model_b="other")},
                                        "unused.png", dataset="sst2", measure_label="linear_cka")
    both, alone, absent = captured
    left, right = both.axes
    assert left.get_xlabel().startswith("layer of f (bottom)") and "Identity stitching" in left.get_title()
    assert len(left.get_lines()) == 4 + 1  # four directed pairs (two self-stitches), and the zero line
    assert "linear CKA" in right.get_ylabel() and "dotted: chance level" in right.get_title()
    cka, chance = right.get_lines()
    assert list(cka.get_xdata()) == list(range(1, 7)) and chance.get_linestyle() == ":"
    assert len(alone.axes) == 1 and "no pair table" in _texts(alone)
    assert len(absent.axes) == 1 and "no linear CKA rows for these models" in _texts(absent)


def _cells(page: str, heading: str) -> list[list[str]]:
    """The cells of the first table after `heading`, row by row (header first)."""
    fragment = page.split(heading, 1)[1]
    body = fragment.split("<table", 1)[1].split("</table>", 1)[0]
    return [[html.unescape(re.sub(r"<[^>]+>", " ", cell).strip())
             for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


def _png(path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(PNG + b"\x00" * 8)
    return str(path)


def test_the_stitching_page(tmp_path):
    table, reps = example_tables()
    r = tmp_path / "results"
    (r / "tables").mkdir(parents=True)
    table.to_parquet(r / "tables" / "stitching.parquet", index=False)
    reps.to_parquet(r / "tables" / "stitching_resamples.parquet", index=False)
    named = {"stitching": [str(r / "tables" / "stitching.parquet")],
             "stitching_replicates": [str(r / "tables" / "stitching_resamples.parquet")],
             "stitch_figures": [_png(r / "figures" / "stitching" / "sst2" / f"{A}__{B}.png")],
             "stitching_figures": [_png(r / "figures" / "summary" / "stitching" / "sst2.png")]}
    inputs = ReportInputs.from_named(named, title="stitching", confidence=0.95)
    out = tmp_path / "report"
    with pytest.raises(ValueError, match="stitching"):  # inputs with content need their page
        build_report({"index": out / "index.html"}, inputs)
    build_report({"index": out / "index.html", "stitching": out / "stitching.html"}, inputs)
    index, page = (out / "index.html").read_text(), (out / "stitching.html").read_text()
    assert "href='stitching.html'" in index and PAGES["stitching"].title in index
    headings = [html.unescape(re.sub(r"<[^>]+>", "", h)) for h in re.findall(r"<h2[^>]*>(.*?)</h2>", page)]
    assert headings == ["Stitching beside CKA", "Per model pair", "Asymmetry: a → b against b → a",
                        "The stitching table"]
    assert "Bansal et al. 2021" in page and "self-stitch" in page and page.count("<img") == 2
    rows = _cells(page, "<h2 id='stitching-asymmetry'>")
    assert rows[0] == ["dataset", "model a", "model b", "φ", "metric", "layers (l of a / m of b)",
                       "penalty a → b [95% interval]", "penalty b → a [95% interval]",
                       "difference (a → b) − (b → a) [95% interval]", "n"]
    assert len(rows) == 1 + 2 * (6 + 1)  # per map: six matched cells and their mean
    # layer 1, affine: the run's penalties and intervals; the difference from the replicates, computed here
    forward, backward = TOP[B] - 0.844, TOP[A] - 0.832
    differences = (reps[(reps["model_a"] == A) & (reps["layer_a"] == 1) & (reps["phi"] == "affine")
                        & (reps["model_b"] == B)].sort_values("replicate")["penalty"].to_numpy()
                   - reps[(reps["model_a"] == B) & (reps["layer_a"] == 1) & (reps["phi"] == "affine")
                          & (reps["model_b"] == A)].sort_values("replicate")["penalty"].to_numpy())
    penalties = [interval(forward, reps[(reps["model_a"] == A) & (reps["model_b"] == B) & (reps["layer_a"] == 1)
                                        & (reps["phi"] == "affine")].sort_values("replicate")["penalty"], N, N // 2),
                 interval(backward, reps[(reps["model_a"] == B) & (reps["model_b"] == A) & (reps["layer_a"] == 1)
                                         & (reps["phi"] == "affine")].sort_values("replicate")["penalty"], N, N // 2)]
    low, high = interval(forward - backward, differences, N, N // 2)
    assert ["sst2", A, B, "affine", "accuracy", "1 / 1", _with_interval(forward, *penalties[0]),
            _with_interval(backward, *penalties[1]), _with_interval(forward - backward, low, high), "500"] in rows
    mean = next(row for row in rows if row[3] == "identity" and row[5] == "mean of 6 cells")
    expected = asymmetry(table, reps)
    expected = expected[(expected["phi"] == "identity") & expected["layer_a"].isna()].iloc[0]
    assert mean[8] == _with_interval(expected["difference"], expected["difference_low"], expected["difference_high"])
    assert expected["difference"] == pytest.approx(np.mean([TOP[B] - v1 - (TOP[A] - v2) for (v1, _, _), (v2, _, _)
                                                            in zip(EXAMPLE[(A, B, "identity")],
                                                                   EXAMPLE[(B, A, "identity")])]))
    full = _cells(page, "<h2 id='stitching-table'>")
    assert len(full) == 1 + len(table) and "penalty [95% interval]" in full[0] and "excess penalty" in full[0]
    assert [row for row in full if row[1] == f"{A} → {B}" and row[2] == "1 / 1" and row[3] == "affine"][0][6] == \
        _with_interval(0.844, 0.814, 0.874)


def test_asymmetry_intervals_match_the_jobs_own_for_one_cell():
    """One matched cell with one seed: its penalty interval from the replicates is the job's own."""
    table, reps = example_tables()
    shown = asymmetry(table, reps)
    cell = shown[(shown["phi"] == "affine") & (shown["layer_a"] == 2)].iloc[0]
    values = reps[(reps["model_a"] == A) & (reps["model_b"] == B) & (reps["layer_a"] == 2)
                  & (reps["phi"] == "affine")].sort_values("replicate")["penalty"]
    assert (cell["penalty_ab_low"], cell["penalty_ab_high"]) == pytest.approx(
        interval(cell["penalty_ab"], values, N, N // 2))
    assert cell["n"] == N and cell["cells"] == 1 and cell["seeds"] == 1
