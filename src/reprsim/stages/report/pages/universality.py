"""What is universal (universality.html): the study's statement, the factor × sense and factor × depth matrices of
verdicts, the artefact controls, and cross-seed similarity over training."""

from __future__ import annotations

import os
from functools import lru_cache

import pandas as pd

from reprsim.design.senses import AGAINST_IDENTITY, ANSWER_TOPICS, SEEDS_ROW
from reprsim.io.tables import read_table, read_tables
from reprsim.measure_registry import FAMILIES
from reprsim.stages.report.common import Figure, _link, _measure_name, _number, _with_interval, paragraphs
from reprsim.stages.report.inputs import ReportInputs
from reprsim.stages.report.labels import UNIVERSALITY_VERDICTS, representation_text
from reprsim.tables.universality import FACTOR_LABELS, THIRDS, VERDICT_RULES

CLAIM_STATISTICS = {"last minus first": "last − first step", "spearman_rho_step": "Spearman ρ with the step",
                    "spearman_rho_loss": "Spearman ρ with the validation loss falling",
                    "spearman_rho_competence": "Spearman ρ with the shared probe's accuracy rising"}


def _statement(inputs: ReportInputs) -> tuple[list[str], list[str]]:
    """The study's sentences, in the stage's order: (the answers, at most ten; the sentences per factor level and
    the rest)."""
    return _statement_of(tuple((path, os.stat(path).st_mtime_ns) for path in inputs.universality_statement))


@lru_cache(maxsize=4)
def _statement_of(files: tuple[tuple[str, int], ...]) -> tuple[list[str], list[str]]:
    """:func:`_statement` of the statement tables (path, modification time), read once for the three places that
    show them (the page's opening, the senses section, the statement section)."""
    table = read_tables([path for path, _ in files])
    if "text" not in table:
        return [], []
    answer = table["topic"].isin(ANSWER_TOPICS)
    return [str(text) for text in table.loc[answer, "text"]], [str(text) for text in table.loc[~answer, "text"]]


