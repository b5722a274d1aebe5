"""reprsim.plotting.plots: the report's layer × layer heatmap and model × model summary from a pair table of reprsim.compare,
drawn by the same code as the report's figures (reprsim.plotting.drawing), read back from what matplotlib drew."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from rounding import products  # noqa: E402

import reprsim  # noqa: E402
from reprsim.plotting import drawing
from reprsim.plotting import plots  # noqa: E402
from reprsim.plotting.plots import model_summary, plot_layers, plot_models  # noqa: E402
from reprsim.stages.compare.summaries import pair_summary  # noqa: E402
from reprsim.stages.report import figures  # noqa: E402

SETTINGS = {"permutations": 20, "resamples": 20, "seed": 0}


def _stacks() -> dict[str, np.ndarray]:
    """Four models on the same 40 rows: A (4 independent random layers), B (A's layers rotated, plus noise: its
    layer l matches A's layer l, no other), C (3 layers, A's first, middle and last, noisier), D (4 random layers
    unrelated to the others: its cells are not beyond chance)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 40, 6))
    rotation = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    b = a @ rotation + 0.4 * rng.standard_normal(a.shape)
    c = a[[0, 2, 3]] + 0.8 * rng.standard_normal((3, 40, 6))
    return {"A": a, "B": b, "C": c, "D": rng.standard_normal((4, 40, 6))}


@pytest.fixture(scope="module")
def pair() -> pd.DataFrame:
    stacks = _stacks()
    return reprsim.compare(stacks["A"], stacks["B"], ["cka", "neuronsim"], names=("A", "B"), **SETTINGS)


@pytest.fixture(scope="module")
def many() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A many-model table as compare_many gives it (every pair once, model_a first in the given order), built from
    compare calls, with the replicates' long table."""
    stacks = _stacks()
    tables, longs = [], []
    names = list(stacks)
    for a, b in [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]:
        table, long = reprsim.compare(stacks[a], stacks[b], ["cka", "neuronsim"], names=(a, b), replicates=True,
                                      **SETTINGS)
        tables.append(table)
        longs.append(long)
    return pd.concat(tables, ignore_index=True), pd.concat(longs, ignore_index=True)


def _panel(fig):
    """The heatmap's axes (the one with an image and a title; the colour bar has none)."""
    axes = [ax for ax in fig.axes if ax.get_images() and ax.get_title()]
    assert len(axes) == 1
    return axes[0]


def _caption(fig) -> str:
    """The figure's caption (its suptitle), its wrapping undone."""
    return " ".join(fig._suptitle.get_text().split())


def _hatched(ax) -> set[tuple[int, int]]:
    """(row, column) of every hatched cell."""
    return {(round(p.get_y() + 0.5), round(p.get_x() + 0.5)) for p in ax.patches if p.get_hatch()}


def test_the_heatmap_has_one_cell_per_layer_pair_with_its_value_and_marks(pair):
    rows = pair[pair["measure"] == "cka"]
    fig = plot_layers(rows)
    ax = _panel(fig)
    drawn = np.asarray(ax.get_images()[0].get_array())
    assert drawn.shape == (4, 4)
    expected = rows.pivot(index="layer_a", columns="layer_b", values="value").to_numpy()
    assert np.array_equal(drawn, expected)  # the table's numbers, rows = A's layers, columns = B's
    assert ax.get_images()[0].origin == "lower"
    # every cell says its value with two decimals
    assert sorted(t.get_text() for t in ax.texts) == sorted(drawing.two(v) for v in expected.ravel())
    # the cells whose interval does not exclude chance are hatched, and only those
    marked = {(int(a), int(b)) for a, b in rows.loc[~rows["beyond_chance"].astype(bool), ["layer_a", "layer_b"]]
              .itertuples(index=False)}
    assert marked and len(marked) < len(rows)  # this fixture has both kinds of cell
    assert _hatched(ax) == marked
    assert {(i, i) for i in range(4)}.isdisjoint(marked)  # B's layer l is A's layer l, rotated
    # the chance level (permutation null mean) is in the panel's title; the caption says what hatching means
    assert ax.get_title().startswith("CKA\nsimilarity, chance ")
    assert ax.get_title().endswith(drawing.chance_text(rows["null_mean"]))
    caption = _caption(fig)
    assert "A vs B" in caption and "n = 40" in caption and "hatched: interval does not exclude chance" in caption
    plt.close(fig)


