"""The report's "What is universal?" page, the main page opening with the study's statement, and the study's two
figures, built from the universality stage's own tables on a synthetic study (universality_study.py)."""

from __future__ import annotations

import html
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from test_report import FILES, PNG, _first_table, _h2, inputs  # noqa: E402, F401  (inputs: the fixture)
from universality_study import study_tables, write_study  # noqa: E402

from reprsim.design.senses import AGAINST_IDENTITY, ANSWER_TOPICS  # noqa: E402
from reprsim.stages.report import figures  # noqa: E402
from reprsim.stages.report.common import _with_interval, paragraphs  # noqa: E402
from reprsim.stages.report.html import PAGES, build_report  # noqa: E402
from reprsim.stages.report.inputs import ReportInputs  # noqa: E402
from reprsim.stages.report.labels import UNIVERSALITY_VERDICTS  # noqa: E402
from reprsim.stages.universality.controls import CONTROL_COLUMNS  # noqa: E402

STUDY_FILES = {**FILES, "universality": "universality.html"}
MEASURES = {"linear_cka": "cka", "svcca": "svcca", "procrustes": "procrustes"}


@pytest.fixture(scope="module")
def study() -> dict[str, pd.DataFrame]:
    return study_tables()


@pytest.fixture
def study_inputs(tmp_path, inputs, study) -> dict:  # noqa: F811
    """The report fixture's inputs with the study's tables and its three figures, drawn from them."""
    files = write_study(tmp_path / "results" / "tables", study)
    matrix = tmp_path / "results" / "figures" / "summary" / "universality.png"
    senses = tmp_path / "results" / "figures" / "summary" / "universality_senses.png"
    convergence = tmp_path / "results" / "figures" / "summary" / "convergence.png"
    figures.draw("universality", {"table": study["universality"]}, matrix, confidence=0.95)
    figures.draw("senses", {"table": study["senses"]}, senses, confidence=0.95)
    figures.draw("convergence", {"table": study["convergence"], "claims": study["claims"]}, convergence,
                 measures=MEASURES, confidence=0.95)
    return {**inputs, "universality": [files["universality"]], "universality_statement": [files["statement"]],
            "universality_senses": [files["senses"]], "universality_controls": [files["controls"]],
            "universality_convergence": [files["convergence"], files["claims"]],
            "universality_figure": [str(matrix)], "senses_figure": [str(senses)],
            "convergence_figure": [str(convergence)]}


def _report(tmp_path, named, pages=tuple(STUDY_FILES)) -> dict[str, str]:
    out = tmp_path / "report"
    build_report({name: out / STUDY_FILES[name] for name in pages},
                 ReportInputs.from_named(named, title="Tiny study", task_metrics={}, split="test", confidence=0.95,
                                         measures={"linear_cka": "cka", "neuronsim": "neuronsim"},
                                         grounding_tests=("monotonicity", "prediction", "seeds")))
    return {name: (out / STUDY_FILES[name]).read_text() for name in pages}


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def test_the_page_shows_the_statement_the_verdicts_colours_and_the_figures(tmp_path, study_inputs, study):
    page = _report(tmp_path, study_inputs)["universality"]
    assert "<h1>What is universal?" in page
    assert _h2(page) == ["In which sense?", "Artefact controls", "The statement, level by level",
                         "Factor × depth, per measure", "Over training time"]
    text = _text(page)
    sentences = list(study["statement"]["text"])
    assert len(sentences) >= 6 and all(" ".join(s.split()) in text for s in sentences)
    # the answers (at most ten) lead, under the factor × sense figure; the sentences per level follow
    answers = study["statement"][study["statement"]["topic"].isin(ANSWER_TOPICS)]
    senses = page.split("<h2 id='senses'>")[1].split("<h2")[0]
    assert f"<h3 id='answers'>The answer in {len(answers)} sentences</h3>" in senses and len(answers) <= 10
    assert senses.index("alt=\"in which sense") < senses.index("id='answers'") < senses.index("<table")
    assert senses.split("id='answers'")[1].split("<h3")[0].count("<li>") == len(answers)
    statement = page.split("<h2 id='statement'>")[1].split("<h2")[0]
    assert statement.count("<li>") == len(sentences) - len(answers)
    # how to read: u's definition, the floor, the margin, what the intervals leave out
    for name in ("universality", "universality_senses", "universality_controls", "universality_matrix", "convergence"):
        for paragraph in paragraphs(name):
            assert f"<p class='caption'>{html.escape(paragraph, quote=False)}</p>".replace("&#x27;", "'") in \
                page.replace("&#39;", "'"), name
    assert "The intervals are about recipes" in text and "u = 1: as alike as another seed" in text
    assert "seed placebo" in text and "shuffled-row chance level as zero" in text
    # every verdict's colour with its name and rule, the figure's palette
    legend = page.split("<ul class='legend'>")[1].split("</ul>")[0]  # the thirds table's, the figure's colours
    for verdict, colour in UNIVERSALITY_VERDICTS.items():
        assert re.search(rf"background: {colour}'></span><b>{re.escape(verdict)}</b>: ", legend), verdict
    assert page.count("<img") == 3 and "alt=\"what is universal" in page and "alt=\"cross-seed similarity" in page
    assert "δ = 0.1" in text


