"""The recorded blocks that quote the default run, one renderer each: the findings and how many measures each holds
under, the measures' agreement, the chance level, attention, the synthetic recovery, the measure tests and grounding,
and the findings' variation on another kernel path."""

from __future__ import annotations

import math
import re
from typing import Callable

from reprsim.guide.recorded_format import _cell, _g, _gb, _interval, _minutes, _name
from reprsim.tables.grounding import FAIL

REPRESENTATIONS = {"mean": "mean pooling", "word": "word level", "attention": "attention"}


def _findings_table(summary: dict) -> str:
    lines = ["| claim (source) | statistic's models · measure · representation | estimate [95% CI] | reference | n "
             "| verdict |", "|---|---|---|---|---:|---|"]
    for row in summary["findings"]:
        if row["verdict"] == "not applicable" or row["estimate"] is None:
            what = f"({row['reason']})"
            estimate = "–"
        else:
            what = " · ".join(part for part in (row["models"], row["measure"],
                                                REPRESENTATIONS.get(row["representation"] or "", row["representation"]))
                              if part)
            estimate = f"{_g(row['estimate'])} [{_g(row['ci_low'])}, {_g(row['ci_high'])}]"
        verdict = f"**{row['verdict']}**" if row["verdict"] in ("supported", "contradicted") else row["verdict"]
        reference = "–" if row["reference"] is None else f"{row['reference']:.3f}"
        lines.append(f"| {_cell(row['claim'])} ({_cell(row['source'])}) | {_cell(what)} | {estimate} | {reference} "
                     f"| {row['n']} | {verdict} |")
    return "\n".join(lines)


def _holds_under(row: dict) -> tuple[int, int] | None:
    match = re.fullmatch(r"(\d+) of (\d+)", row.get("holds_under") or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def _holds_under_table(summary: dict) -> str:
    rows = [(row, counts) for row in summary["findings"]
            if row["representation"] == "mean" and (counts := _holds_under(row)) and counts[1] > 1]
    every = max(total for _, (_, total) in rows)
    all_of = sum(held == total for _, (held, total) in rows)
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}
    lead = (f"In the default run {words.get(all_of, all_of)} of the {words.get(len(rows), len(rows))} hold under "
            f"all {words.get(every, every)} measures" + (":" if all_of == len(rows) else
                                                         f"; {words.get(len(rows) - all_of, len(rows) - all_of)} "
                                                         f"{'does' if len(rows) - all_of == 1 else 'do'} not:"))
    lines = [lead, "", "| claim | holds under | across measures |", "|---|---|---|"]
    for row, _ in rows:
        lines.append(f"| {_cell(row['claim'])} | {row['holds_under']} | {_cell(row['across_measures'])} |")
    return "\n".join(lines)


def _agreement(summary: dict) -> str:
    agreement, discordant = summary["agreement"], summary["discordant"]
    kendall = agreement["kendall"]
    lowest = kendall[0]
    both_cka = [r for r in kendall if r["measure_x"].endswith("_cka") and r["measure_y"].endswith("_cka")]
    others = [r for r in kendall if r not in both_cka]
    highest = others[-1]
    text = (f"Over the {agreement['pairs']} pairs of distinct models (mean over matching layers) the rank agreement "
            f"of two measures runs from Kendall τ_b {_interval(lowest)} ({_name(lowest['measure_x'])} against "
            f"{_name(lowest['measure_y'])}) to {_interval(highest)} ({_name(highest['measure_x'])} against "
            f"{_name(highest['measure_y'])})")
    if both_cka:
        text += f" and {both_cka[-1]['estimate']:.2f} between the two CKAs"
    text += (" (`results/tables/measure_agreement.parquet`, Spearman ρ beside it, and the same over all "
             f"{agreement['cells']} compared cells). {discordant['count']} orderings of two model pairs are reversed "
             "by two measures with both intervals excluding 0 (`results/tables/discordant_orderings.parquet`); the "
             "strongest is the one that opens [Which measure to believe](analyses/grounding.md): ")
    first, *rest = discordant["strongest"]

    def by(row: dict, axis: str) -> str:
        value, low, high = row[f"difference_{axis}"], row[f"{axis}_low"], row[f"{axis}_high"]
        low, high = sorted((abs(low), abs(high)))
        return f"by {abs(value):.3f} [{low:.3f}, {high:.3f}]"

    x_more = first["difference_x"] > 0
    text += (f"{_name(first['measure_x'])} rates {first['pair_1']} {'more' if x_more else 'less'} alike than "
             f"{first['pair_2']} ({by(first, 'x')}), {_name(first['measure_y'])} rates it "
             f"{'less' if x_more else 'more'} alike ({by(first, 'y')})")
    names = [_name(r["measure_y"]) for r in rest]
    if names:
        text += ", and so do " + (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0])
    return text + "."