def _convergence_tables(inputs: ReportInputs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the convergence curve, its claims): the convergence input holds both tables, told apart by their columns
    (a claim has a statistic)."""
    curve, claims = pd.DataFrame(), pd.DataFrame()
    for path in inputs.universality_convergence:
        table = read_table(path)
        if "statistic" in table:
            claims = table
        else:
            curve = table
    return curve, claims


def _headline_first(rows: pd.DataFrame) -> list[str]:
    """The measures of a universality table in the figure's order: grounded ones first, each group by family (the
    registry's order), in the table's (the configuration's) order within a family."""
    first = rows.drop_duplicates("measure").reset_index(drop=True)
    headline = first["headline"].astype(bool) if "headline" in first else pd.Series(True, index=first.index)
    family = first["family"] if "family" in first else pd.Series("", index=first.index)
    rank = [FAMILIES.index(f) if f in FAMILIES else len(FAMILIES) for f in family]
    return [first["measure"][k] for k in sorted(first.index, key=lambda k: (not headline[k], rank[k], k))]


def _verdict_legend() -> list[dict]:
    """Each verdict with its colour (the figure's) and what it says of u's interval."""
    return [{"verdict": verdict, "colour": colour, "rule": VERDICT_RULES[verdict]}
            for verdict, colour in UNIVERSALITY_VERDICTS.items()]


def universality_statement(inputs: ReportInputs) -> dict | None:
    """The study's statement, sentence by sentence, and how to read u (its definition, the floor, the margin δ, what
    the intervals cover)."""
    if not inputs.universality_statement:
        return None
    return {"sentences": _statement(inputs)[1], "caption": paragraphs("universality")}


def _quality(row) -> tuple[str, str]:
    """A level's quality and the reference seed siblings' range, as shown."""
    if _number(row.quality) == "–":
        return "–", ""
    seeds = (f"seeds {row.reference_quality_low:.3f}–{row.reference_quality_high:.3f}"
             if _number(row.reference_quality_low) != "–" else "")
    return f"{row.quality:.3f}", seeds


def _probe(row) -> dict:
    """A level's competence on the shared probe (its best layer's held-out accuracy) with the seeds' range and the
    chance level, as shown; "–" for a level not probed (a table written before the probe: no column)."""
    accuracy = getattr(row, "probe_accuracy", float("nan"))
    if _number(accuracy) == "–":
        return {"probe": "–", "probe_seeds": ""}
    return {"probe": f"{accuracy:.3f}", "probe_seeds": f"seeds {row.probe_reference_low:.3f}–"
                                                       f"{row.probe_reference_high:.3f}; chance {row.probe_chance:.3f}"}


def universality_section(inputs: ReportInputs) -> dict | None:
    """The factor × depth matrix of verdicts per measure (figure), the verdicts' colours, and the thirds as a table:
    per factor level (its models, its quality beside the seed siblings') and measure, u with its interval and its
    verdict in each third."""
    if not (inputs.universality or inputs.universality_figure):
        return None
    table = read_tables(inputs.universality) if inputs.universality else pd.DataFrame()
    thirds = table[table["depth"].isin(THIRDS)] if len(table) else table
    where, margin = "", "–"
    if len(thirds):
        first = thirds.iloc[0]
        where = f"{first['dataset']}, {representation_text(first['representation'])}, n = {int(first['n']):,} rows"
        margin = _number(first["margin"])
    figures = [Figure(path, f"{where + '; ' if where else ''}cell: u and its {inputs.confidence:.0%} interval; colour: "
                            f"the verdict against δ = {margin}; faded panels: measures that failed a grounding test "
                            "(left out of the statement).", alt="what is universal: factor level × depth third, "
                                                                "per measure", wide=True)
               for path in inputs.universality_figure]
    section = {"caption": paragraphs("universality_matrix"), "figures": figures, "legend": _verdict_legend(),
               "margin": margin, "confidence": f"{inputs.confidence:.0%}", "depths": [], "levels": [],
               "failed": [], "quality_metric": "quality", "measures_page": _link(inputs, "measures",
                                                                                       "Which measure?")}
    if thirds.empty:
        return section
    depths = [d for d in THIRDS if d in set(thirds["depth"])]
    measures = _headline_first(thirds)
    metrics = [m for m in dict.fromkeys(thirds["quality_metric"]) if isinstance(m, str) and m]
    cells = thirds.set_index(["factor", "level", "measure", "depth"])
    levels = []
    for (factor, level), rows in thirds.groupby(["factor", "level"], sort=False):
        first = next(rows.itertuples())
        quality, seeds = _quality(first)
        shown = []
        for label in [m for m in measures if m in set(rows["measure"])]:
            mine = rows[rows["measure"] == label].iloc[0]
            doubtful = bool(str(mine["grounding_failed"]))
            control = str(mine["control"])  # what it changes as an artefact control ("" for none)
            row_cells = []
            for depth in depths:
                key = (factor, level, label, depth)
                if key not in cells.index:
                    row_cells.append(None)
                    continue
                cell = cells.loc[key]
                verdict = str(cell["verdict"])
                rows_only = " (rows only)" if cell.get("interval_basis", "") == "rows only" else ""
                row_cells.append({"value": _with_interval(cell["u"], cell["ci_low"], cell["ci_high"]) + rows_only
                                  if _number(cell["u"]) != "–" else "undefined",
                                  "verdict": verdict, "colour": UNIVERSALITY_VERDICTS.get(verdict, "#FFFFFF")})
            shown.append({"measure": _measure_name(label) + (f" (control: {control})" if control else ""),
                          "doubtful": doubtful, "cells": row_cells})
        levels.append({"factor": FACTOR_LABELS.get(factor, factor), "level": level, "models": str(first.models),
                       "quality": quality, "seeds": seeds, "note": str(first.quality_note), "measures": shown,
                       **_probe(first)})
    failed = thirds.loc[thirds["grounding_failed"].astype(str) != "", ["measure", "grounding_failed"]
                        ].drop_duplicates("measure")
    section.update(depths=depths, levels=levels, probed=any(level["probe"] != "–" for level in levels),
                   failed=[{"measure": _measure_name(r.measure), "tests": str(r.grounding_failed)}
                           for r in failed.itertuples()],
                   quality_metric=metrics[0] if len(metrics) == 1 else "quality")
    return section


def senses_section(inputs: ReportInputs) -> dict | None:
    """Factor level × sense of similarity: in each third, u pooled over the sense's grounded measures with its
    interval, on its verdict's colour; each sense's precise question, its measures, and why a cell is empty."""
    if not inputs.universality_senses:
        return None
    table = read_tables(inputs.universality_senses)
    thirds = table[table["depth"].isin(THIRDS)] if len(table) else table
    if thirds.empty:
        return None
    depths = [d for d in THIRDS if d in set(thirds["depth"])]
    questions = thirds.drop_duplicates("sense").set_index("sense")["question"]
    used = {sense: sorted({m for value in rows["measures"] for m in str(value).split(", ") if m})
            for sense, rows in thirds.groupby("sense", sort=False)}
    # a sense no cell measures gets no rows: the list below the caption says why
    senses = [sense for sense in dict.fromkeys(thirds["sense"]) if used[sense]]
    unmeasured = {sense: str(rows["left_out"].iloc[0]).split("; ")[0]
                  for sense, rows in thirds.groupby("sense", sort=False) if not used[sense]}
    cells = thirds.set_index(["factor", "level", "sense", "depth"])
    levels = []
    for (factor, level), rows in thirds.groupby(["factor", "level"], sort=False):
        shown = []
        for sense in senses:
            row_cells = []
            for depth in depths:
                cell = cells.loc[(factor, level, sense, depth)]
                verdict = str(cell["verdict"])
                measured = verdict != "not measured"
                rows_only = " (rows only)" if cell["interval_basis"] == "rows only" else ""
                # the seed row's u = 1 is an identical copy: its verdicts say so
                said = AGAINST_IDENTITY.get(verdict, verdict) if (factor, level) == SEEDS_ROW else verdict
                row_cells.append({"value": (_with_interval(cell["u"], cell["ci_low"], cell["ci_high"]) + rows_only
                                            if _number(cell["u"]) != "–" else "undefined") if measured else "–",
                                  "verdict": said if measured else str(cell["left_out"]).split("; ")[0],
                                  "colour": UNIVERSALITY_VERDICTS.get(verdict, "#FFFFFF")})
            shown.append({"sense": sense, "cells": row_cells})
        levels.append({"factor": FACTOR_LABELS.get(factor, factor), "level": level,
                       "models": str(rows["models"].iloc[0]), "senses": shown})
    first = thirds.iloc[0]
    functional = thirds[(thirds["sense"] == "function") & (thirds["verdict"] != "not measured")]
    where = f"{first['dataset']}, {representation_text(first['representation'])}, n = {int(first['n']):,} rows"
    if len(functional):  # the stitching penalty rests on the evaluation blocks (rows) of its own jobs
        where += f"; the functional sense on n = {int(functional['n'].iloc[0]):,} evaluation rows of the stitch jobs"
    figures = [Figure(path, f"{where}; cell: u and its {inputs.confidence:.0%} interval; colour: the verdict against "
                            f"δ = {_number(first['margin'])}.", alt="in which sense: factor level × depth third, per "
                                                                    "sense of similarity", wide=True)
               for path in inputs.senses_figure]
    return {"caption": paragraphs("universality_senses"), "depths": depths, "levels": levels, "figures": figures,
            "answers": _statement(inputs)[0] if inputs.universality_statement else [],
            "confidence": f"{inputs.confidence:.0%}", "margin": _number(first["margin"]),
            "where": where,
            "senses": [{"sense": sense, "question": str(questions[sense]),
                        "measures": ", ".join(_measure_name(m) for m in used[sense])} for sense in senses],
            "unmeasured": [{"sense": sense, "question": str(questions[sense]), "why": why}
                           for sense, why in unmeasured.items()]}


def controls_section(inputs: ReportInputs) -> dict | None:
    """The artefact controls (measures on conditioned features) against their twins: how many verdicts each
    compared and which changed, every changed cell with both u and intervals."""
    if not inputs.universality_controls:
        return None
    table = read_tables(inputs.universality_controls)
    section = {"caption": paragraphs("universality_controls"), "controls": [], "changed": None,
               "confidence": f"{inputs.confidence:.0%}"}
    if table.empty:
        return section
    for control, rows in table.groupby("control", sort=False):
        first = rows.iloc[0]
        section["controls"].append({"control": _measure_name(control), "measure": _measure_name(first["measure"]),
                                    "change": str(first["change"]) if "change" in first else
                                    f"features conditioned by {first['conditioning']}", "cells": len(rows),
                                    "changed": int(rows["changed"].sum())})
    changed = table[table["changed"].astype(bool)]
    if len(changed):
        section["changed"] = pd.DataFrame({
            "factor: level": [f"{FACTOR_LABELS.get(r.factor, r.factor)}: {r.level}" for r in changed.itertuples()],
            "third": changed["depth"].to_list(),
            "measure": [_measure_name(m) for m in changed["measure"]],
            f"u [{inputs.confidence:.0%} interval]: verdict": [
                f"{_with_interval(r.u, r.ci_low, r.ci_high)}: {r.verdict}" for r in changed.itertuples()],
            "control": [f"{_measure_name(r.control)} ({getattr(r, 'change', r.conditioning)})"
                        for r in changed.itertuples()],
            f"control's u [{inputs.confidence:.0%} interval]: verdict": [
                f"{_with_interval(r.control_u, r.control_ci_low, r.control_ci_high)}: {r.control_verdict}"
                for r in changed.itertuples()]})
    return section


def convergence_section(inputs: ReportInputs) -> dict | None:
    """Cross-seed similarity over training (figure) and its claims per measure and third: last − first, Spearman ρ
    with the step and with the validation loss falling, each with its interval and verdict."""
    if not (inputs.universality_convergence or inputs.convergence_figure):
        return None
    curve, claims = _convergence_tables(inputs)
    where = ""
    if len(curve):
        first = curve.iloc[0]
        where = (f"{first['dataset']}, {representation_text(first['representation'])}, n = {int(first['n']):,} rows; "
                 f"steps {', '.join(f'{s:g}' for s in sorted(set(curve['step'])))}")
    figures = [Figure(path, f"{where + '; ' if where else ''}band: the {inputs.confidence:.0%} interval; in the "
                            "legend, each third's change from the first to the last step with its interval; last "
                            "panel: the validation cross-entropy of the same models.",
                      alt="cross-seed similarity over training", wide=True)
               for path in inputs.convergence_figure]
    section = {"caption": paragraphs("convergence"), "figures": figures, "table": None, "steps": "",
               "doubtful": False, "confidence": f"{inputs.confidence:.0%}"}
    thirds = claims[claims["depth"].isin(THIRDS)] if len(claims) else claims
    if len(thirds):
        # one row per measure and third, a column per statistic: its estimate, interval and verdict
        order = {label: k for k, label in enumerate(_headline_first(thirds))}
        rows = []
        for (label, depth), group in sorted(thirds.groupby(["measure", "depth"], sort=False),
                                            key=lambda item: (order[item[0][0]], THIRDS.index(item[0][1]))):
            row = {"measure": _measure_name(label) + ("" if bool(group["headline"].iloc[0]) else " †"),
                   "depth": depth}
            for claim in group.itertuples():
                row[f"{CLAIM_STATISTICS.get(claim.statistic, claim.statistic)} [{inputs.confidence:.0%} interval]"] = \
                    f"{_with_interval(claim.estimate, claim.ci_low, claim.ci_high)}: {claim.verdict}"
            rows.append(row)
        first = thirds.iloc[0]
        section.update(table=pd.DataFrame(rows).fillna("–"), doubtful=not thirds["headline"].astype(bool).all(),
                       steps=f"from step {int(first['first_step'])} to {int(first['last_step'])}, "
                             f"{int(first['n_checkpoints'])} points")
    return section