def test_the_thirds_table_holds_u_its_interval_and_verdict_per_level_and_measure(tmp_path, study_inputs, study):
    page = _report(tmp_path, study_inputs)["universality"]
    thirds = page.split("<h3 id='thirds'>")[1]
    header, *rows = _first_table(thirds)
    assert header == ["factor: level", "measure", "lower third: u [95% interval]", "middle third: u [95% interval]",
                      "upper third: u [95% interval]", "nats below the unigram reference", "quality note"]
    table = study["universality"]
    levels = table.drop_duplicates(["factor", "level"])
    assert len(rows) == len(levels) * 3  # three measures per level, the level's cells spanning them
    wide = table[(table["level"] == "n_embd 24") & (table["measure"] == "linear_cka")].set_index("depth")
    # the seed placebo first (the reference seeds scored as a level: u = 1, its interval the study's resolution)
    assert " ".join(rows[0][0].replace(" :", ":").split()).startswith("seed placebo: another reference seed")
    start = next(i for i, row in enumerate(rows) if row[0].replace(" :", ":").startswith("width: n_embd 24"))
    assert start == 3 and "wide-s3" in rows[start][0]
    assert rows[start][1] == "linear CKA"
    for k, depth in enumerate(("lower third", "middle third", "upper third")):
        row = wide.loc[depth]
        shown = _with_interval(row["u"], row["ci_low"], row["ci_high"])
        assert row["interval_basis"] == "rows only"  # one model: its interval covers its rows, and says so
        assert " ".join(rows[start][2 + k].split()) == f"{shown} (rows only) {row['verdict']}"
    assert rows[start][5].startswith("2.800") and "seeds 2.420–2.480" in rows[start][5]  # 6.5 nats minus 3.7
    assert "better than every seed sibling" in rows[start][6]
    # grounded measures first; the one that failed a grounding test last, marked and named
    # (the level's own cells span its rows: its second and third rows start with the measure)
    assert [rows[start][1], rows[start + 1][0], rows[start + 2][0]] == ["linear CKA", "SVCCA", "Procrustes†"]
    assert "class='doubtful'" in thirds
    assert "†: failed a grounding test on these models (Procrustes: monotonicity:spearman; see" in _text(thirds)
    assert "href='measures.html'>Which measure?</a>): its cells are shown, faded" in thirds
    # each cell coloured by its verdict
    cells = re.findall(r"<td class='u' style='background: (#[0-9A-F]{6})'>[^<]*<div class='sub'>([^<]+)</div>", thirds)
    assert len(cells) == len(rows) * 3 and all(UNIVERSALITY_VERDICTS[v] == c for c, v in cells)