def test_the_heatmap_of_an_asymmetric_measure_draws_the_chosen_direction_either_way_round(pair):
    rows = pair[(pair["measure"] == "neuronsim") & (pair["direction"] == "b->a")]
    expected = rows.pivot(index="layer_a", columns="layer_b", values="value").to_numpy()
    fig = plot_layers(pair, "neuronsim", direction="b->a")
    ax = _panel(fig)
    assert np.array_equal(np.asarray(ax.get_images()[0].get_array()), expected)
    assert "(B→A)" in ax.get_title()
    # the pair given the other way round: B's layers are the rows, and b->a of (A, B) is a->b of (B, A)
    flipped = plot_layers(pair, "neuronsim", models=("B", "A"), direction="a->b")
    ax = _panel(flipped)
    assert np.array_equal(np.asarray(ax.get_images()[0].get_array()), expected.T)
    assert "(B→A)" in ax.get_title() and ax.get_ylabel() == "layer of B"
    plt.close("all")


def test_a_given_axes_is_drawn_on_and_its_figure_returned(pair):
    fig, (left, right) = plt.subplots(1, 2)
    assert plot_layers(pair, "cka", ax=right) is fig
    assert right.get_images() and not left.get_images() and fig._suptitle is None
    plt.close(fig)


def _summary_value(table: pd.DataFrame, a: str, b: str, measure: str, direction: str, pairs) -> float:
    """Mean of the table's values over the given layer pairs, by hand."""
    rows = table[(table["model_a"] == a) & (table["model_b"] == b) & (table["measure"] == measure)
                 & (table["direction"] == direction)].set_index(["layer_a", "layer_b"])["value"]
    return float(np.mean([rows.loc[p] for p in pairs]))


def test_the_model_summary_has_one_cell_per_model_pair_with_the_mean_over_matching_layers(many):
    table, long = many
    fig = plot_models(table, "cka", replicates=long)
    ax = _panel(fig)
    drawn = np.asarray(ax.get_images()[0].get_array())
    assert drawn.shape == (4, 4) and np.isnan(np.diag(drawn)).all()  # the diagonal is blank
    assert [t.get_text() for t in ax.get_yticklabels()] == ["A", "B", "C", "D"]  # the given order
    # A and B have 4 layers each (3 blocks): matching layers are (l, l); C has 3 layers (2 blocks): each layer of the
    # shallower model meets the same relative depth, C's 0, 1, 2 A's round(l · 3/2) = 0, 2, 3 (reprsim.tables.layers)
    same_depth = [(layer, layer) for layer in range(4)]
    to_c = [(0, 0), (2, 1), (3, 2)]
    expected = {("A", "B"): _summary_value(table, "A", "B", "cka", "symmetric", same_depth),
                ("A", "C"): _summary_value(table, "A", "C", "cka", "symmetric", to_c),
                ("B", "C"): _summary_value(table, "B", "C", "cka", "symmetric", to_c)}
    index = {"A": 0, "B": 1, "C": 2, "D": 3}
    for (a, b), value in expected.items():  # a symmetric measure: both cells
        tolerance = products(4, scale=1.0)
        assert drawn[index[a], index[b]] == pytest.approx(value, abs=tolerance)
        assert drawn[index[b], index[a]] == pytest.approx(value, abs=tolerance)
    # the cells whose interval does not exclude chance are hatched, and only those
    summary = model_summary(table, long).query("measure == 'cka'")
    marked = {(index[a], index[b]) for a, b, beyond in zip(summary["model_a"], summary["model_b"],
                                                         summary["beyond_chance"]) if not beyond}
    assert {(3, 0), (0, 3)} <= _hatched(ax) == marked | {(j, i) for i, j in marked}  # D is nobody's
    assert (0, 1) not in marked
    assert drawing.chance_text(summary["null_mean"]) in ax.get_title()
    caption = _caption(fig)
    assert "Mean over matching layers" in caption and "95% interval" in caption and "n = 40" in caption
    plt.close(fig)


