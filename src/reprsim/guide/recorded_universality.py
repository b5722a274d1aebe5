"""The recorded blocks that quote the universality example (summary["universality"]), one renderer each: its run,
its statement, u per third, per sense of similarity, the artefact controls, competence, the README's sentence and the
checks of its intervals."""

from __future__ import annotations

from typing import Callable

from reprsim.design.senses import AGAINST_IDENTITY, SEEDS_ROW
from reprsim.guide.recorded_format import _cell, _g, _interval, _minutes, _name
from reprsim.tables.universality import THIRDS


def _universality_run(summary: dict) -> str:
    run = summary["universality"]["run"]
    return f"{run['jobs']} jobs in {_minutes(run)}"


def _universality_statement(summary: dict) -> str:
    return "\n".join(f"- {row['text']}" for row in summary["universality"]["statement"])


def _verdict_short(verdict: str) -> str:
    return {"no more similar than the floor": "floor", "less similar than the floor": "below the floor"}.get(verdict,
                                                                                                            verdict)


def _universality_thirds(summary: dict) -> str:
    study = summary["universality"]
    lead = study["lead"]
    lines = [f"u under {_name(lead)} (the lead grounded measure), each third: u [seeds-and-rows interval] and its "
             "verdict; beneath, the rows-only interval and u against the shuffled-row chance level as zero.", "",
             "| factor: level | lower third | middle third | upper third |", "|---|---|---|---|"]
    rows = [r for r in study["thirds"] if r["measure"] == lead]
    for key in dict.fromkeys((r["factor"], r["level"]) for r in rows):
        cells = {r["depth"]: r for r in rows if (r["factor"], r["level"]) == key}
        texts = []
        for depth in THIRDS:
            r = cells.get(depth)
            if r is None or r["u"] is None:
                texts.append("undefined")
                continue
            basis = " (rows only)" if r["interval_basis"] == "rows only" else ""
            text = f"{_interval(r, 'u')}, {_verdict_short(r['verdict'])}{basis}"
            text += f"<br>rows only [{_g(r['rows_ci_low'])}, {_g(r['rows_ci_high'])}]"
            if None not in (r["u_null_zero"], r["u_null_zero_low"], r["u_null_zero_high"]):
                text += f"; chance zero {_interval(r, 'u_null_zero', 'u_null_zero_low', 'u_null_zero_high')}"
            texts.append(text)
        name = "seed placebo" if key[0] == "placebo" else key[0].replace("_", " ")
        lines.append(f"| {name}: {_cell(key[1])} | " + " | ".join(texts) + " |")
    return "\n".join(lines)


def _universality_senses(summary: dict) -> str:
    """Factor level × sense: each measured sense's middle-third u, interval and verdict, and the other thirds'
    verdicts where they differ; the senses the study does not measure, named with why."""
    rows = summary["universality"].get("senses") or []
    if not rows:
        return "This recording has no sense table (recorded before the study had one)."
    measured = list(dict.fromkeys(r["sense"] for r in rows if r["verdict"] != "not measured"))
    pooled = {sense: dict.fromkeys(label for r in rows if r["sense"] == sense
                                   for label in str(r["measures"]).split(", ") if label) for sense in measured}
    header = [f"{sense} ({', '.join(_name(label) for label in pooled[sense])})" for sense in measured]
    lines = ["Each cell: the middle third's u [seeds-and-rows interval] and verdict, pooled over the sense's grounded "
             "measures (named in the header); the other thirds' verdicts where they differ.", "",
             "| factor: level | " + " | ".join(header) + " |", "|---|" + "---|" * len(measured)]
    for key in dict.fromkeys((r["factor"], r["level"]) for r in rows):
        # the seed row's u = 1 is an identical copy: its verdicts say so
        said = (lambda v: AGAINST_IDENTITY.get(v, v)) if key == SEEDS_ROW else _verdict_short  # noqa: E731
        texts = []
        for sense in measured:
            cells = {r["depth"]: r for r in rows if (r["factor"], r["level"]) == key and r["sense"] == sense}
            middle = cells.get("middle third")
            if middle is None or middle["verdict"] == "not measured":
                texts.append("–")
                continue
            text = "undefined" if middle["u"] is None else f"{_interval(middle, 'u')}, {said(middle['verdict'])}"
            text += " (rows only)" if middle["interval_basis"] == "rows only" else ""
            others = [f"{depth.replace(' third', '')}: {said(cells[depth]['verdict'])}"
                      for depth in THIRDS if depth in cells and depth != "middle third"
                      and cells[depth]["verdict"] != middle["verdict"]]
            texts.append(text + (f"<br>{'; '.join(others)}" if others else ""))
        name = {"placebo": "seed placebo", "seeds": "seeds"}.get(key[0], key[0].replace("_", " "))
        lines.append(f"| {name}: {_cell(key[1])} | " + " | ".join(texts) + " |")
    unmeasured = {r["sense"]: str(r["left_out"]).split("; ")[0] for r in rows if r["sense"] not in measured}
    if unmeasured:
        lines += ["", "Not measured: " + "; ".join(f"{sense} ({why})" for sense, why in unmeasured.items()) + "."]
    return "\n".join(lines)