def test_the_sense_matrix_shows_each_sense_per_level_and_third_and_says_why_a_cell_is_empty(tmp_path, study_inputs,
                                                                                             study):
    page = _report(tmp_path, study_inputs)["universality"]
    section = page.split("<h2 id='senses'>")[1].split("<h2")[0]
    header, *rows = _first_table(section)
    assert header == ["factor: level", "sense", "lower third: u [95% interval]", "middle third: u [95% interval]",
                      "upper third: u [95% interval]"]
    senses = study["senses"]
    levels = senses.drop_duplicates(["factor", "level"])
    # only the senses some cell measures get rows: here the geometric one (linear CKA and SVCCA, grounded;
    # Procrustes failed its grounding test); the others are listed with why
    assert len(rows) == len(levels) and {row[1] for row in rows} == {"geometry"}
    assert " ".join(rows[0][0].replace(" :", ":").split()).startswith("seeds: seed siblings against identical copies")
    assert "geometry</b>: the same geometry, up to a rotation (linear CKA, SVCCA)" in section
    assert ("units</b>: the same units, up to their order: not measured (no measure of this sense in the study)"
            in section)
    assert "function</b>: the same function, one model" in section
    assert "(no stitching into the reference in this study: set universality.function)" in section
    # every cell on its verdict's colour, the seed row's verdicts against identical copies in their own words
    cells = re.findall(r"<td class='u' style='background: (#[0-9A-F]{6})'>([^<]*)<div class='sub'>([^<]+)</div>",
                       section)
    assert len(cells) == len(rows) * 3
    names = {AGAINST_IDENTITY.get(verdict, verdict): verdict for verdict in UNIVERSALITY_VERDICTS}
    for k, (colour, value, verdict) in enumerate(cells):
        assert UNIVERSALITY_VERDICTS[names[verdict] if k < 3 else verdict] == colour, (k, verdict)
    seed_row = senses[(senses["factor"] == "seeds") & (senses["sense"] == "geometry")]
    assert [cell[2] for cell in cells[:3]] == [AGAINST_IDENTITY.get(v, v) for v in seed_row["verdict"]]
    shown = senses.set_index(["factor", "level", "sense", "depth"]).sort_index()
    middle = shown.loc[("width", "n_embd 24", "geometry", "middle third")]
    assert middle["measures"] == "linear_cka, svcca"
    assert f"{_with_interval(middle['u'], middle['ci_low'], middle['ci_high'])} (rows only)" in _text(section)


def test_the_controls_section_counts_each_controls_verdicts_and_lists_the_changed_ones(tmp_path, study_inputs):
    page = _report(tmp_path, study_inputs)["universality"]
    section = page.split("<h2 id='controls'>")[1].split("<h2")[0]
    assert "No artefact control in this study" in section and "<table" not in section  # the study has none
    # a control that changed one of its two verdicts
    base = {"dataset": "corpus", "representation": "mean", "factor": "width", "level": "n_embd 24", "control":
            "linear_cka_pcs", "conditioning": "remove_top_pcs k=1",
            "change": "features conditioned by remove_top_pcs k=1", "measure": "linear_cka", "u": 0.97, "ci_low": 0.9,
            "ci_high": 1.04, "verdict": "as similar as seeds", "control_grounding_failed": "", "n": 400, "m": 200}
    controls = pd.DataFrame([
        {**base, "depth": "lower third", "control_u": 0.95, "control_ci_low": 0.91, "control_ci_high": 1.02,
         "control_verdict": "as similar as seeds", "changed": False},
        {**base, "depth": "middle third", "control_u": 0.41, "control_ci_low": 0.3, "control_ci_high": 0.52,
         "control_verdict": "less similar", "changed": True}], columns=CONTROL_COLUMNS)
    path = tmp_path / "controls.parquet"
    controls.to_parquet(path, index=False)
    section = _report(tmp_path, {**study_inputs, "universality_controls": [str(path)]})["universality"]
    section = section.split("<h2 id='controls'>")[1].split("<h2")[0]
    assert "1 of 2 verdicts differs from linear CKA" in _text(section)
    header, *rows = _first_table(section)
    assert len(rows) == 1 and rows[0][:3] == ["width: n_embd 24", "middle third", "linear CKA"]
    assert rows[0][3] == f"{_with_interval(0.97, 0.9, 1.04)}: as similar as seeds"
    assert rows[0][5] == f"{_with_interval(0.41, 0.3, 0.52)}: less similar"
    assert "remove_top_pcs k=1" in rows[0][4]