def _chance(summary: dict) -> str:
    chance = summary["chance"]
    return f"{chance['low']:.2f}–{chance['high']:.2f}"


def _attention(summary: dict) -> str:
    first, last = summary["attention"]
    return (f"attnsim (Pearson, the base's heads matched in {first['model_b']}) {first['value']:.4f} "
            f"[{first['ci_low']:.4f}, {first['ci_high']:.4f}] in block {first['layer_a']} against {last['value']:.2f} "
            f"[{last['ci_low']:.2f}, {last['ci_high']:.2f}] in block {last['layer_a']}, chance "
            f"{first['null_mean']:.2f} and {last['null_mean']:.2f} ({first['n']} sentences")


def _synthetic(summary: dict) -> str:
    errors = {row["aligner"]: row["rel_error"] for row in summary["synthetic_recovery"]}
    return f"δ = {errors['inn']:.3f} (INN) against {errors['linear']:.3f} (linear)"


GROUNDING_COLUMNS = {  # the measure tests as the grounding page's table shows them, in its order
    ("monotonicity", "spearman"): "layer monotonicity ρ", ("monotonicity", "conformity"): "conformity",
    ("deletion", "spearman"): "PC deletion ρ", ("layer", "spearman"): "layer probe ρ (Ding)",
    ("seeds", "auprc"): "recipe groups AUPRC", ("specificity", "same_depth"): "same-depth specificity",
    ("seeds", "d_prime"): "recipe groups d′ (descriptive)"}


def _signed(value: float, digits: int) -> str:
    return f"{value:.{digits}f}".replace("-", "−")


def _test_rows(summary: dict, test: str, variant: str) -> list[dict]:
    return [r for r in summary["measure_tests"] if (r["test"], r["variant"]) == (test, variant)]


