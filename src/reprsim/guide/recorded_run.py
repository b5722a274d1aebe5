"""The default run's figures that the README and the guide quote, kept as a recorded run summary so that they cannot
drift: docs/recorded-run/summary.json, written by ``benchmarks/record_run.py RUN --other-kernel OTHER --write`` from
a finished run (and the same commit's run on another kernel path), with copies of the small results tables it
quotes beside it.

A quoted figure sits in the Markdown between ``<!-- recorded: NAME -->`` and ``<!-- /recorded -->``; :func:`render`
makes NAME from the summary (``BLOCKS`` lists them) and :func:`fill` rewrites every block of a page.
tests/unit/test_recorded_run.py checks that every block equals its rendering and that the summary's quoted values
are the copied tables'; the docs build (docs/hooks/reference.py) flags a summary whose :func:`fingerprint` (the
configuration and code the numbers depend on) differs from the checkout's.

Torch-free; pandas only in :func:`summarise` (the recording and the test), never when the guide renders.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, Callable

from reprsim.measure_registry import DISPLAY_NAMES
from reprsim.design.senses import AGAINST_IDENTITY, SEEDS_ROW
from reprsim.tables.grounding import FAIL
from reprsim.tables.universality import THIRDS

ROOT = Path(__file__).resolve().parents[3]
RECORDED_DIR = ROOT / "docs" / "recorded-run"
SUMMARY = RECORDED_DIR / "summary.json"
# results/tables/ files copied beside the summary: every value it quotes is recomputed from them by the test
TABLES = ("findings", "measure_agreement", "discordant_orderings", "pair_summary", "attention", "synthetic_recovery",
          "measure_tests")
# where a table is under results/ when it is not results/tables/<name>.parquet
SOURCES = {"synthetic_recovery": "align/synthetic/sst2/minilm.parquet"}


def _attention_rows(frame):
    """Of the attention table only what the README quotes: attnsim (Pearson) of a base's heads matched in a
    fine-tuned model, block by block (the whole table is 140 KB)."""
    return frame[(frame["measure"] == "attn_pearson") & (frame["layer_a"] == frame["layer_b"])
                 & (frame["direction"] == "a->b")].reset_index(drop=True)


def _measure_test_rows(frame):
    """Of the measure tests every row, the detail kept only where the page quotes it (PC deletion's probes)."""
    frame = frame.copy()
    frame["detail"] = frame["detail"].where(frame["test"] == "deletion", "")
    return frame


# tables copied in part: name -> the rows kept (summarise applies it too, so the copy gives the same values)
SUBSETS = {"attention": _attention_rows, "measure_tests": _measure_test_rows}
# `from reprsim.x import y` / `import reprsim.x` in the Snakefile and rules/*.smk (not Python ast can parse)
IMPORT = re.compile(r"^[ \t]*(?:from|import)[ \t]+(reprsim(?:\.\w+)*)(?:[ \t]+import[ \t]+([\w ,\t]+))?$",
                    re.MULTILINE)
BLOCK = re.compile(r"<!-- recorded: ([a-z0-9-]+) -->(.*?)<!-- /recorded -->", re.DOTALL)

REPRESENTATIONS = {"mean": "mean pooling", "word": "word level", "attention": "attention"}


# -- what the numbers depend on ----------------------------------------------------------------------------------
def fingerprint_files(root: Path = ROOT) -> list[str]:
    """The files whose content the default run's numbers depend on, relative to `root`, sorted: the default
    configuration, the schema that fills its defaults, the Snakefile and every rules/*.smk with the reprsim modules
    they import, and every workflow script with the reprsim modules it imports (reprsim.workflow.codedeps, the
    rules' own code inputs), transitively."""
    from reprsim.workflow.codedeps import code_dependencies

    root = Path(root)
    found = {root / "config" / "config.yaml", root / "src" / "reprsim" / "schema.yaml", root / "Snakefile"}
    rules = [root / "Snakefile", *sorted((root / "rules").glob("*.smk"))]
    found.update(rules)
    src = (root / "src").resolve()
    # what the rules themselves import (the DAG: paths, job lists, resources), then every script's code inputs
    entry = [src.joinpath(*name.split(".")) for rule in rules if rule.is_file()
             for module, names in IMPORT.findall(rule.read_text())
             for name in [module, *(f"{module}.{n.split()[0]}" for n in names.split(",") if n.strip())]]
    entry = [p.with_suffix(".py") if p.with_suffix(".py").is_file() else p / "__init__.py" for p in entry]
    for script in [*sorted((root / "scripts").glob("*.py")), *entry]:
        if script.is_file():
            found.update(Path(p) for p in code_dependencies(script.resolve(), src))
    return sorted(str(Path(p).resolve().relative_to(root.resolve())) for p in found if Path(p).is_file())


def fingerprint(root: Path = ROOT) -> str:
    """sha256 over the path and content of every file of :func:`fingerprint_files`."""
    digest = hashlib.sha256()
    for name in fingerprint_files(root):
        digest.update(name.encode() + b"\0" + (Path(root) / name).read_bytes() + b"\0")
    return digest.hexdigest()


# -- the quoted values, from the tables --------------------------------------------------------------------------
def _clean(value: Any) -> Any:
    """A table value as JSON keeps it: numpy scalars as Python ones, NaN as None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _records(frame, columns) -> list[dict]:
    return [{c: _clean(v) for c, v in zip(columns, row)} for row in frame[list(columns)].itertuples(index=False)]


FINDING_COLUMNS = ("claim_id", "claim", "source", "models", "measure", "representation", "estimate", "ci_low",
                   "ci_high", "reference", "n", "verdict", "reason", "holds_under", "across_measures")


def summarise(tables: dict) -> dict:
    """The values the pages quote, from the results tables (name -> DataFrame, names of TABLES)."""
    findings = tables["findings"]
    agreement = tables["measure_agreement"]
    tau = agreement[(agreement["scope"] == "model pairs") & (agreement["statistic"] == "kendall_tau_b")
                    & (agreement["representation"] == "mean")]
    cells = agreement[(agreement["scope"] == "cells") & (agreement["representation"] == "mean")]
    columns = ("measure_x", "measure_y", "estimate", "ci_low", "ci_high")
    discordant = tables["discordant_orderings"]
    top = discordant[discordant["strength"] == discordant["strength"].max()]
    first = top.iloc[0]
    top = top[(top["measure_x"] == first["measure_x"]) & (top["pair_1"] == first["pair_1"])
              & (top["pair_2"] == first["pair_2"])]
    pairs = tables["pair_summary"]
    cka = pairs[(pairs["measure"] == "linear_cka") & (pairs["representation"] == "mean")]
    attention = _attention_rows(tables["attention"])
    attention = attention[(attention["model_a"] == attention["model_a"].iloc[0])
                          & (attention["model_b"] == attention["model_b"].iloc[0])].sort_values("layer_a")
    quoted_blocks = attention.iloc[[0, -1]]
    synthetic = tables["synthetic_recovery"]
    synthetic = synthetic[synthetic["aligner"].isin(["inn", "linear"])].sort_values("aligner")
    tests = tables["measure_tests"]
    deletion = tests[tests["test"] == "deletion"]
    probes = json.loads(deletion["detail"].iloc[0])["checked"] if len(deletion) else []
    return {
        "measure_tests": _records(tests, ("measure", "test", "variant", "score", "ci_low", "ci_high", "chance",
                                          "n_items", "null_quantile", "p_value", "decision")),
        "deletion_probes": [{"layer": c["layer"], "used": c["used"],
                             "probe": {model: {"first": p["accuracy"][0], "last": p["accuracy"][-1],
                                               "head": p["head_accuracy"]} for model, p in c["probe"].items()}}
                            for c in probes],
        "synthetic_recovery": _records(synthetic, ("aligner", "layer", "n", "rel_error")),
        "attention": _records(quoted_blocks, ("model_a", "model_b", "layer_a", "value", "ci_low", "ci_high",
                                              "null_mean", "n")),
        "findings": _records(findings, FINDING_COLUMNS),
        "agreement": {
            "pairs": int(tau["n_items"].max()), "cells": int(cells["n_items"].max()),
            "kendall": _records(tau.sort_values("estimate", kind="stable"), columns),
        },
        "discordant": {
            "count": int(len(discordant)),
            "strongest": _records(top, ("measure_x", "measure_y", "pair_1", "pair_2", "difference_x", "x_low",
                                        "x_high", "difference_y", "y_low", "y_high", "strength")),
        },
        "chance": {"measure": "linear_cka", "n": int(cka["n"].max()), "low": _clean(cka["null_mean"].min()),
                   "high": _clean(cka["null_mean"].max()), "all_beyond": bool(cka["beyond_chance"].all())},
    }


# the default run's findings made again by the same commit on another BLAS kernel path (record_run --other-kernel)
OTHER_KERNEL_FINDINGS = "findings_other_kernel"
FINDING_KEY = ("claim_id", "measure", "representation")


def kernel_variation(findings, other, kernel_path: str) -> dict:
    """How the findings moved between two runs of one commit on different kernel paths: for each decided finding
    (not 'not applicable') both runs' estimate, interval and verdict, and the largest change of the three numbers."""
    def change(a: float, b: float) -> float:
        if math.isnan(a) or math.isnan(b):
            return 0.0 if math.isnan(a) and math.isnan(b) else math.inf
        return abs(a - b)

    merged = findings.merge(other, on=list(FINDING_KEY), suffixes=("", "_other"), validate="one_to_one")
    rows = []
    for row in merged.to_dict("records"):
        if row["verdict"] == "not applicable" and row["verdict_other"] == "not applicable":
            continue
        rows.append({**{c: _clean(row[c]) for c in ("claim_id", "claim", "measure", "representation", "n", "estimate",
                                                     "ci_low", "ci_high", "verdict")},
                     **{f"{c}_other": _clean(row[f"{c}_other"]) for c in ("estimate", "ci_low", "ci_high", "verdict")},
                     "change": _clean(max(change(row[c], row[f"{c}_other"]) for c in ("estimate", "ci_low", "ci_high")))})
    rows.sort(key=lambda r: -(r["change"] if r["change"] is not None else math.inf))
    return {"path": kernel_path, "decided": len(rows),
            "verdicts_held": sum(r["verdict"] == r["verdict_other"] for r in rows), "rows": rows}


# -- rendering ---------------------------------------------------------------------------------------------------
def _g(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


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


def _name(measure: str) -> str:
    return DISPLAY_NAMES.get(measure, measure)


def _interval(row: dict, key: str = "estimate", low: str = "ci_low", high: str = "ci_high") -> str:
    return f"{row[key]:.2f} [{row[low]:.2f}, {row[high]:.2f}]"


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


# ------------------------------------------------------------------ the universality example and the coverage study
# Recorded beside the default (benchmarks/record_run.py --universality RUN, --coverage FILE), carried over from the
# previous recording when not given: summary["universality"] from a finished run of config/examples/universality.yaml,
# summary["interval_coverage"] from benchmarks/interval_coverage.py.
UNIVERSALITY_COLUMNS = ("factor", "level", "measure", "depth", "u", "ci_low", "ci_high", "interval_basis", "verdict",
                        "rows_ci_low", "rows_ci_high", "seeds_ci_low", "seeds_ci_high", "u_null_zero",
                        "u_null_zero_low", "u_null_zero_high", "headline", "margin")


SENSE_COLUMNS = ("factor", "level", "sense", "depth", "u", "ci_low", "ci_high", "interval_basis", "verdict",
                 "measures", "left_out")


CONTROL_COLUMNS = ("factor", "level", "depth", "control", "change", "measure", "u", "ci_low", "ci_high", "verdict",
                   "control_u", "control_ci_low", "control_ci_high", "control_verdict", "changed")
COMPETENCE_COLUMNS = ("factor", "level", "models", "probe_accuracy", "probe_reference_low", "probe_reference_high",
                      "probe_chance", "probe_note", "quality_metric", "quality", "quality_note", "also_changes",
                      "competence_match")


def universality_summary(table, statement, senses=None, controls=None) -> dict:
    """What the guide and the README quote of the universality example: the statement's sentences, the thirds of
    every measure, (given the sense table) of every sense and (given the controls' table) each control beside its
    twin, each level's competence, and the issue-51 checks computed from them."""
    thirds = table[table["depth"].isin(THIRDS)]
    sense_thirds = [] if senses is None else _records(senses[senses["depth"].isin(THIRDS)], SENSE_COLUMNS)
    levels = table.drop_duplicates(["factor", "level"])
    competence = _records(levels, [c for c in COMPETENCE_COLUMNS if c in levels])
    grounded = [m for m in dict.fromkeys(thirds["measure"]) if thirds.loc[thirds["measure"] == m, "headline"].all()]
    seeds = thirds[thirds["seeds_ci_low"].notna()]
    width = lambda f, lo, hi: (f[hi] - f[lo])  # noqa: E731
    placebo = thirds[thirds["factor"] == "placebo"]
    floor = thirds[thirds["verdict"] == "no more similar than the floor"]
    return {
        "lead": grounded[0] if grounded else None,
        "grounded": grounded,
        "statement": [{"topic": r.topic, "level": r.level, "text": r.text} for r in statement.itertuples()],
        "thirds": _records(thirds, UNIVERSALITY_COLUMNS),
        "senses": sense_thirds,
        "controls": [] if controls is None else _records(controls, CONTROL_COLUMNS),
        "competence": competence,
        "checks": {
            "cells_with_seeds": int(len(seeds)),
            "seeds_at_least_as_wide": int((width(seeds, "seeds_ci_low", "seeds_ci_high")
                                           >= width(seeds, "rows_ci_low", "rows_ci_high") - 1e-12).sum()),
            "placebo_cells": int(len(placebo)),
            "placebo_contains_one": int(((placebo["ci_low"] <= 1) & (placebo["ci_high"] >= 1)).sum()),
            "floor_verdicts": int(len(floor)),
            "floor_within_margin": int(((floor["ci_low"] >= -floor["margin"])
                                        & (floor["ci_high"] <= floor["margin"])).sum()),
        },
    }


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


def _coverage_table(summary: dict) -> str:
    coverage = summary["interval_coverage"]
    lines = [f"{coverage['datasets']} simulated data sets per setting, n = {coverage['rows']} rows, "
             f"{coverage['resamples']} half-samples per interval; share of 95 % intervals holding the truth ± its "
             "Monte Carlo standard error (half-width in the estimate's units):", "",
             "| measure | truth | interval | n/d = " + " | n/d = ".join(f"{r:g}" for r in coverage["ratios"]) + " |",
             "|---|---|---|" + "---:|" * len(coverage["ratios"])]
    # a k-NN measure's value depends on n: moving it towards another n is no bias correction
    keys = list(dict.fromkeys((r["measure"], r["truth"], r["interval"]) for r in coverage["results"]
                              if not (r["measure"] == "mutual_knn" and "bias-corrected" in r["interval"])))
    for measure, truth, method in keys:
        cells = []
        for ratio in coverage["ratios"]:
            found = [r for r in coverage["results"] if (r["measure"], r["truth"], r["interval"]) == (measure, truth,
                                                                                                method)
                     and r["n_over_d"] == ratio]
            cells.append("–" if not found else f"{found[0]['coverage']:.1%} ± {found[0]['mc_error']:.1%} "
                         f"(±{found[0]['mean_half_width']:.3f})")
        lines.append(f"| {_cell(measure)} | {_cell(truth)} | {_cell(method)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _gb(size: float | None) -> str:
    return "–" if size is None else f"{size / 1e9:.2f} GB" if size < 1e10 else f"{size / 1e9:.0f} GB"


def _minutes(run: dict) -> str:
    wall = run.get("time_wall_s") or run["log_wall_s"]
    return f"{wall / 60:.1f} min"


BLOCKS: dict[str, tuple[Callable[[dict], str], bool]] = {
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
    "universality-run": (_universality_run, False),
    "universality-statement": (_universality_statement, True),
    "universality-thirds": (_universality_thirds, True),
    "universality-senses": (_universality_senses, True),
    "universality-controls": (_universality_controls, True),
    "universality-competence": (_universality_competence, True),
    "universality-checks": (_universality_checks, False),
    "universality-readme": (_universality_readme, False),
    "interval-coverage": (_coverage_table, True),
}


def load_summary(path: Path = SUMMARY) -> dict:
    return json.loads(Path(path).read_text())


def render(name: str, summary: dict) -> str:
    """What the block NAME holds between its markers."""
    if name not in BLOCKS:
        raise KeyError(f"no recorded block {name!r}; known: {', '.join(BLOCKS)}")
    renderer, block = BLOCKS[name]
    text = renderer(summary)
    return f"\n\n{text}\n\n" if block else text


def blocks(text: str) -> list[tuple[str, str]]:
    """(name, what it holds now) of every recorded block of a page."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def fill(text: str, summary: dict) -> str:
    """The page with every recorded block rendered from `summary`."""
    return BLOCK.sub(lambda m: f"<!-- recorded: {m.group(1)} -->{render(m.group(1), summary)}<!-- /recorded -->",
                     text)


def pages(root: Path = ROOT) -> list[Path]:
    """README.md and every docs/*.md (recursively) with a recorded block."""
    candidates = [Path(root) / "README.md", *sorted((Path(root) / "docs").rglob("*.md"))]
    return [p for p in candidates if BLOCK.search(p.read_text())]


def stale_note(summary: dict, root: Path = ROOT) -> str | None:
    """An admonition when the checkout's fingerprint differs from the recorded run's; None when it matches."""
    if summary.get("fingerprint") == fingerprint(root):
        return None
    commit = (summary.get("commit") or "?")[:7]
    return ("!!! warning \"Recorded figures may be out of date\"\n"
            f"    These figures come from a run of commit {commit}; the code or configuration has changed since: "
            "they may be out of date. Rerun the default (twice: once with MKL_CBWR=COMPATIBLE) and "
            "`benchmarks/record_run.py RUN --other-kernel OTHER --write`.\n")