def test_the_claims_table_over_training(tmp_path, study_inputs, study):
    page = _report(tmp_path, study_inputs)["universality"]
    section = page.split("<h2 id='convergence'>")[1]
    header, *rows = _first_table(section)
    assert header == ["measure", "depth", "last − first step [95% interval]",
                      "Spearman ρ with the step [95% interval]",
                      "Spearman ρ with the validation loss falling [95% interval]"]
    claims = study["claims"].set_index(["measure", "depth", "statistic"])
    assert [row[:2] for row in rows] == [[name, depth] for name in ("linear CKA", "SVCCA", "Procrustes †")
                                         for depth in ("lower third", "middle third", "upper third")]
    rise = claims.loc[("linear_cka", "lower third", "last minus first")]
    assert rows[0][2] == f"{_with_interval(rise['estimate'], rise['ci_low'], rise['ci_high'])}: {rise['verdict']}"
    assert "(from step 25 to 400, 3 points)" in _text(section)


def test_the_main_page_opens_with_the_statement_and_links_the_page(tmp_path, study_inputs, study):
    pages = _report(tmp_path, study_inputs)
    index = pages["index"]
    h1, statement, lead = index.index("<h1>"), index.index("<h2 id='statement'>"), index.index("<p class='lead'>")
    assert h1 < statement < lead < index.index("<nav class='toc'>")
    opening = index[statement:lead]
    # the answers (at most ten sentences) open it; the sentences per level are on the study's page
    answers = study["statement"]["topic"].isin(ANSWER_TOPICS)
    for sentence in study["statement"].loc[answers, "text"]:
        assert " ".join(sentence.split()) in _text(opening)
    for sentence in study["statement"].loc[~answers, "text"]:
        assert " ".join(sentence.split()) not in _text(opening)
    assert "href='universality.html'" in opening
    toc = index.split("<nav class='toc'>")[1].split("</nav>")[0]
    assert "href='universality.html'" in toc and PAGES["universality"].blurb in html.unescape(toc)
    nav = index.split("<nav class='pages'>")[1].split("</nav>")[0]
    assert _text(nav).startswith("Report pages: Summary · What is universal?")
    for name in ("pairs", "measures"):  # the other pages link it too
        assert "href='universality.html'" in pages[name]


def test_without_a_study_there_is_no_page_and_no_statement(tmp_path, inputs):  # noqa: F811
    pages = _report(tmp_path, inputs, pages=tuple(FILES))
    assert "universality.html" not in pages["index"] and "id='statement'" not in pages["index"]
    with pytest.raises(ValueError, match=r"nothing to show \['universality'\]"):
        _report(tmp_path / "b", inputs)


def test_the_rule_must_ask_for_the_page_when_there_is_a_study(tmp_path, study_inputs):
    with pytest.raises(ValueError, match=r"no output \['universality'\]"):
        _report(tmp_path, study_inputs, pages=tuple(FILES))


# ----------------------------------------------------------------- figures


def _drawn(monkeypatch, name: str, tables: dict, **options):
    """Draw figure `name`, keeping the matplotlib figure instead of saving it."""
    kept = []
    monkeypatch.setattr(figures.universality, "_save", lambda fig, out_path: kept.append(fig))
    figures.draw(name, tables, "unused.png", **options)
    return kept[0]


