"""The default run's figures that the README and the guide quote, kept as a recorded run summary so that they cannot
drift: docs/recorded-run/summary.json, written by ``benchmarks/record_run.py RUN --other-kernel OTHER --write`` from
a finished run (and the same commit's run on another kernel path), with copies of the small results tables it
quotes beside it.

A quoted figure sits in the Markdown between ``<!-- recorded: NAME -->`` and ``<!-- /recorded -->``; :func:`render`
makes NAME from the summary (``BLOCKS`` lists them; their renderers: recorded_default, recorded_universality,
recorded_coverage) and :func:`fill` rewrites every block of a page.
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

from reprsim.guide.recorded_coverage import COVERAGE_BLOCKS
from reprsim.guide.recorded_default import DEFAULT_BLOCKS
from reprsim.guide.recorded_universality import UNIVERSALITY_BLOCKS
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


BLOCKS: dict[str, tuple[Callable[[dict], str], bool]] = {**DEFAULT_BLOCKS, **UNIVERSALITY_BLOCKS, **COVERAGE_BLOCKS}


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
