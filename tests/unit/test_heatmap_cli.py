"""`reprsim heatmap`: one pair's heatmaps drawn on demand from whichever pair job's table holds the pair (with
similarity.block_size > 1 the workflow draws none; reprsim.workflow.pair_blocks)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from reprsim.cli import main

# label -> (measure, params, directions): the default configuration's kinds of panels, symmetric and directed
MEASURES = {
    "linear_cka": ("cka", {"estimator": "biased", "kernel": "linear"}, ["symmetric"]),
    "mutual_knn": ("mutual_knn", {"k": 10}, ["symmetric"]),
    "neuronsim": ("neuronsim", {}, ["a->b", "b->a"]),
}
LAYERS = 3


def pair_rows(a: str, b: str, dataset: str = "sst2", representation: str = "mean") -> pd.DataFrame:
    """One pair's rows with the columns (and types) of a pair job's table, layers 0..2 on each side."""
    rows = []
    for label, (measure, params, directions) in MEASURES.items():
        for direction in directions:
            for layer_a in range(LAYERS):
                for layer_b in range(LAYERS):
                    value = 1.0 - 0.1 * abs(layer_a - layer_b) - (0.05 if direction == "b->a" else 0.0)
                    rows.append({
                        "dataset": dataset, "representation": representation, "model_a": a, "model_b": b,
                        "layer_a": layer_a, "layer_b": layer_b, "measure": label, "kind": "similarity",
                        "direction": direction, "params": json.dumps(params, sort_keys=True), "value": value,
                        "n_permutations": 30, "null_mean": 0.06, "null_std": 0.001, "null_p": 0.032258,
                        "ci_low": value - 0.01, "ci_high": value + 0.01, "n_resamples": 30, "beyond_chance": True,
                        "warning": "", "meta": json.dumps({"measure": measure, "n": 64}),
                        "is_best": layer_a == layer_b, "selection_p": 0.032258, "split_best": layer_a == layer_b,
                        "split_value": value if layer_a == layer_b else float("nan"),
                        "split_low": value - 0.02 if layer_a == layer_b else float("nan"),
                        "split_high": value + 0.02 if layer_a == layer_b else float("nan"),
                        "split": "test", "n": 64})
    return pd.DataFrame(rows)


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    """results/pairs/mean/sst2 with two block tables: block000__block000 holds two pairs (m1 vs m2, m1 vs m3),
    block000__block001 one (m2 vs m4); each with its replicates file beside it. Run from tmp_path (no config)."""
    monkeypatch.chdir(tmp_path)
    where = tmp_path / "results" / "pairs" / "mean" / "sst2"
    where.mkdir(parents=True)
    pd.concat([pair_rows("m1", "m2"), pair_rows("m1", "m3")], ignore_index=True).to_parquet(
        where / "block000__block000.parquet")
    pair_rows("m2", "m4").to_parquet(where / "block000__block001.parquet")
    for name in ("block000__block000", "block000__block001"):  # replicates: another layout, never read
        pd.DataFrame({"model_a": ["m1"], "model_b": ["m2"], "replicate": [0]}).to_parquet(
            where / f"{name}.resamples.parquet")
    return tmp_path / "results"


@pytest.fixture
def drawn(monkeypatch) -> list[dict]:
    """What the CLI hands the figure: the rows, the path and the measures of each call."""
    from reprsim.stages.report import figures

    calls = []

    def capture(tables, out_path, measures=None):
        calls.append({"rows": tables["table"], "out": Path(out_path), "measures": measures})
        Path(out_path).parent.mkdir(parents=True, exist_ok=True)
        Path(out_path).write_bytes(b"png")

    monkeypatch.setattr(figures, "pair_heatmaps", capture)
    return calls


def test_draws_a_pair_of_a_multi_pair_block_table_at_the_workflows_path(results, capsys):
    expected = results / "figures" / "pairs" / "mean" / "sst2" / "m1__m3.png"
    assert main(["heatmap", "m1", "m3"]) == 0
    assert expected.is_file() and expected.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the real figure
    assert capsys.readouterr().out.strip() == str(Path("results", "figures", "pairs", "mean", "sst2", "m1__m3.png"))


def test_the_figure_gets_that_pairs_rows_only_in_either_order(results, drawn, capsys):
    default = Path("results") / "figures" / "pairs" / "mean" / "sst2" / "m1__m2.png"
    assert main(["heatmap", "m1", "m2"]) == 0
    assert main(["heatmap", "m2", "m1"]) == 0  # reversed: the same pair, the same path
    assert [call["out"] for call in drawn] == [default, default]
    for call in drawn:
        rows = call["rows"]
        assert set(zip(rows["model_a"], rows["model_b"])) == {("m1", "m2")}
        assert len(rows) == len(pair_rows("m1", "m2"))
        # no config here: each label stands for itself
        assert call["measures"] == {label: label for label in sorted(MEASURES)}
    assert capsys.readouterr().out.split() == [str(default)] * 2
    assert main(["heatmap", "m4", "m2", "--out", str(results / "own.png")]) == 0  # the other block table
    assert drawn[-1]["out"] == results / "own.png"
    assert set(zip(drawn[-1]["rows"]["model_a"], drawn[-1]["rows"]["model_b"])) == {("m2", "m4")}


def test_measures_come_from_the_config_as_the_rule_passes_them(results, drawn, tmp_path):
    config = tmp_path / "study.yaml"
    config.write_text("measures:\n  linear_cka: {measure: cka, params: {kernel: linear}}\n"
                      "  neuronsim: {measure: neuronsim}\n  unused: {measure: svcca}\n")
    assert main(["heatmap", "m1", "m2", "--configfile", str(config)]) == 0
    # labels of the rows only; a label the config lacks stands for itself
    assert drawn[-1]["measures"] == {"linear_cka": "cka", "mutual_knn": "mutual_knn", "neuronsim": "neuronsim"}
    assert main(["heatmap", "m1", "m2", "--configfile", str(tmp_path / "missing.yaml")]) == 2


def test_no_pair_tables_of_the_representation(results, drawn, capsys):
    assert main(["heatmap", "m1", "m2", "--representation", "cls"]) == 2
    err = capsys.readouterr().err
    assert "representation 'cls'" in err and str(Path("results") / "pairs" / "cls") in err
    assert main(["heatmap", "m1", "m2", "--results", str(results.parent / "elsewhere")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert not drawn


def test_several_datasets_need_dataset(results, drawn, capsys):
    (results / "pairs" / "mean" / "mrpc").mkdir()
    assert main(["heatmap", "m1", "m2"]) == 2
    err = capsys.readouterr().err
    assert "2 datasets (mrpc, sst2)" in err and "--dataset" in err
    assert main(["heatmap", "m1", "m2", "--dataset", "qnli"]) == 2
    assert "no pair tables of dataset 'qnli'" in capsys.readouterr().err
    assert main(["heatmap", "m1", "m2", "--dataset", "sst2"]) == 0
    assert drawn[-1]["out"] == Path("results") / "figures" / "pairs" / "mean" / "sst2" / "m1__m2.png"


def test_no_table_holds_the_pair(results, drawn, capsys):
    assert main(["heatmap", "m1", "m4"]) == 2  # both models computed, but not compared with each other
    err = capsys.readouterr().err
    assert "no pair table holds m1 vs m4" in err and "searched 2 table(s)" in err
    assert str(Path("results") / "pairs" / "mean" / "sst2") in err
    assert not drawn


def test_an_unreadable_table_is_named(results, drawn, capsys):
    (results / "pairs" / "mean" / "sst2" / "block001__block001.parquet").write_bytes(b"not parquet")
    assert main(["heatmap", "m1", "m2"]) == 0  # found in a readable table: the bad one is named, the pair drawn
    assert "block001__block001.parquet: not a readable Parquet file" in capsys.readouterr().err
    assert main(["heatmap", "m3", "m4"]) == 1  # not found, and a table that might hold it does not read
    err = capsys.readouterr().err
    assert "no pair table holds m3 vs m4: searched 3 table(s)" in err and "1 of them unreadable" in err


def test_the_pairs_page_says_how_to_draw_a_pair_when_the_workflow_drew_none(tmp_path):
    """Pairs in blocks: a pair summary and no heatmaps; the page's heatmap part names `reprsim heatmap`."""
    from reprsim.stages.report.html import render
    from reprsim.stages.report.inputs import ReportInputs

    summary = tmp_path / "pair_summary.parquet"
    pd.DataFrame([{"dataset": "sst2", "representation": "mean", "model_a": "m1", "model_b": "m2",
                   "measure": "linear_cka", "kind": "similarity", "direction": "symmetric", "n_layers": 3,
                   "mean_over_matching_layers": 0.8, "null_mean": 0.1, "ci_low": 0.7, "ci_high": 0.9,
                   "beyond_chance": True, "largest_null_p": 0.01, "n": 64, "warning": ""}]).to_parquet(summary)
    text = render(ReportInputs(pair_summary=(str(summary),), measures={"linear_cka": "cka"}), "pairs")
    assert "<code>reprsim heatmap MODEL_A MODEL_B</code>" in text and "id='heatmaps'" in text
    assert "<img" not in text and "id='pair-summary'" in text
    assert "reprsim heatmap" not in render(ReportInputs(measures={"linear_cka": "cka"}), "pairs")  # no pairs at all