def test_an_asymmetric_summary_fills_each_direction_and_without_replicates_has_no_interval(many):
    table, _ = many
    fig = plot_models(table, "neuronsim", models=["C", "A"])
    ax = _panel(fig)
    drawn = np.asarray(ax.get_images()[0].get_array())
    to_c = [(0, 0), (2, 1), (3, 2)]  # C's layers 0, 1, 2 at A's same relative depth
    # cell (row x, column y) is the direction with x's layer as X: (A, C) a->b in row A, b->a in row C
    assert drawn[1, 0] == pytest.approx(_summary_value(table, "A", "C", "neuronsim", "a->b", to_c),
                                        abs=products(4, scale=1.0))
    assert drawn[0, 1] == pytest.approx(_summary_value(table, "A", "C", "neuronsim", "b->a", to_c),
                                        abs=products(4, scale=1.0))
    assert "row → column" in ax.get_title()
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 2 and not any("–" in t for t in texts)  # the means only: no interval
    assert "pass replicates=" in _caption(fig)
    # without intervals a cell is marked when a matching layer's permutation p is above 0.05 (the report's rule)
    unrelated = plot_models(table, "cka", models=["A", "B", "D"])
    rows = table[(table["measure"] == "cka") & (table["model_a"] == "A") & (table["model_b"] == "D")]
    assert rows.loc[rows["layer_a"] == rows["layer_b"], "null_p"].max() > 0.05
    assert _hatched(_panel(unrelated)) == {(0, 2), (2, 0), (1, 2), (2, 1)}  # D against A and B; A–B is not marked
    plt.close("all")


def test_the_summary_is_the_workflows_pair_summary(many):
    """model_summary (the public API imports no stage) gives the compare stage's pair_summary on the same table."""
    table, long = many
    ours = model_summary(table, long, 0.95)
    theirs = pair_summary(table.assign(dataset="d", representation="r"), long.assign(dataset="d", representation="r"),
                          0.95)
    keys = ["model_a", "model_b", "measure", "direction"]
    merged = theirs.merge(ours, on=keys, suffixes=("_stage", "_plots"), validate="one_to_one")
    assert len(merged) == len(theirs) == len(ours) == 6 * 3  # six pairs: cka, neuronsim both ways
    # means of at most 4 values, and intervals 2.1 standard errors of means of 4 values wide
    tolerance = products(4, scale=float(np.abs(table["value"]).max()))
    for column in ("mean_over_matching_layers", "null_mean"):
        np.testing.assert_allclose(merged[f"{column}_plots"], merged[f"{column}_stage"], rtol=0, atol=tolerance)
    for column in ("ci_low", "ci_high"):
        np.testing.assert_allclose(merged[f"{column}_plots"], merged[f"{column}_stage"], rtol=0, atol=6 * tolerance)
    for column in ("n_layers", "largest_null_p", "n", "beyond_chance", "kind"):
        assert merged[f"{column}_plots"].tolist() == merged[f"{column}_stage"].tolist(), column