def test_the_matrix_colours_each_cell_by_its_verdict_and_annotates_u(monkeypatch, study):
    table = study["universality"]
    fig = _drawn(monkeypatch, "universality", {"table": table})
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert [ax.get_title().split("\n")[0] for ax in axes] == ["CKA · linear CKA", "CCA family · SVCCA",
                                                             "alignment · Procrustes distance"]
    assert axes[2].get_title().endswith("failed grounding: monotonicity")  # the test, its variants left out
    thirds = table[table["depth"].str.endswith("third")]
    levels = list(dict.fromkeys(zip(thirds["factor"], thirds["level"])))
    cka = thirds[thirds["measure"] == "linear_cka"].set_index(["factor", "level", "depth"])
    colours = {to_hex(p.get_facecolor()[:3]).upper(): p for p in axes[0].patches}
    for verdict in set(cka["verdict"]):
        assert UNIVERSALITY_VERDICTS[verdict] in colours, verdict
    texts = {t.get_text() for t in axes[0].texts}
    row = cka.loc[(levels[0][0], levels[0][1], "upper third")]
    assert f"{row['u']:.2f}\n[{row['ci_low']:.2f}, {row['ci_high']:.2f}]" in texts
    assert levels[0] == ("placebo", "another reference seed")  # the seed placebo's row first
    assert [t.get_text() for t in axes[0].get_yticklabels()][:3] == [
        "seed placebo: another reference seed", f"width: {levels[1][1]}", f"width: {levels[2][1]}"]
    wide = cka.loc[(levels[1][0], levels[1][1], "upper third")]  # one model: marked rows only
    assert f"{wide['u']:.2f} rows\n[{wide['ci_low']:.2f}, {wide['ci_high']:.2f}]" in texts
    assert not any(t.get_text() for t in axes[1].get_yticklabels())  # the first column's labels serve the row
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert [t.split(":")[0] for t in legend] == list(UNIVERSALITY_VERDICTS)
    assert "δ = 0.1" in fig._suptitle.get_text()
    plt.close(fig)


def test_the_convergence_curve_shows_grounded_measures_and_the_fit(monkeypatch, study):
    fig = _drawn(monkeypatch, "convergence", {"table": study["convergence"], "claims": study["claims"]},
                 measures=MEASURES)
    shown = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in shown] == ["CKA · linear CKA", "CCA family · SVCCA",
                                                "the seed siblings' fit (lower = better)"]
    labels = [t.get_text() for t in shown[0].get_legend().get_texts()]
    assert len(labels) == 3 and labels[0].startswith("lower third: rises, +0.")
    assert [len(line.get_xdata()) for line in shown[0].get_lines()] == [3, 3, 3]
    assert "procrustes" in fig._suptitle.get_text()  # left out, and said so
    assert shown[2].get_ylabel() == "validation cross-entropy (nats)"
    plt.close(fig)


def test_both_figures_render_and_degenerate_tables_say_why(tmp_path, study):
    figures.draw("universality", {"table": study["universality"]}, tmp_path / "u.png")
    figures.draw("convergence", {"table": study["convergence"], "claims": study["claims"]}, tmp_path / "c.png",
                 measures=MEASURES)
    assert (tmp_path / "u.png").read_bytes().startswith(PNG) and (tmp_path / "c.png").read_bytes().startswith(PNG)
    one = study["universality"][study["universality"]["measure"] == "linear_cka"]
    figures.draw("universality", {"table": one}, tmp_path / "one.png")  # one panel
    undefined = one.assign(u=np.nan, ci_low=np.nan, ci_high=np.nan, verdict="undefined")
    figures.draw("universality", {"table": undefined}, tmp_path / "undefined.png")
    figures.draw("convergence", {"table": study["convergence"].iloc[:0], "claims": study["claims"].iloc[:0]},
                 tmp_path / "none.png")
    for name in ("one", "undefined", "none"):
        assert (tmp_path / f"{name}.png").read_bytes().startswith(PNG)