def _measure_tests_table(summary: dict) -> str:
    rows = summary["measure_tests"]
    columns = [key for key in GROUNDING_COLUMNS if any((r["test"], r["variant"]) == key for r in rows)]
    lines = ["| measure | " + " | ".join(GROUNDING_COLUMNS[c] for c in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for measure in dict.fromkeys(r["measure"] for r in rows):
        cells = []
        for test, variant in columns:
            row = next((r for r in rows if (r["measure"], r["test"], r["variant"]) == (measure, test, variant)), None)
            if row is None or row["score"] is None:
                cells.append("–")
                continue
            digits = 1 if row["decision"] == "descriptive" else 2
            text = (f"{_signed(row['score'], digits)} [{_signed(row['ci_low'], digits)}, "
                    f"{_signed(row['ci_high'], digits)}]")
            if row["p_value"] is not None:
                text += f", p {row['p_value']:.2g}"
            cells.append(("✗ " if row["decision"] == FAIL else "") + text)
        lines.append(f"| {_name(measure)} | " + " | ".join(cells) + " |")
    chance, items = [], []
    for test, variant in columns:
        found = _test_rows(summary, test, variant)
        chance.append(f"{found[0]['chance']:.2g}")
        quantiles = sorted({round(r["null_quantile"], 2) for r in found if r["null_quantile"] is not None})
        null = "–" if not quantiles else f"{quantiles[0]:.2f}" if len(quantiles) == 1 else \
            f"{quantiles[0]:.2f}–{quantiles[-1]:.2f}"
        items.append(f"{found[0]['n_items']}; {null}")
    lines.append("| *chance* | " + " | ".join(chance) + " |")
    lines.append("| *items; null 95%* | " + " | ".join(items) + " |")
    return "\n".join(lines)


def _score_range(summary: dict, test: str, variant: str) -> tuple[float, float]:
    scores = [r["score"] for r in _test_rows(summary, test, variant) if r["score"] is not None]
    return min(scores), max(scores)


def _grounding_monotonicity(summary: dict) -> str:
    """The lowest layer-monotonicity ρ, rounded down (the page says ρ ≥ it)."""
    return f"{math.floor(_score_range(summary, 'monotonicity', 'spearman')[0] * 1e3) / 1e3:.3f}"


def _grounding_layer(summary: dict) -> str:
    low, high = _score_range(summary, "layer", "spearman")
    return f"ρ {low:.2f}–{high:.2f} over {_test_rows(summary, 'layer', 'spearman')[0]['n_items']} layers"


def _grounding_auprc(summary: dict) -> str:
    low, high = _score_range(summary, "seeds", "auprc")
    score = f"{low:.2g}" if round(low, 2) == round(high, 2) else f"{low:.2f}–{high:.2f}"
    return f"AUPRC {score} against {_test_rows(summary, 'seeds', 'auprc')[0]['chance']:.2f}"


def _grounding_deletion(summary: dict) -> str:
    probes = summary["deletion_probes"]
    kept = [c for c in probes if not c["used"]]
    fell = [c for c in probes if c["used"]]
    text = ""
    if kept:
        last = max(kept, key=lambda c: c["layer"])
        models = list(last["probe"])
        changes = " and ".join(f"{p['first']:.3f} → {p['last']:.3f}" for p in last["probe"].values())
        heads = " and ".join(f"{p['head']:.3f}" for p in last["probe"].values() if p["head"] is not None)
        text += (f"{' and '.join(models)}'s cross-validated probes keep their accuracy when components are deleted "
                 f"({changes} at layer {last['layer']}" + (f"; their heads {heads} on the same rows" if heads else "")
                 + "), so their layers cannot rank")
    if fell:
        last = max(fell, key=lambda c: c["layer"])
        (model, p), = last["probe"].items()
        layers = [c["layer"] for c in fell]
        where = ", ".join(map(str, layers[:-1])) + f" and {layers[-1]}" if len(layers) > 1 else str(layers[0])
        text += (", while " if text else "") + (f"{model}'s fall at layers {where} ({p['first']:.3f} → "
                                                f"{p['last']:.3f} at layer {last['layer']})")
    return text


GROUNDING_RULES = {"deletion_probes": "probe", "model_predictions": "head-prediction",
                   "measure_tests": "measure-test"}  # and the table's one job (measure_tests_table)


def _grounding_jobs(summary: dict) -> str:
    """The grounding stage's jobs and job seconds in the default run (rules: the log's per-rule counts)."""
    rules = summary["run"]["rules"]
    parts = [f"{rules[rule]['jobs']} {words} job{'' if rules[rule]['jobs'] == 1 else 's'} "
             f"{rules[rule]['seconds']:.0f} s" for rule, words in GROUNDING_RULES.items() if rule in rules]
    counted = [rule for rule in (*GROUNDING_RULES, "measure_tests_table") if rule in rules]
    return (f"{sum(rules[r]['jobs'] for r in counted)} jobs to the default ({', '.join(parts)}, the table): "
            f"{sum(rules[r]['seconds'] for r in counted):.0f} s of job time")


def _kernel_variation(summary: dict) -> str:
    variation = summary["kernel_variation"]
    lines = [f"The same commit rerun with `{variation['path']}`: {variation['verdicts_held']} of {variation['decided']} "
             "verdicts held. Each finding's largest change of its estimate or interval ends, largest first:", "",
             "| claim | measure · representation | recorded run | other kernels | largest change |",
             "|---|---|---|---|---:|"]
    for row in variation["rows"]:
        ends = [f"{_g(row[f'estimate{s}'])} [{_g(row[f'ci_low{s}'])}, {_g(row[f'ci_high{s}'])}]" for s in ("", "_other")]
        what = " · ".join(part for part in (row["measure"], REPRESENTATIONS.get(row["representation"] or "",
                                                                              row["representation"])) if part)
        moved = "none" if row["change"] == 0 else f"{row['change']:.1g}"
        lines.append(f"| {_cell(row['claim'])} | {_cell(what)} | {ends[0]} | {ends[1]} | {moved} |")
    return "\n".join(lines)


DEFAULT_BLOCKS: dict[str, tuple[Callable[[dict], str], bool]] = {
    # name: (renderer, block-level: its own paragraphs, else inline text)
    "findings-table": (_findings_table, True),
    "findings-holds-under": (_holds_under_table, True),
    "findings-agreement": (_agreement, True),
    "default-jobs": (lambda s: str(s["run"]["jobs"]), False),
    "default-cores": (lambda s: str(s["run"]["cores"]), False),
    "default-time": (lambda s: _minutes(s["run"]), False),
    "default-peak-memory": (lambda s: _gb(s["run"].get("peak_rss_bytes")), False),
    "default-results-size": (lambda s: _gb(s["run"]["results_bytes"]), False),
    "default-chance-cka": (_chance, False),
    "default-chance-n": (lambda s: f"{s['chance']['n']}", False),
    "default-attention": (_attention, False),
    "default-synthetic-recovery": (_synthetic, False),
    "default-measure-tests": (_measure_tests_table, True),
    "default-grounding-jobs": (_grounding_jobs, False),
    "default-grounding-monotonicity": (_grounding_monotonicity, False),
    "default-grounding-layer": (_grounding_layer, False),
    "default-grounding-auprc": (_grounding_auprc, False),
    "default-grounding-deletion": (_grounding_deletion, False),
    "default-kernel-variation": (_kernel_variation, True),
    "default-grounding-deletion-rho": (lambda s: f"{_score_range(s, 'deletion', 'spearman')[1]:.2f}", False),
}