def test_errors_name_the_problem(pair, many):
    table, _ = many
    with pytest.raises(ValueError, match="no column 'value'"):
        plot_layers(pair.drop(columns="value"))
    with pytest.raises(ValueError, match="no column 'kind', 'direction'"):
        plot_models(table.drop(columns=["kind", "direction"]))
    with pytest.raises(ValueError, match=r"2 measures of A vs B \('cka', 'neuronsim'\); choose one with measure="):
        plot_layers(pair)
    with pytest.raises(ValueError, match=r"unknown measure 'ckaa' \(did you mean 'cka'\?\)"):
        plot_layers(pair, "ckaa")
    with pytest.raises(ValueError, match=r"2 directions of 'neuronsim' for A vs B \('a->b', 'b->a'\)"):
        plot_layers(pair, "neuronsim")
    with pytest.raises(ValueError, match=r"6 model pairs \(\('A', 'B'\), \('A', 'C'\), \('A', 'D'\), .*\('C', 'D'\)\); "
                                         r"choose one with models="):
        plot_layers(table, "cka")
    with pytest.raises(ValueError, match=r"unknown model 'E'; the table holds 'A', 'B', 'C', 'D'"):
        plot_layers(table, "cka", models=("A", "E"))
    with pytest.raises(ValueError, match=r"unknown model 'E'"):
        plot_models(table, "cka", models=["A", "E"])
    with pytest.raises(ValueError, match=r"choose one with measure="):
        plot_models(table)
    with pytest.raises(ValueError, match=r"unknown measure 'svcca'"):
        plot_models(table, "svcca")
    with pytest.raises(ValueError, match="two models or more"):
        plot_models(table, "cka", models=["A"])
    with pytest.raises(ValueError, match=r"2 values of 'dataset' \('x', 'y'\); select one"):
        plot_layers(pd.concat([pair.assign(dataset="x"), pair.assign(dataset="y")]), "cka")
    with pytest.raises(ValueError, match="replicates table has no column 'replicate'"):
        plot_models(table, "cka", replicates=table)


def test_the_report_and_the_plots_draw_through_the_same_functions(pair, many, monkeypatch):
    """The stage's figures call reprsim.plotting.drawing (no copy of their own), and a panel drawn by plot_layers or
    plot_models is the report's panel: same image, colours, texts, hatching and title."""
    modules = [getattr(figures, page) for page in ("base", "index", "pairs", "models", "alignment", "attention",
                                                   "stitching", "measures", "universality")]
    for name in ("CHANCE_HATCH", "CHANCE_NOTE", "MEASURE_LABELS"):
        holders = [module for module in modules if hasattr(module, name)]
        assert holders and all(getattr(module, name) is getattr(drawing, name) for module in holders), name
    for private in ("_heatmap_panel", "_summary_panel", "_summary_cells", "_colour_range", "_undefined_note"):
        assert not any(hasattr(module, private) for module in [figures, *modules]), private
    assert not hasattr(plots, "heatmap_panel") and not hasattr(plots, "summary_panel")  # plots calls drawing.<fn>

    calls = []
    for name in ("heatmap_panel", "summary_panel"):
        original = getattr(drawing, name)
        monkeypatch.setattr(drawing, name, lambda *a, _name=name, _f=original, **k: (calls.append(_name),
                                                                                      _f(*a, **k))[1])
    saved = []
    for module in (figures.pairs, figures.index):  # the heatmap's and the model summary's
        monkeypatch.setattr(module, "_save", lambda fig, path: saved.append(fig))
    workflow = pair.assign(dataset="d", representation="mean", split="test")
    figures.draw("heatmap", {"table": workflow[workflow["measure"] == "cka"]}, "unused.png", measures={"cka": "cka"})
    ours = plot_layers(workflow, "cka")
    table, long = many
    summary = pair_summary(table.assign(dataset="d", representation="mean"),
                           long.assign(dataset="d", representation="mean"), 0.95)
    figures.draw("model_summary", {"table": summary[summary["measure"] == "cka"]}, "unused.png", dataset="d",
                 representation="mean", measures={"cka": "cka"})
    ours_summary = plot_models(table, "cka", replicates=long, models=["A", "B", "C", "D"])
    assert calls == ["heatmap_panel", "heatmap_panel", "summary_panel", "summary_panel"]
    for report, plotted in ((saved[0], ours), (saved[1], ours_summary)):
        report_ax, plotted_ax = _panel(report), _panel(plotted)
        report_image, plotted_image = report_ax.get_images()[0], plotted_ax.get_images()[0]
        np.testing.assert_array_equal(np.asarray(report_image.get_array()), np.asarray(plotted_image.get_array()))
        assert report_image.get_cmap().name == plotted_image.get_cmap().name
        assert (report_image.norm.vmin, report_image.norm.vmax) == (plotted_image.norm.vmin, plotted_image.norm.vmax)
        assert [t.get_text() for t in report_ax.texts] == [t.get_text() for t in plotted_ax.texts]
        assert _hatched(report_ax) == _hatched(plotted_ax)
        assert report_ax.get_title() == plotted_ax.get_title()
    plt.close("all")
