"""Which measure to believe (measures.html): the grounding tests' measure × test matrix and the measures' agreement
and discordant orderings."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from reprsim.io.tables import read_tables
from reprsim.stages.report.common import Figure, _measure_name, _number, _rows_compared, _with_interval, paragraphs
from reprsim.stages.report.inputs import ReportInputs
from reprsim.stages.report.labels import representation_text
from reprsim.tables.grounding import CANNOT_RANK, DESCRIPTIVE, FAIL, PASS, RANKABLE, TOO_FEW, UNDEFINED

TEST_NAMES = {
    ("monotonicity", "spearman"): "layer monotonicity ρ", ("monotonicity", "conformity"): "layer conformity",
    ("deletion", "spearman"): "PC deletion ρ", ("layer", "spearman"): "layer probe ρ",
    ("prediction", "accuracy"): "accuracy difference ρ", ("prediction", "disagreement"): "disagreement ρ",
    ("prediction", "jsd"): "output JSD ρ",
    ("groups:label_noise", "auprc"): "label noise AUPRC", ("groups:label_noise", "d_prime"): "label noise d′",
    ("groups:shortcut", "auprc"): "shortcut AUPRC", ("groups:shortcut", "d_prime"): "shortcut d′",
    ("groups:augment", "auprc"): "augmentation AUPRC", ("groups:augment", "d_prime"): "augmentation d′",
    ("seeds", "auprc"): "recipe groups AUPRC", ("seeds", "d_prime"): "recipe groups d′",
    ("specificity", "same_depth"): "same-depth specificity",
}
ALL_RECIPES = "all recipes: "  # the prediction test's descriptive variants over every recipe
WHY_LEFT_OUT = {
    "monotonicity": "no model has three or more layers",
    "deletion": "its linear probe trains on the train split, which extraction.splits leaves out",
    "layer": "it needs seed siblings of one depth with probes on every layer (the probes train on the train split)",
    "prediction": "it needs at least three models of one recipe (seed siblings) fine-tuned on this dataset (three "
                  "pairs to rank)",
    "groups": "no models were fine-tuned to differ by design (label_noise, shortcut or augment, at least three "
              "models and two settings in one family)",
    "seeds": "no two models share a recipe (seed siblings)",
    "specificity": "no two seed siblings of one depth with three or more layers",
}
# a mark where a grounding test decides
MARKS = {PASS: "✓", FAIL: "✗"}


def _discordance_sentence(row) -> str:
    """One discordant ordering in words, both differences with their intervals."""
    def side(label: str, difference: float, low: float, high: float) -> str:
        more = "more" if difference > 0 else "less"
        return (f"{_measure_name(label)} rates {row.pair_1} {more} alike than {row.pair_2} (by "
                f"{_with_interval(abs(difference), *sorted((abs(low), abs(high))))})")
    return (side(row.measure_x, row.difference_x, row.x_low, row.x_high) + "; "
            + side(row.measure_y, row.difference_y, row.y_low, row.y_high).replace(f" {row.pair_1} ", " it ", 1)
            .replace(f" than {row.pair_2} ", " ", 1))


def agreement_section(inputs: ReportInputs) -> dict | None:
    """The measures' rank agreement (figure and table) and every discordant ordering (the strongest first)."""
    if not inputs.measure_agreement:
        return None
    section = {"caption": paragraphs("measure_agreement"), "figures": [], "table": None, "discordance": None,
               "confidence": f"{inputs.confidence:.0%}"}
    for path in inputs.measure_agreement_figure:
        rows = _rows_compared(inputs) or "n in the pair tables"
        section["figures"].append(Figure(path, f"Kendall τ_b between every two measures ({rows}); chance: 0 (unrelated "
                                               "orders); hatched: the interval contains 0.",
                                         alt="measure × measure rank agreement", wide=True))
    table = read_tables(inputs.measure_agreement)
    if len(table):
        shown = []
        for row in table[table["statistic"] == "kendall_tau_b"].itertuples():
            spearman = table[(table["scope"] == row.scope) & (table["measure_x"] == row.measure_x) &
                             (table["measure_y"] == row.measure_y) & (table["statistic"] == "spearman_rho") &
                             (table["dataset"] == row.dataset) & (table["representation"] == row.representation)]
            shown.append({"dataset": row.dataset, "representation": representation_text(row.representation),
                          "scope": row.scope, "measures": f"{_measure_name(row.measure_x)} · "
                                                          f"{_measure_name(row.measure_y)}",
                          "items": int(row.n_items),
                          "Kendall τ_b": _with_interval(row.estimate, row.ci_low, row.ci_high),
                          "Spearman ρ": (_with_interval(*spearman[["estimate", "ci_low", "ci_high"]].iloc[0])
                                         if len(spearman) else "–")})
        section["table"] = {"rows": len(shown), "table": pd.DataFrame(shown)}
    if inputs.discordance:
        discordant = read_tables(inputs.discordance)
        section["discordance"] = {"count": len(discordant),
                                  "sentences": [_discordance_sentence(row) for row in discordant.head(15).itertuples()],
                                  "others": max(0, len(discordant) - 15)}
    return section