def _universality_controls(summary: dict) -> str:
    """Each artefact control beside its twin: per control, how many verdicts it changed, and each changed cell."""
    rows = summary["universality"].get("controls") or []
    if not rows:
        return "This recording has no artefact control (recorded before the example ran them)."
    lines = ["| control | its twin | verdicts changed | where (twin's u → the control's, third by third) |",
             "|---|---|---|---|"]
    def u(r: dict, key: str, low: str, high: str) -> str:
        return "undefined" if None in (r[key], r[low], r[high]) else _interval(r, key, low, high)

    for control in dict.fromkeys(r["control"] for r in rows):
        mine = [r for r in rows if r["control"] == control]
        changed = [r for r in mine if r["changed"]]
        where = "; ".join(
            f"{r['factor'].replace('_', ' ')} {_cell(r['level'])}, {r['depth'].replace(' third', '')}: "
            f"{u(r, 'u', 'ci_low', 'ci_high')} {_verdict_short(r['verdict'])} → "
            f"{u(r, 'control_u', 'control_ci_low', 'control_ci_high')} {_verdict_short(r['control_verdict'])}"
            for r in changed) or "–"
        lines.append(f"| {_name(control)} ({_cell(mine[0]['change'])}) | {_name(mine[0]['measure'])} | "
                     f"{len(changed)} of {len(mine)} | {where} |")
    return "\n".join(lines)


def _universality_competence(summary: dict) -> str:
    """Each level's competence on the shared probe beside the reference seeds' range and chance, and its own fit."""
    rows = summary["universality"].get("competence") or []
    if not rows or all(r.get("probe_accuracy") is None for r in rows):
        return "This recording has no shared probe (recorded before the study had one)."
    lines = ["| factor: level | probe accuracy (best layer) | the reference seeds | chance | note | own fit |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        accuracy = "–" if r.get("probe_accuracy") is None else f"{r['probe_accuracy']:.3f}"
        seeds = ("–" if r.get("probe_reference_low") is None else
                 f"{r['probe_reference_low']:.3f}–{r['probe_reference_high']:.3f}")
        chance = "–" if r.get("probe_chance") is None else f"{r['probe_chance']:.3f}"
        fit = "–" if r.get("quality") is None else f"{r['quality']:.3f} {r['quality_metric']}"
        note = r["probe_note"] + (f"; also changes {r['also_changes']}" if r.get("also_changes") else "")
        name = {"placebo": "seed placebo"}.get(r["factor"], r["factor"].replace("_", " "))
        lines.append(f"| {name}: {_cell(r['level'])} | {accuracy} | {seeds} | {chance} | {_cell(note)} | "
                     f"{_cell(fit)} |")
    return "\n".join(lines)


def _universality_readme(summary: dict) -> str:
    """The README's sentence: the placebo's resolution, then every level's u, interval and verdict in the middle
    third under the lead measure."""
    study = summary["universality"]
    rows = [r for r in study["thirds"] if r["measure"] == study["lead"] and r["depth"] == "middle third"]
    placebo = [r for r in rows if r["factor"] == "placebo"]
    parts = []
    if placebo and placebo[0]["ci_low"] is not None:
        r = placebo[0]
        parts.append(f"the seed placebo (each reference seed scored as a level, u = 1) has the interval "
                     f"[{_g(r['ci_low'])}, {_g(r['ci_high'])}] in the middle third, the study's resolution")
    levels = []
    for r in rows:
        if r["factor"] == "placebo":
            continue
        value = "undefined" if r["u"] is None else f"{_interval(r, 'u')}, {_verdict_short(r['verdict'])}"
        levels.append(f"{r['factor'].replace('_', ' ')} {r['level']} {value}")
    parts.append(f"in the middle third under {_name(study['lead'])} (the lead measure of those that passed the "
                 "grounding tests there), " + "; ".join(levels))
    return "; ".join(parts)


def _universality_checks(summary: dict) -> str:
    c = summary["universality"]["checks"]
    return (f"every seeds-and-rows interval is at least as wide as the rows-only one ({c['seeds_at_least_as_wide']} "
            f"of {c['cells_with_seeds']} cells, every measure and third); the placebo's intervals contain 1 "
            f"({c['placebo_contains_one']} of {c['placebo_cells']}); every \"floor\" verdict's interval lies within "
            f"[−δ, δ] ({c['floor_within_margin']} of {c['floor_verdicts']})")


UNIVERSALITY_BLOCKS: dict[str, tuple[Callable[[dict], str], bool]] = {
    # name: (renderer, block-level: its own paragraphs, else inline text)
    "universality-run": (_universality_run, False),
    "universality-statement": (_universality_statement, True),
    "universality-thirds": (_universality_thirds, True),
    "universality-senses": (_universality_senses, True),
    "universality-controls": (_universality_controls, True),
    "universality-competence": (_universality_competence, True),
    "universality-checks": (_universality_checks, False),
    "universality-readme": (_universality_readme, False),
}