def _test_name(test: str, variant: str) -> str:
    if variant.startswith(ALL_RECIPES):
        return ALL_RECIPES + _test_name(test, variant[len(ALL_RECIPES):])
    return TEST_NAMES.get((test, variant), f"{test} {variant}")


def _p(value) -> str:
    """A p-value in two significant digits, – where there is none."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return "–"
    return "–" if not np.isfinite(value) else f"{value:.2g}" if value >= 1e-4 else f"{value:.0e}"


def _grounding_table(path: str) -> pd.DataFrame:
    """measure_tests.parquet with every column the page reads: a table from before the item-level nulls (no
    `decision`) is decided by its interval alone, as it was then, its d′ rows descriptive."""
    table = pd.read_parquet(path)
    if "decision" not in table:
        table["decision"] = np.where(table["score"].isna(), UNDEFINED,
                                     np.where(table["beyond_chance"].astype(bool), PASS, FAIL))
        table.loc[table["variant"].str.endswith("d_prime") & table["score"].notna(), "decision"] = DESCRIPTIVE
    table["decision"] = table["decision"].fillna(UNDEFINED).astype(str)
    for column in ("p_value", "min_p", "null_quantile", "null_mean"):
        if column not in table:
            table[column] = np.nan
    if "null" not in table:
        table["null"] = ""
    table["null"] = table["null"].fillna("").astype(str)
    return table


def _detail(row) -> dict:
    try:
        return json.loads(row.detail) if isinstance(row.detail, str) else {}
    except ValueError:
        return {}


def _why_too_few(rows: pd.DataFrame, alpha: float) -> str:
    """Why a test (its rows that say "too few items") ranks no measure: a null no score could clear, else too few
    items."""
    min_p = rows["min_p"].dropna()
    if len(min_p) and (min_p > alpha).all():
        return (f"{int(rows['n_items'].max())} items; even a perfect score's p under its null would be "
                f"{_p(min_p.min())}, above {_p(alpha)}")
    return f"{int(rows['n_items'].max())} items, fewer than grounding.min_items"


def _descriptive_why(variant: str) -> str:
    if variant.endswith("d_prime"):
        return "d′ changes under monotone transforms of the measure and rests on few positives"
    if variant.startswith(ALL_RECIPES):
        return "it mixes recipes, so it tests the groups as much as prediction"
    return "it is shown, not tested"


def _test_sentence(rows: pd.DataFrame, alpha: float) -> str:
    """Who passes and who fails one test (best first), and what it could not decide, and why."""
    decided = rows[rows["decision"].isin(RANKABLE)].sort_values("score", ascending=False, kind="stable")
    parts = []
    if len(decided):
        passed = [_measure_name(m) for m in decided.loc[decided["decision"] == PASS, "measure"]]
        failed = [_measure_name(m) for m in decided.loc[decided["decision"] == FAIL, "measure"]]
        parts.append(f"passes: {', '.join(passed)}" if passed else "no measure passes")
        if failed:
            parts.append(f"fails: {', '.join(failed)}")
        parts[-1] += " (best first)"
    few = rows[rows["decision"] == TOO_FEW]
    if len(few):
        who = "" if len(few) == len(rows[rows["decision"] != UNDEFINED]) else \
            f" for {', '.join(_measure_name(m) for m in few['measure'])}"
        parts.append(f"too few items{who} ({_why_too_few(few, alpha)}): not ranked")
    cannot = rows[rows["decision"] == CANNOT_RANK]
    if len(cannot):
        why = _detail(next(cannot.itertuples())).get("why", "")
        parts.append("cannot rank" + (f": {why}" if why else ""))
    descriptive = rows[rows["decision"] == DESCRIPTIVE]
    if len(descriptive):
        parts.append(f"descriptive, shown but not ranked or passed ({_descriptive_why(descriptive['variant'].iloc[0])})")
    undefined = rows[rows["decision"] == UNDEFINED]
    if len(undefined):
        parts.append(f"undefined here: {', '.join(_measure_name(m) for m in undefined['measure'])}")
    return "; ".join(parts)


def _accuracy(values: list) -> str:
    """The first of `values` as an accuracy to three decimals, – for none."""
    return f"{float(values[0]):.3f}" if values and values[0] is not None and np.isfinite(values[0]) else "–"


def _deletion_probes(table: pd.DataFrame) -> pd.DataFrame | None:
    """The deletion test's probe per checked (models, layer) cell and model: its held-out accuracy undeleted and
    at the last k, the drop, the model's own head, whether the accuracy falls with k and whether the cell entered
    the test (the same in every measure's deletion row: one is read)."""
    rows = []
    for row in table[table["test"] == "deletion"].itertuples():
        checked = _detail(row).get("checked")
        if not checked:
            continue
        for cell in checked:
            grid = cell.get("k") or []
            for model, probe in cell.get("probe", {}).items():
                accuracy = probe.get("accuracy") or []
                rows.append({
                    "layer": cell.get("layer"), "model": model, "probe at k = 0": _accuracy(accuracy[:1]),
                    "last k": grid[-1] if grid else "–", "probe at last k": _accuracy(accuracy[-1:]),
                    "drop (± s.e.)": (f"{probe['drop']:.3f} ± {probe['drop_se']:.3f}"
                                      if probe.get("drop") is not None and probe.get("drop_se") is not None else "–"),
                    "own head": _accuracy([probe.get("head_accuracy")]),
                    "falls": "yes" if probe.get("falls") else "no",
                    "used": "yes" if cell.get("used") else "no"})
        break
    return pd.DataFrame(rows) if rows else None


def which_measure(inputs: ReportInputs) -> dict | None:
    """The measure × test matrix (score [interval], rank among the measures the test ranks, item-level p), and for
    each test the measures that pass and fail it, or why it ranks none (too few items, cannot rank, descriptive);
    the deletion test's probes; tests that could not run, and why."""
    if not inputs.measure_tests:
        return None
    table = _grounding_table(inputs.measure_tests[0])
    section = {"caption": paragraphs("measure_tests"), "empty": table.empty}
    if table.empty:
        return section
    alpha = 1.0 - inputs.confidence
    table["column"] = [_test_name(t, v) for t, v in zip(table["test"], table["variant"])]
    columns = list(dict.fromkeys(table["column"]))
    measures = list(dict.fromkeys(table["measure"]))
    rankable = table["decision"].isin(RANKABLE) & table["score"].notna()
    # ranks among the measures a test ranks (not descriptive, too few items, cannot rank), 1 = best, "min" ties
    table["shown_rank"] = table["score"].where(rankable).groupby(table["column"]).rank(ascending=False,
                                                                                       method="min")
    cells = {}
    for row in table.itertuples():
        if row.decision == CANNOT_RANK:
            cells[(row.measure, row.column)] = {"mark": "", "value": "", "rank": None, "interval": "",
                                                "note": "cannot rank"}
            continue
        if not np.isfinite(row.score):  # undefined for this measure here (the detail says why): no cell
            continue
        # short lines (score and rank, the interval, the p-value) keep ~17 test columns within a page's width
        value, _, bounds = _with_interval(row.score, row.ci_low, row.ci_high).partition(" [")
        notes = [f"p {_p(row.p_value)}"] if np.isfinite(row.p_value) else []
        if row.decision not in RANKABLE:
            notes.append("too few" if row.decision == TOO_FEW else row.decision)
        cells[(row.measure, row.column)] = {
            "mark": MARKS.get(row.decision, ""), "value": value,
            "rank": int(row.shown_rank) if np.isfinite(row.shown_rank) else None,
            "interval": "[" + bounds if bounds else "", "note": " · ".join(notes)}
    by_column = table.groupby("column", sort=False)
    chance, items = by_column["chance"].median(), by_column["n_items"].max()
    quantile, min_p = by_column["null_quantile"].median(), by_column["min_p"].median()
    tests = []
    for column in columns:
        rows = table[table["column"] == column]
        about = [f"{int(items[column])} item{'s' if items[column] > 1 else ''}"] if items[column] > 0 else []
        about += [f"null: {kind}" for kind in dict.fromkeys(rows["null"]) if kind]
        tests.append({"name": column, "about": "; ".join(about), "sentence": _test_sentence(rows, alpha)})
    ran = {test.split(":")[0] for test in table["test"]}
    section.update(columns=columns, chance=[_number(chance[c]) for c in columns],
                   counts=[int(items[c]) for c in columns],
                   quantiles=[_number(quantile[c]) for c in columns], min_p=[_p(min_p[c]) for c in columns],
                   rows=[{"measure": _measure_name(m), "cells": [cells.get((m, c)) for c in columns]} for m in measures],
                   n_rows=int(table["n_rows"].iloc[0]), confidence=f"{inputs.confidence:.0%}", alpha=_p(alpha),
                   tests=tests, probes=_deletion_probes(table),
                   left_out=[{"test": t, "why": WHY_LEFT_OUT.get(t, "its inputs are missing")}
                             for t in inputs.grounding_tests if t not in ran])
    return section
