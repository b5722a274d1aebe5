"""What the HTML report shows: a main page that leads with the answer, and linked detail pages.

The main page (index.html) says what was compared, then the findings, the model × model summary
per measure family and the model distances; everything per pair, per fine-tuned model and per
aligner lives on detail pages in the same folder (relative links, figures embedded, so the folder
can be copied anywhere). This module prepares data only: every section is
`section(inputs: ReportInputs) -> dict | None`, the tables (DataFrames), figures (`Figure`: a PNG and its
caption), sentences and links it makes of the tidy tables it is given, and None when it has nothing to
show. Sections only show: whatever a table holds was computed by the stage that wrote it; a section may
reshape a table for display (pivot, filter to the task metric, pick a median to quote), nothing more.

The markup lives in Jinja2 templates, in templates/ next to this module: base.html (head, style.css, the
links between pages, footer), one <page>.html per entry of PAGES, and sections/<section>.html, one per
section function here, given that function's data under the function's name (render.py holds the
environment; autoescape on). Captions live once, in the `captions/*.rst` files next to this module, shared
with `snakemake --report`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.io.datasets import read_meta
from reprsim.io.outputs import write_text
from reprsim.io.provenance import versions
from reprsim.io.store import open_store
from reprsim.inference.best_match import table as best_match_table
from reprsim.io.tables import read_table, read_tables
from reprsim.tables.layers import matching_layer
from reprsim.measure_registry import DISPLAY_NAMES, FAMILIES
from reprsim.design.senses import AGAINST_IDENTITY, ANSWER_TOPICS, SEEDS_ROW
from reprsim.stages.report.labels import UNIVERSALITY_VERDICT_RULES, UNIVERSALITY_VERDICTS, representation_text
from reprsim.stages.report.render import render_page
from reprsim.tables.stitching import asymmetry as stitching_asymmetry

Paths = tuple[str, ...]
PARAMS = ("title", "task_metrics", "split", "confidence", "measures", "attention_measures", "pages", "grounding_tests")


@dataclass(frozen=True)
class ReportInputs:
    """The report rule's named inputs (rules/common.smk TARGETS), each a tuple of paths, plus its params."""

    title: str = "reprsim report"
    task_metrics: Mapping[str, str] = field(default_factory=dict)
    split: str = ""  # the rows the similarity measures are computed on
    confidence: float = 0.95  # of every interval
    measures: Mapping[str, str] = field(default_factory=dict)  # config label -> measure, in config order
    pages: Mapping[str, str] = field(default_factory=dict)  # page name -> file name, set by build_report
    datasets: Paths = ()
    models: Paths = ()
    stores: Paths = ()
    findings: Paths = ()
    pair_summary: Paths = ()
    pairs: Paths = ()  # results/tables/pairs.parquet: every pair job's rows (each layer's best match)
    model_summary_figures: Paths = ()
    heatmaps: Paths = ()
    model_distances: Paths = ()
    model_distance_figure: Paths = ()
    localization: Paths = ()
    localization_figure: Paths = ()
    truncation_tables: Paths = ()
    truncation_figures: Paths = ()
    skip_tables: Paths = ()
    skip_figures: Paths = ()
    layer_views: Paths = ()
    layer_blocks: Paths = ()
    layer_view_figures: Paths = ()
    aligner_tables: Paths = ()
    aligner_figures: Paths = ()
    synthetic_tables: Paths = ()
    injection_tables: Paths = ()
    token_tables: Paths = ()
    attention: Paths = ()
    attention_heatmaps: Paths = ()
    attention_head_figures: Paths = ()
    attention_layer_figures: Paths = ()
    stitching: Paths = ()  # results/tables/stitching.parquet (all stitch jobs)
    stitching_replicates: Paths = ()  # results/tables/stitching_resamples.parquet (the asymmetry's intervals)
    stitch_figures: Paths = ()  # per unordered model pair: penalties both ways
    stitching_figures: Paths = ()  # per dataset: identity stitching beside CKA
    attention_measures: Mapping[str, str] = field(default_factory=dict)  # attention label -> measure
    measure_tests: Paths = ()  # results/tables/measure_tests.parquet: which measure to believe
    findings_by_measure: Paths = ()  # every claim under every measure (the findings stage)
    measure_agreement: Paths = ()  # every two measures' rank agreement
    discordance: Paths = ()  # model pairs two measures order oppositely
    measure_agreement_figure: Paths = ()
    grounding_tests: tuple[str, ...] = ()  # the tests grounding.tests asked for
    universality: Paths = ()  # results/tables/universality.parquet: each factor level's share u per measure and depth
    universality_statement: Paths = ()  # the study's sentences
    universality_senses: Paths = ()  # the same per sense of similarity (factor level × sense × third)
    universality_controls: Paths = ()  # each artefact control's verdicts beside its twin's
    universality_convergence: Paths = ()  # cross-seed similarity over training and its claims (two tables)
    universality_figure: Paths = ()  # the factor × depth matrix of verdicts per measure
    senses_figure: Paths = ()  # the factor × sense matrix
    convergence_figure: Paths = ()  # cross-seed similarity against the training step

    @classmethod
    def from_named(cls, inputs: Mapping[str, str | Iterable[str]], title: str,
                   task_metrics: Mapping[str, str] | None = None, **params) -> ReportInputs:
        """From named inputs as the rule passes them: a single path or a list of paths per name."""
        known = {f.name for f in dataclasses.fields(cls)} - set(PARAMS)
        unknown = sorted(set(inputs) - known)
        if unknown:
            raise ValueError(f"the report has no section for input(s) {unknown}; add one to "
                             f"reprsim.stages.report.html (it knows {sorted(known)})")
        paths = {name: (str(value),) if isinstance(value, (str, os.PathLike)) else tuple(map(str, value))
                 for name, value in inputs.items()}
        return cls(title=title, task_metrics=dict(task_metrics or {}), **params, **paths)


# ----------------------------------------------------------------- captions

CAPTION_PLACEHOLDER = re.compile(r"\{\{\s*(?:snakemake\.wildcards\.)?(\w+)[^}]*\}\}")
NEUTRAL = {"model_a": "model A", "model_b": "model B", "model": "the model", "dataset": "the dataset",
           "representation": "the chosen"}


def paragraphs(name: str, **wildcards: str) -> list[str]:
    """The paragraphs of captions/<name>.rst (a blank line starts a new one), each one line of text, Jinja
    placeholders filled from `wildcards` or with a neutral word."""
    text = (resources.files("reprsim.stages.report") / "captions" / f"{name}.rst").read_text(encoding="utf-8")
    text = re.sub(r"\{%.*?%\}", "", text)
    text = CAPTION_PLACEHOLDER.sub(
        lambda m: wildcards.get(m.group(1), NEUTRAL.get(m.group(1), m.group(1).replace("_", " "))), text)
    return [" ".join(block.split()) for block in re.split(r"\n\s*\n", text) if block.strip()]


def caption(name: str, **wildcards: str) -> str:
    """The text of captions/<name>.rst as one line (see :func:`paragraphs`)."""
    return " ".join(paragraphs(name, **wildcards))


# ----------------------------------------------------------------- what sections hand the templates

MEASURE_NAMES = {**DISPLAY_NAMES, "procrustes": "Procrustes"}


@dataclass(frozen=True)
class Figure:
    """A figure to embed: its PNG, its caption (also its alt text unless `alt` is given), and whether it
    takes the page's width."""

    path: str
    caption: str
    alt: str = ""
    wide: bool = False


@dataclass(frozen=True)
class Link:
    """A relative link to another page of the report (and an anchor on it)."""

    href: str
    text: str


def _number(value) -> str:
    """Three significant digits, – for a missing number."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return "–"
    return "–" if not np.isfinite(value) else f"{value:.3g}"


def _with_interval(value, low, high) -> str:
    """'value [low, high]' with as many decimals as show two digits of the interval's width (2 to 4),
    or the value alone (three significant digits) when the interval is missing."""
    if "–" in (_number(value), _number(low), _number(high)):
        return _number(value)
    value, low, high = float(value), float(low), float(high)
    width = high - low
    decimals = 2 if width <= 0 else int(max(2, 1 - np.floor(np.log10(width))))
    if decimals > 4:  # a very narrow interval: fixed decimals would read 0.0000 [0.0000, 0.0000]
        return f"{value:.3g} [{low:.3g}, {high:.3g}]"
    return f"{value:.{decimals}f} [{low:.{decimals}f}, {high:.{decimals}f}]"


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "–"


def _pair_parts(path: str) -> tuple[str, str, str, str]:
    """(representation, dataset, model_a, model_b) of a per-pair path .../{representation}/{dataset}/{a}__{b}.png."""
    path = Path(path)
    a, _, b = path.stem.partition("__")
    return path.parent.parent.name, path.parent.name, a, b


def _pair_label(path: str) -> str:
    """'A: a · B: b — pooling, dataset' from a per-pair path."""
    representation, dataset, a, b = _pair_parts(path)
    return f"A: {a} · B: {b} — {representation_text(representation)}, {dataset}"


def _anchor(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(parts)).strip("-")


def _task_metric_rows(frame: pd.DataFrame, model_column: str, task_metrics: Mapping[str, str]) -> pd.DataFrame:
    """The rows scoring each fine-tuned model (in `model_column`) by its task's metric (accuracy by default)."""
    return frame[frame["metric"] == frame[model_column].map(lambda m: task_metrics.get(m, "accuracy"))]


def _by_model(paths: Iterable[str]) -> dict[str, str]:
    """Per-model outputs (.../{model}/<file>) by model name."""
    return {Path(p).parent.name: p for p in paths}


def _measure_name(label: str) -> str:
    return MEASURE_NAMES.get(label, label)


def _link(inputs: ReportInputs, page: str, text: str, anchor: str = "") -> Link | None:
    """A link to another page of the report (None when this report has no such page)."""
    target = inputs.pages.get(page)
    if not target:
        return None
    return Link(target + ("#" + anchor if anchor else ""), text)


def _rows_compared(inputs: ReportInputs) -> str:
    """'n = 872 rows' of the similarity split, as the pair summary records it."""
    if not inputs.pair_summary:
        return ""
    summary = read_tables(inputs.pair_summary)
    if "n" not in summary or summary.empty:
        return ""
    counts = sorted({int(n) for n in summary["n"].dropna()})
    return "n = " + " or ".join(f"{n:,}" for n in counts) + " rows" if counts else ""


def _chance_levels(summary: pd.DataFrame, measures: Iterable[str]) -> str:
    """'linear CKA 0.035, PWCCA 0.97, …': each measure's chance level (null mean; median over pairs)."""
    if "null_mean" not in summary:
        return ""
    medians = summary.groupby("measure")["null_mean"].median()
    order = [m for m in measures if m in medians.index] + [m for m in medians.index if m not in set(measures)]
    return ", ".join(f"{_measure_name(m)} {medians[m]:.2f}" for m in order if np.isfinite(medians[m]))


# ----------------------------------------------------------------- provenance tables


def brought_metas(store_paths: Iterable[str]) -> list[dict]:
    """What the report says of each brought model (source: activations) among the stores, which has no model
    directory and no meta.json: its store's attrs in a model meta's keys."""
    metas = []
    for path in store_paths:
        attrs = dict(open_store(path).attrs)
        if attrs.get("source") == "activations":
            metas.append({"name": attrs["model"], "source": "activations", "architecture": "–",
                          "n_layers": attrs["n_layers"], "hidden_size": attrs["hidden_size"], "n_parameters": None,
                          "spec": {"dataset": attrs.get("dataset"), "pooling": attrs["poolings"][0],
                                   "splits": attrs["split_names"]}})
    return metas


def models_table(model_dirs: Iterable[str], brought: Iterable[Mapping] = ()) -> pd.DataFrame:
    rows = []
    for meta in [*(read_meta(directory) for directory in model_dirs), *brought]:
        rows.append({
            "model": meta["name"], "source": meta["source"], "parent": meta.get("parent") or "–",
            "tokenizer from": meta.get("tokenizer_from") or "–",
            "seed": meta.get("seed"), "architecture": meta["architecture"], "layers": meta["n_layers"],
            "width": meta["hidden_size"],
            "parameters": f"{meta['n_parameters'] / 1e6:.1f} M" if meta["n_parameters"] is not None else "–",
            "validation accuracy": meta.get("validation_accuracy"),
            "validation MCC": meta.get("validation_matthews_correlation"),
            "train steps": meta.get("steps"), "train s": meta.get("train_seconds"),
            "content hash": _short(meta.get("content_hash")),
        })
    return pd.DataFrame(rows)


def datasets_table(dataset_dirs: Iterable[str]) -> pd.DataFrame:
    rows = []
    for directory in dataset_dirs:
        meta = read_meta(directory)
        rows.append({
            "dataset": meta["name"], "source": meta["source"], "task": meta["task"],
            "labels": ", ".join(map(str, meta["label_names"])) or "none (unlabelled text)",
            **{f"{split} rows": size for split, size in meta["sizes"].items()},
            "content hash": _short(meta["content_hash"]),
        })
    return pd.DataFrame(rows)


def stores_table(store_paths: Iterable[str]) -> pd.DataFrame:
    rows = []
    for path in store_paths:
        attrs = dict(open_store(path).attrs)
        rows.append({
            "dataset": attrs["dataset"], "model": attrs["model"],
            "examples": attrs["n_examples"], "layers": attrs["n_layers"] + 1, "width": attrs["hidden_size"],
            "dtype": attrs["dtype"], "poolings": ", ".join(attrs["poolings"]), "device": attrs["device"],
            "examples/s": attrs["examples_per_second"],
        })
    return pd.DataFrame(rows)


def _model_phrase(meta: Mapping) -> str:
    """One model in words: where it comes from and, for a fine-tuned one, how well it does its task."""
    source, spec = meta["source"], meta.get("spec") or {}
    shape = f"{meta['n_layers']} blocks × {meta['hidden_size']}"
    if source == "finetune":
        accuracy = meta.get("validation_accuracy")
        score = f", validation accuracy {accuracy:.3f}" if isinstance(accuracy, (int, float)) else ""
        origin = f"{meta.get('parent')} fine-tuned on {meta.get('dataset', spec.get('dataset', '?'))}, " \
                 f"seed {meta.get('seed')}{score}"
    elif source == "init":
        origin = f"randomly initialised {meta['architecture']}, seed {meta.get('seed')}"
    elif source == "pretrain":
        kind = "masked" if meta.get("objective") == "masked" else "causal"
        step = f", step {meta['step']} of {meta['steps']}" if meta.get("checkpoint") is not None else ""
        ce = meta.get("validation_cross_entropy")
        score = (f", validation cross-entropy {ce:.2f} (unigram {meta['unigram_cross_entropy']:.2f})"
                 if isinstance(ce, (int, float)) else "")
        origin = f"{kind} LM ({meta['architecture']}) pretrained on {meta.get('dataset', '?')}, seed {meta.get('seed')}" \
                 f"{step}{score}"
    elif source == "package":
        origin = f"pretrained, from the Python package {spec.get('package', '?')}"
    elif source == "hf":
        origin = f"pretrained, from the hub ({spec.get('id', '?')})"
    elif source == "activations":  # layer 0 need not be embeddings: layers, not blocks
        return (f"brought activations, no network ({spec.get('pooling')} pooling of {spec.get('dataset')}'s "
                f"{', '.join(spec.get('splits') or [])}; {meta['n_layers'] + 1} layers × {meta['hidden_size']})")
    else:
        origin = f"from {source}"
    return f"{origin} ({shape})"


# ----------------------------------------------------------------- main page sections


def header(inputs: ReportInputs) -> dict:
    """The title and, in a few lines, what was compared: models, dataset and rows, measures."""
    metas = [read_meta(d) for d in inputs.models] + brought_metas(inputs.stores)
    datasets = [read_meta(d) for d in inputs.datasets]
    summary = read_tables(inputs.pair_summary) if inputs.pair_summary else pd.DataFrame()
    sizes = sorted({d["sizes"][inputs.split] for d in datasets if d["sizes"].get(inputs.split)})
    # the rows the pair tables say they used (extraction may cap a split), else the split's size
    rows = _rows_compared(inputs) or ("n = " + " or ".join(f"{n:,}" for n in sizes) + " rows" if sizes else "")
    representations = sorted(set(summary["representation"])) if "representation" in summary else []
    return {
        "title": inputs.title,
        "n_models": len(metas),
        "datasets": [{"name": d["name"], "classes": len(d["label_names"]),
                      "labels": ", ".join(map(str, d["label_names"]))} for d in datasets],
        # which rows: the split (and how many of its rows), when either is known
        "rows_of": (inputs.split + " split" if inputs.split else "rows") if inputs.split or rows else "",
        "rows": rows,
        "representations": ", ".join(representation_text(r) for r in representations),
        "measures": [_measure_name(m) for m in inputs.measures],
        "confidence": f"{inputs.confidence:.0%}",
        "models": [{"name": m["name"], "phrase": _model_phrase(m)} for m in metas],
        "generated": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}",
        # a universality study's answer opens the page (None without a study)
        "study": ({"sentences": _statement(inputs)[0],
                   "link": _link(inputs, "universality", PAGES["universality"].title)}
                  if inputs.universality_statement else None),
    }


MAIN_SECTIONS_TOC = [("findings", "Findings"), ("by-measure", "Every finding under every measure"), ("summary", "Model × model summary per measure family"),
                     ("distance", "Model distance and clustering"), ("provenance", "Provenance")]


def contents(inputs: ReportInputs) -> dict:
    """Table of contents: the sections of this page, then the detail pages."""
    present = {"findings": bool(inputs.findings), "by-measure": bool(inputs.findings_by_measure),
               "summary": bool(inputs.model_summary_figures),
               "distance": bool(inputs.model_distance_figure or inputs.model_distances),
               "provenance": bool(inputs.datasets or inputs.models or inputs.stores)}
    return {"sections": [{"anchor": anchor, "text": text} for anchor, text in MAIN_SECTIONS_TOC if present[anchor]],
            "details": [{"link": _link(inputs, name, page.title), "blurb": page.blurb}
                        for name, page in PAGES.items() if name != "index" and name in inputs.pages]}


VERDICTS = {"supported": "✓ supported", "contradicted": "✗ contradicted", "inconclusive": "? inconclusive",
            "not applicable": "– not applicable"}


def findings(inputs: ReportInputs) -> dict | None:
    """The findings table: each claim's verdict first, its estimate with interval against its reference."""
    if not inputs.findings:
        return None
    table = read_tables(inputs.findings)
    counts = table["verdict"].value_counts() if not table.empty else pd.Series(dtype=int)
    rows = []
    for row in table.itertuples(index=False):
        row = row._asdict()
        verdict = str(row.get("verdict", ""))
        rests_on = " · ".join(str(row[k]) for k in ("models", "measure") if row.get(k) not in (None, "") and
                              not (isinstance(row[k], float) and np.isnan(row[k])))
        if isinstance(row.get("representation"), str) and row["representation"]:  # one row per representation
            rests_on += f" · {representation_text(row['representation'])}"
        reference = _number(row.get("reference"))
        kind = row.get("reference_kind")
        if reference != "–" and isinstance(kind, str) and kind not in ("", "zero"):
            reference += f" ({kind})"
        n = row.get("n")
        # a claim more than one measure could test: how many support it, and where it holds and fails
        holds = row.get("holds_under") if isinstance(row.get("holds_under"), str) else ""
        several = bool(holds) and not holds.endswith(" of 1")
        across = row["across_measures"] if isinstance(row.get("across_measures"), str) else ""
        reason, how = _reason(row.get("reason"))
        rows.append({"css": re.sub(r"\W+", "-", verdict), "verdict": VERDICTS.get(verdict, verdict),
                     "holds": holds if several else "", "claim": str(row.get("claim", "")),
                     "source": str(row.get("source", "")), "across": across if several else "",
                     "statistic": str(row.get("statistic", "")), "rests_on": rests_on,
                     "estimate": _with_interval(row.get("estimate"), row.get("ci_low"), row.get("ci_high")),
                     "reference": reference, "n": f"{int(n):,}" if _number(n) != "–" else "–",
                     "reason": reason, "how": how})
    return {"caption": paragraphs("findings"), "claims": len(table),
            "tally": " · ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts),
            "confidence": f"{inputs.confidence:.0%}", "rows": rows}


def _reason(reason) -> tuple[str, str]:
    """The verdict's reason as (shown, one click away): its first clause (what the interval does against the
    reference), and the rest (how the interval was built), so that a row stays a few lines tall."""
    text = str(reason) if isinstance(reason, str) else ""
    first, _, rest = text.partition("; ")
    return first, rest


def model_summary(inputs: ReportInputs) -> dict | None:
    """The model × model summary figure per dataset and representation, with n and the chance levels quoted."""
    if not inputs.model_summary_figures:
        return None
    summary = read_tables(inputs.pair_summary) if inputs.pair_summary else pd.DataFrame()
    figures = []
    for path in inputs.model_summary_figures:
        representation, dataset = Path(path).parent.name, Path(path).stem
        rows = summary
        if {"dataset", "representation"} <= set(summary.columns):
            rows = summary[(summary["dataset"] == dataset) & (summary["representation"] == representation)]
        n = f"n = {int(rows['n'].iloc[0]):,} rows" if "n" in rows and not rows.empty else "n in the figure title"
        chance = _chance_levels(rows, inputs.measures) if not rows.empty else ""
        text = (f"{dataset}, {representation_text(representation)}, {inputs.split + ' split, ' if inputs.split else ''}{n}. "
                f"Chance levels (permutation null means, median over pairs): {chance or 'not recorded'}. "
                "Hatched cells: the interval does not exclude chance.")
        figures.append(Figure(path, text, alt=f"model × model summary, {dataset}, {representation_text(representation)}",
                              wide=True))
    return {"caption": paragraphs("model_summary"), "figures": figures,
            "pairs": _link(inputs, "pairs", "Similarity per model pair")}


def _distance_matrices(distances: pd.DataFrame) -> list[dict]:
    """One model × model table per dataset, representation, measure and depth: 'distance [low, high]'."""
    keys = [k for k in ("dataset", "representation", "measure", "depth") if k in distances]
    matrices = []
    for key, rows in distances.groupby(keys, sort=True):
        key = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        cells = rows.assign(cell=[
            "0" if a == b else _with_interval(d, lo, hi) for a, b, d, lo, hi in zip(
                rows["model_a"], rows["model_b"], rows["distance"],
                rows.get("ci_low", pd.Series(np.nan, index=rows.index)),
                rows.get("ci_high", pd.Series(np.nan, index=rows.index)))])
        matrix = cells.pivot(index="model_a", columns="model_b", values="cell")
        matrix.columns.name = None
        matrices.append({"depth": int(key["depth"]), "measure": str(key.get("measure", "")),
                         "where": ", ".join(str(key[k]) for k in ("dataset", "representation") if k in key),
                         "table": matrix.rename_axis("model").reset_index()})
    return matrices


def model_distance(inputs: ReportInputs) -> dict | None:
    """The model-distance figure (matrix and dendrogram), and its table with intervals, per depth."""
    if not inputs.model_distance_figure and not inputs.model_distances:
        return None
    figures = []
    if inputs.model_distance_figure:
        rows = _rows_compared(inputs) or "n in the pair tables"
        figures = [Figure(p, f"Model distance between models of equal depth ({rows}); chance (red): the "
                             "distance two models would have with every layer at CKA's chance level.",
                          alt="model distance matrices and dendrograms", wide=True)
                   for p in inputs.model_distance_figure]
    return {"caption": paragraphs("model_distance"), "figures": figures, "confidence": f"{inputs.confidence:.0%}",
            "matrices": _distance_matrices(read_tables(inputs.model_distances)) if inputs.model_distances else []}


def provenance(inputs: ReportInputs) -> dict | None:
    """Datasets, models, stores and versions, collapsed: they matter for reproducing, not for reading."""
    tables = []
    if inputs.datasets:
        tables.append({"title": "Datasets", "table": datasets_table(inputs.datasets)})
    brought = brought_metas(inputs.stores)
    if inputs.models or brought:
        tables.append({"title": "Models", "table": models_table(inputs.models, brought)})
    if inputs.stores:
        tables.append({"title": "Activation stores", "table": stores_table(inputs.stores)})
    if not tables:
        return None
    return {"caption": paragraphs("workflow"), "tables": tables, "versions": json.dumps(versions())}


# ----------------------------------------------------------------- detail pages


def pair_details(inputs: ReportInputs) -> dict | None:
    """Per model pair: the pair summary table, then every pair's heatmaps, with an index of pairs."""
    if not inputs.heatmaps and not inputs.pair_summary:
        return None
    summary = None
    if inputs.pair_summary:
        table = read_tables(inputs.pair_summary)
        if not table.empty:
            summary = {"caption": paragraphs("pair_summary"), "rows": len(table),
                       "table": _pair_summary_display(table, inputs)}
    localization = []
    if inputs.localization_figure:
        rows = _rows_compared(inputs) or "n in the pair tables"
        localization = [Figure(p, f"{caption('localization')} {rows}; the score has no permutation null of its "
                                  "own: 0 = neuron-level and distributed similarity agree.", alt="localization",
                               wide=False) for p in inputs.localization_figure]
    heatmaps = []
    best = _best_matches(inputs)
    for path in inputs.heatmaps:
        representation, dataset, a, b = _pair_parts(path)
        matches = best.get((representation, dataset, a, b))
        heatmaps.append({"anchor": _anchor("pair", representation, dataset, a, b), "a": a, "b": b,
                         "where": f"{representation_text(representation)}, {dataset}",
                         "figure": Figure(path, f"{_pair_label(path)}; n and each measure's chance level in the panel "
                                                "titles; hatched cells: the interval does not exclude chance.",
                                          alt=_pair_label(path), wide=True),
                         "best": None if matches is None else {"rows": len(matches), "table": matches}})
    return {"summary": summary, "localization": localization, "heatmaps": heatmaps,
            "heatmap_caption": paragraphs("heatmap") if heatmaps else [],
            "best_caption": paragraphs("best_match") if best else []}


def _best_matches(inputs: ReportInputs) -> dict[tuple, pd.DataFrame]:
    """Per (representation, dataset, model_a, model_b): each layer of A's best match in B, for reading
    (reprsim.inference.best_match): the all-row choice with its own p and the selection-corrected p, and the layer chosen on
    half the rows with its value and interval on the other half."""
    if not inputs.pairs:
        return {}
    pairs = read_tables(inputs.pairs)
    if pairs.empty or "is_best" not in pairs:
        return {}
    best = best_match_table(pairs)
    out = {}
    for key, rows in best.groupby(["representation", "dataset", "model_a", "model_b"], sort=False):
        shown = pd.DataFrame({"measure": rows["measure"].map(_measure_name), "direction": rows["direction"],
                              "layer of A": rows["layer_a"], "best layer of B": rows["best_b"],
                              "value": rows["value"].map(_number), "chance": rows["null_mean"].map(_number),
                              "p (that cell)": rows["null_p"].map(_number),
                              "p (best of B's layers)": rows["selection_p"].map(_number),
                              "chosen on half the rows": rows["split_b"].astype("Int64"),
                              f"on the other half [{inputs.confidence:.0%} interval]": [
                                  _with_interval(v, lo, hi) for v, lo, hi in
                                  zip(rows["split_value"], rows["split_low"], rows["split_high"])],
                              "rows (choose / estimate)": [f"{a} / {b}" for a, b in
                                                           zip(rows["n_select"], rows["n_estimate"])]})
        out[key] = shown.reset_index(drop=True)
    return out


def _pair_summary_display(summary: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """The pair summary for reading: the mean with its interval in one column, chance beside it."""
    shown = pd.DataFrame({column: summary[column] for column in ("dataset", "representation", "model_a", "model_b")
                          if column in summary})
    shown["measure"] = summary["measure"].map(_measure_name)
    shown["direction"] = summary["direction"]
    if "n_layers" in summary:
        shown["layers"] = summary["n_layers"]
    shown[f"mean [{inputs.confidence:.0%} interval]"] = [
        _with_interval(v, lo, hi) for v, lo, hi in zip(
            summary["mean_over_matching_layers"], summary.get("ci_low", pd.Series(np.nan, index=summary.index)),
            summary.get("ci_high", pd.Series(np.nan, index=summary.index)))]
    shown["chance"] = summary["null_mean"].map(_number) if "null_mean" in summary else "–"
    if "beyond_chance" in summary:
        shown["beyond chance"] = summary["beyond_chance"].map({True: "yes", False: "no"}).fillna("–")
    if "largest_null_p" in summary:
        shown["largest null p"] = summary["largest_null_p"].map(_number)
    if "n" in summary:
        shown["n"] = summary["n"]
    if "warning" in summary:
        shown["warning"] = summary["warning"].fillna("")
    return shown


def _majority(inputs: ReportInputs) -> dict[str, float]:
    """The majority-class score (the chance baseline) per fine-tuned model, from its truncation table."""
    if not inputs.truncation_tables:
        return {}
    scores = _task_metric_rows(read_tables(inputs.truncation_tables), "model", inputs.task_metrics)
    majority = scores[scores["mode"] == "MAJORITY"]
    return dict(zip(majority["model"], majority["value"]))


def _n_of(paths: Iterable[str]) -> dict[str, str]:
    """'n = 500 validation rows' per model, from its per-model tables (split, n columns)."""
    found = {}
    for model, path in _by_model(paths).items():
        table = read_table(path)
        if {"n", "split"} <= set(table.columns) and not table.empty:
            found[model] = f"n = {int(table['n'].iloc[0]):,} {table['split'].iloc[0]} rows"
    return found


def finetuned(inputs: ReportInputs) -> dict | None:
    """Per fine-tuned model its truncation curve, skip map and layer views; block structure; truncation scores."""
    if not (inputs.truncation_figures or inputs.layer_view_figures or inputs.layer_blocks
            or inputs.truncation_tables or inputs.skip_figures):
        return None
    truncation, views = _by_model(inputs.truncation_figures), _by_model(inputs.layer_view_figures)
    skipped = _by_model(inputs.skip_figures)
    majority = _majority(inputs)
    n_truncation, n_skip, n_views = (_n_of(inputs.truncation_tables), _n_of(inputs.skip_tables),
                                     _n_of(inputs.layer_views))
    models = []  # the page's title names the section; each model gets its own heading
    for model in sorted(set(truncation) | set(views) | set(skipped)):
        chance = (f"chance: the majority class, {majority[model]:.3f}" if model in majority
                  else "chance: the majority class (no truncation table)")
        figures = []
        if model in truncation:
            n = n_truncation.get(model, "n in the axis label")
            figures.append(Figure(truncation[model], f"{model}: truncation; {n}; {chance} (dotted line)."))
        if model in skipped:
            figures.append(Figure(skipped[model], f"{model}: skipping blocks; {n_skip.get(model, 'n in the title')}; "
                                                  f"{chance}."))
        if model in views:
            figures.append(Figure(views[model], f"{model}: linear CKA between layers; "
                                                f"{n_views.get(model, 'n in the title')}; chance level: the "
                                                "permutation null of every cell (its range in each panel's title; "
                                                "× where the 95% interval does not exclude it).", wide=True))
        models.append({"name": model, "anchor": _anchor("model", model), "figures": figures})
    truncation_scores = None
    if inputs.truncation_tables:
        scores = _task_metric_rows(read_tables(inputs.truncation_tables), "model", inputs.task_metrics)
        wide = scores.pivot_table(index=["model", "metric", "mode"], columns="layer", values="value")
        wide.columns = ["majority" if layer < 0 else f"layer {layer}" for layer in wide.columns]
        truncation_scores = wide.reset_index()
    return {"models": models,
            "caption": [*(paragraphs("truncation") if truncation else []), *(paragraphs("skip") if skipped else []),
                        *(paragraphs("layer_views") if views else [])],
            "blocks": ({"caption": paragraphs("layer_blocks"), "table": read_tables(inputs.layer_blocks)}
                       if inputs.layer_blocks else None),
            "truncation_scores": truncation_scores}


def aligners(inputs: ReportInputs) -> dict | None:
    """Ren et al. (2023): synthetic recovery (Table 3), aligners between models (Table 4 and their
    figures), layer injection (Table 5)."""
    if not (inputs.synthetic_tables or inputs.aligner_tables or inputs.aligner_figures or inputs.injection_tables):
        return None
    section = {"synthetic": None, "between_models": bool(inputs.aligner_tables or inputs.aligner_figures),
               "summary": None, "figures": None, "injection": None}
    if inputs.synthetic_tables:
        synthetic = read_tables(inputs.synthetic_tables)
        synthetic = synthetic[synthetic["role"] == "score"] if "role" in synthetic else synthetic
        wide = synthetic.pivot_table(index=["dataset", "model", "layer", "map_seed"], columns="aligner",
                                     values="rel_error", sort=False)
        wide.columns.name = None
        section["synthetic"] = {"caption": paragraphs("synthetic"), "table": wide.reset_index()}
    if inputs.aligner_tables:
        scored = read_tables(inputs.aligner_tables)
        scored = scored[scored["role"] == "score"]
        wide = scored.pivot_table(index=["dataset", "model_a", "model_b", "direction", "split"], columns="aligner",
                                  values="rel_error", aggfunc="mean", sort=False)
        wide.columns.name = None
        section["summary"] = {"caption": paragraphs("aligner_summary"), "table": wide.reset_index()}
    if inputs.aligner_figures:
        tables = {Path(p).stem: p for p in inputs.aligner_tables}
        figures = []
        for path in inputs.aligner_figures:
            n = ""
            if Path(path).stem in tables:
                scored = read_table(tables[Path(path).stem])
                scored = scored[scored["role"] == "score"]
                n = f"; n = {int(scored['n'].iloc[0]):,} {scored['split'].iloc[0]} rows" if not scored.empty else ""
            figures.append(Figure(path, f"{_pair_label(path)}{n}; no chance level is computed for aligner errors "
                                        "(0 = an exact map).", wide=True))
        section["figures"] = {"caption": paragraphs("aligners"), "figures": figures}
    if inputs.injection_tables:
        injected = read_tables(inputs.injection_tables)
        wide = _task_metric_rows(injected, "target", inputs.task_metrics).pivot_table(
            index=["dataset", "source", "target", "metric"], columns="method", values="value", sort=False)
        wide.columns.name = None
        section["injection"] = {"caption": paragraphs("injection"), "table": wide.reset_index()}
    return section


def _attention_display(table: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """Matching layers (same relative depth) of every attention pair: value [interval], chance, n."""
    rows = []
    for (dataset, a, b, label, direction), pair in table.groupby(
            ["dataset", "model_a", "model_b", "measure", "direction"], sort=False):
        depth_a, depth_b = int(pair["layer_a"].max()), int(pair["layer_b"].max())
        for _, row in pair.sort_values("layer_a").iterrows():
            if row["layer_b"] != max(1, matching_layer(row["layer_a"], depth_a, depth_b)):
                continue
            arrow = {"a->b": f"{a} → {b}", "b->a": f"{b} → {a}"}.get(direction, "both")
            rows.append({"dataset": dataset, "pair": f"{a} vs {b}", "measure": _measure_name(label),
                         "heads matched": arrow, "layers": f"{row['layer_a']} / {row['layer_b']}",
                         f"value [{inputs.confidence:.0%} interval]": _with_interval(row["value"], row["ci_low"],
                                                                                     row["ci_high"]),
                         "chance": _number(row["null_mean"]),
                         "beyond chance": {True: "yes", False: "no"}.get(row["beyond_chance"], "–"),
                         "n (sentences)": row["n"]})
    return pd.DataFrame(rows)


def attention_section(inputs: ReportInputs) -> dict | None:
    """Attention similarity (Wu et al. 2020): matching layers along depth, the layer x layer heatmaps per
    pair, the head x head detail, and the matching-layer values as a table."""
    if not inputs.attention:
        return None
    table = read_tables(inputs.attention)

    def sentences(dataset: str, *pair: str) -> str:
        rows = table[table["dataset"] == dataset]
        if pair:
            rows = rows[(rows["model_a"] == pair[0]) & (rows["model_b"] == pair[1])]
        counts = rows["n"].astype(int) if "n" in rows and len(rows) else pd.Series([], dtype=int)
        if counts.empty:
            return "n = ? sentences"
        low, high = counts.min(), counts.max()
        return f"n = {low} sentences" if low == high else f"n = {low}–{high} sentences"

    section = {"caption": paragraphs("attention_layers"), "table": None, "heatmaps": None, "heads": None}
    section["figures"] = [
        Figure(p, f"{Path(p).stem}: attention similarity of matching layers, {sentences(Path(p).stem)}; band = "
                  "interval, dotted = chance level.", alt=f"attention similarity along depth, {Path(p).stem}",
               wide=True)
        for p in inputs.attention_layer_figures]
    if not table.empty:
        shown = _attention_display(table, inputs)
        section["table"] = {"rows": len(shown), "table": shown}
    if inputs.attention_heatmaps:
        pairs = []
        for path in inputs.attention_heatmaps:
            _, dataset, a, b = _pair_parts(path)
            pairs.append({"anchor": _anchor("attention", dataset, a, b), "a": a, "b": b, "dataset": dataset,
                          "figure": Figure(path, f"{a} vs {b}, {dataset}: attention similarity of every layer pair, "
                                                 f"{sentences(dataset, a, b)}; chance in the panel titles; hatched: "
                                                 "the interval does not exclude chance.",
                                           alt=f"attention heatmaps {a} vs {b}", wide=True)})
        section["heatmaps"] = {"caption": paragraphs("attention_heatmap"), "pairs": pairs}
    if inputs.attention_head_figures:
        figures = []
        for path in inputs.attention_head_figures:
            _, dataset, a, b = _pair_parts(path.replace(".heads.png", ".png"))
            figures.append(Figure(path, f"{a} vs {b}, {dataset}: every head against every head in the chosen layer "
                                        f"pairs, {sentences(dataset, a, b)}; outlined: each head's best match (its "
                                        "chance level: the layer pair's in the heatmaps above).",
                                  alt=f"heads {a} vs {b}", wide=True))
        section["heads"] = {"caption": paragraphs("attention_heads"), "figures": figures}
    return section


def token_section(inputs: ReportInputs) -> dict | None:
    """Token-level minibatch CKA (Brown et al. 2023) of the configured pairs, as a table."""
    if not inputs.token_tables:
        return None
    table = read_tables(inputs.token_tables)
    if table.empty:
        return None
    shown = pd.DataFrame({"dataset": table["dataset"], "pair": table["model_a"] + " vs " + table["model_b"],
                          "layers": table["layer_a"].astype(str) + " / " + table["layer_b"].astype(str),
                          f"minibatch CKA [{inputs.confidence:.0%} interval]": [
                              _with_interval(v, lo, hi) for v, lo, hi in
                              zip(table["value"], table["ci_low"], table["ci_high"])],
                          "chance": table["null_mean"].map(_number),
                          "beyond chance": table["beyond_chance"].map({True: "yes", False: "no"}).fillna("–"),
                          "n (tokens)": table["n"]})
    return {"rows": len(shown), "table": shown}


def _layers_text(row) -> str:
    """'l / m' of one matched cell, or the mean row's 'mean of k cells'."""
    if pd.isna(row["layer_a"]):
        return f"mean of {int(row['cells'])} cells"
    return f"{int(row['layer_a'])} / {int(row['layer_b'])}"


def _asymmetry_display(asymmetry: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """The asymmetry table for reading: each penalty and the difference with its interval in one column."""
    ci = f"[{inputs.confidence:.0%} interval]"
    shown = pd.DataFrame({
        "dataset": asymmetry["dataset"], "model a": asymmetry["model_a"], "model b": asymmetry["model_b"],
        "φ": asymmetry["phi"], "metric": asymmetry["metric"],
        "layers (l of a / m of b)": [_layers_text(row) for _, row in asymmetry.iterrows()]})
    for column, name in (("penalty_ab", f"penalty a → b {ci}"), ("penalty_ba", f"penalty b → a {ci}"),
                         ("difference", f"difference (a → b) − (b → a) {ci}")):
        shown[name] = [_with_interval(v, lo, hi) for v, lo, hi in zip(
            asymmetry[column], asymmetry[f"{column}_low"], asymmetry[f"{column}_high"])]
    if (asymmetry["seeds"] > 1).any():
        shown["seeds (mean over)"] = asymmetry["seeds"]
    shown["n"] = asymmetry["n"]
    return shown


def _stitching_display(table: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """Every row of the stitching table for reading: value, g's score and penalty with their intervals."""
    table = table.sort_values(["dataset", "model_a", "model_b", "phi", "seed", "metric", "layer_a", "layer_b"],
                              kind="stable")
    ci = f"[{inputs.confidence:.0%} interval]"
    return pd.DataFrame({
        "dataset": table["dataset"], "f (bottom) → g (top)": table["model_a"] + " → " + table["model_b"],
        "layers l / m": table["layer_a"].astype(str) + " / " + table["layer_b"].astype(str), "φ": table["phi"],
        "seed": table["seed"], "metric": table["metric"],
        f"stitched {ci}": [_with_interval(v, lo, hi) for v, lo, hi in
                           zip(table["value"], table["ci_low"], table["ci_high"])],
        "chance": table["chance"].map(_number), "g alone": table["top_score"].map(_number),
        f"penalty {ci}": [_with_interval(v, lo, hi) for v, lo, hi in
                          zip(table["penalty"], table["penalty_low"], table["penalty_high"])],
        "self-stitch (f → f)": table["self_stitch"].map(_number), "excess penalty": table["excess_penalty"].map(_number),
        "steps": table["steps"], "n": table["n"]})


def stitching_section(inputs: ReportInputs) -> dict | None:
    """Model stitching (Bansal et al. 2021; Brown et al. 2023): what it measures, identity stitching beside
    CKA per dataset, the penalty figure of every model pair, the asymmetry of every pair (a → b against
    b → a, per matched cell, with intervals from the shared half-samples) and the whole table."""
    if not (inputs.stitching or inputs.stitch_figures or inputs.stitching_figures):
        return None
    table = read_tables(inputs.stitching) if inputs.stitching else pd.DataFrame()
    asymmetry = (stitching_asymmetry(table, read_tables(inputs.stitching_replicates), inputs.confidence)
                 if inputs.stitching_replicates and not table.empty else pd.DataFrame())
    toc = [("stitching-summary", "Stitching beside CKA", bool(inputs.stitching_figures)),
           ("stitching-pairs", "Per model pair", bool(inputs.stitch_figures)),
           ("stitching-asymmetry", "Asymmetry", not asymmetry.empty),
           ("stitching-table", "The stitching table", not table.empty)]
    section = {"contents": [{"anchor": anchor, "text": text} for anchor, text, shown in toc if shown],
               "caption": paragraphs("stitching"), "summary": None, "pairs": None,
               "asymmetry": None if asymmetry.empty else _asymmetry_display(asymmetry, inputs),
               # the asymmetry needs the replicates: say so when the stitching table came without them
               "no_replicates": asymmetry.empty and bool(inputs.stitching) and not inputs.stitching_replicates,
               "table": None if table.empty else {"rows": len(table), "table": _stitching_display(table, inputs)}}

    def evaluated(rows: pd.DataFrame) -> str:
        if rows.empty:
            return "n in the figure title"
        counts = sorted({int(n) for n in rows["n"]})
        return f"n = {' or '.join(f'{n:,}' for n in counts)} {rows['split'].iloc[0]} rows"

    if inputs.stitching_figures:
        figures = []
        for path in inputs.stitching_figures:
            dataset = Path(path).stem
            rows = table[table["dataset"] == dataset] if not table.empty else table
            figures.append(Figure(path, f"{dataset}: stitching penalty against the layer of f (left; {evaluated(rows)}; "
                                        "band = interval; penalty at chance in the panel title) and CKA at matching "
                                        "layers (right; dotted = chance level).",
                                  alt=f"stitching beside CKA, {dataset}", wide=True))
        section["summary"] = {"caption": paragraphs("stitching_summary"), "figures": figures}
    if inputs.stitch_figures:
        pairs = []
        for path in inputs.stitch_figures:
            dataset, (a, b) = Path(path).parent.name, Path(path).stem.split("__", 1)
            rows = table[(table["dataset"] == dataset) & table["model_a"].isin([a, b]) & table["model_b"].isin([a, b])] \
                if not table.empty else table
            pairs.append({"anchor": _anchor("stitch", dataset, a, b), "a": a, "b": b, "dataset": dataset,
                          "figure": Figure(path, f"{a} and {b}, stitched both ways, {dataset}; {evaluated(rows)}; "
                                                 "positive penalty = worse than the top model alone; hatched (or "
                                                 "hollow): the interval contains 0; the penalty at chance in the "
                                                 "figure title.",
                                           alt=f"stitching penalties {a} and {b}", wide=True)})
        section["pairs"] = {"caption": paragraphs("stitch_penalties"), "pairs": pairs}
    return section


# ----------------------------------------------------------------- which measure to believe

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
# the decisions of reprsim.stages.grounding.nulls (the report imports no stage): a mark where a test decides
PASS, FAIL, TOO_FEW, CANNOT_RANK, DESCRIPTIVE, UNDEFINED = (
    "pass", "fail", "too few items", "cannot rank", "descriptive", "undefined")
RANKABLE = (PASS, FAIL)
MARKS = {PASS: "✓", FAIL: "✗"}


BADGES = {"supported": "✓", "contradicted": "✗", "inconclusive": "?", "not applicable": "–"}


def _discordance_sentence(row) -> str:
    """One discordant ordering in words, both differences with their intervals."""
    def side(label: str, difference: float, low: float, high: float) -> str:
        more = "more" if difference > 0 else "less"
        return (f"{_measure_name(label)} rates {row.pair_1} {more} alike than {row.pair_2} (by "
                f"{_with_interval(abs(difference), *sorted((abs(low), abs(high))))})")
    return (side(row.measure_x, row.difference_x, row.x_low, row.x_high) + "; "
            + side(row.measure_y, row.difference_y, row.y_low, row.y_high).replace(f" {row.pair_1} ", " it ", 1)
            .replace(f" than {row.pair_2} ", " ", 1))


def by_measure(inputs: ReportInputs) -> dict | None:
    """The claim × measure matrix of verdict badges (claims more than one measure could test), and the
    strongest discordant orderings in words."""
    if not inputs.findings_by_measure:
        return None
    table = read_tables(inputs.findings_by_measure)
    table = table[table["family"] != ""]  # the pair-table measures (claims about function have none)
    section = {"caption": paragraphs("findings_by_measure"), "empty": table.empty}
    if table.empty:
        return section
    labels = list(dict.fromkeys(inputs.measures)) or list(dict.fromkeys(table["measure"]))
    labels = [label for label in labels if label in set(table["measure"])]
    doubtful = set(table.loc[table["grounding_failed"] != "", "measure"])
    rows = []
    for (claim, representation), group in table.groupby(["claim", "representation"], sort=False):
        verdicts = dict(zip(group["measure"], group["verdict"]))
        if all(v == "not applicable" for v in verdicts.values()):
            continue
        estimates = {r.measure: _with_interval(r.estimate, r.ci_low, r.ci_high) for r in group.itertuples()}
        cells = []
        for label in labels:
            verdict = verdicts.get(label, "not applicable")
            cells.append({"estimate": estimates.get(label, ""), "css": re.sub(r"[^a-z]+", "-", verdict),
                          "badge": BADGES.get(verdict, "–")})
        rows.append({"claim": claim, "representation": representation_text(representation), "cells": cells})
    section.update(measures=[{"name": _measure_name(label), "doubtful": label in doubtful} for label in labels],
                   rows=rows, doubtful=bool(doubtful), measures_page=_link(inputs, "measures", "Which measure?"),
                   discordance=None)
    if inputs.discordance:
        discordant = read_tables(inputs.discordance)
        # the strongest for each of the first few orderings of two model pairs (not one ordering three times)
        shown = (discordant.sort_values("strength", ascending=False, kind="stable")
                 .drop_duplicates(["pair_1", "pair_2"]).head(3)) if len(discordant) else discordant
        section["discordance"] = {"count": len(discordant), "pairs": len(shown),
                                  "sentences": [_discordance_sentence(row) for row in shown.itertuples()],
                                  "agreement": _link(inputs, "measures", "Which measure?", "agreement")}
    return section


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


# ----------------------------------------------------------------- what is universal (stage universality)

THIRDS = ("lower third", "middle third", "upper third")
FACTOR_NAMES = {"training_time": "training time", "data": "training data", "placebo": "seed placebo",
                "dimension": "dimension placebo"}
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
    return [{"verdict": verdict, "colour": colour, "rule": UNIVERSALITY_VERDICT_RULES[verdict]}
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
        levels.append({"factor": FACTOR_NAMES.get(factor, factor), "level": level, "models": str(first.models),
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
        levels.append({"factor": FACTOR_NAMES.get(factor, factor), "level": level,
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
            "factor: level": [f"{FACTOR_NAMES.get(r.factor, r.factor)}: {r.level}" for r in changed.itertuples()],
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


# ----------------------------------------------------------------- pages

Section = Callable[[ReportInputs], "dict | None"]


@dataclass(frozen=True)
class Page:
    """One HTML page of the report: its title, a line saying what is on it (for the main page's
    contents), its sections (templates/<page>.html includes templates/sections/<section>.html for each,
    in this order), and the inputs whose presence means it has something to show."""

    title: str
    blurb: str
    sections: tuple[Section, ...]
    inputs: tuple[str, ...]


PAGES: dict[str, Page] = {
    "index": Page("Summary", "findings, model × model summaries, model distances",
                  (header, contents, findings, by_measure, model_summary, model_distance, provenance), ()),  # always written
    "universality": Page("What is universal?", "the universality study: how much of the similarity seed siblings "
                                               "share survives a change of one factor (width, depth, data, "
                                               "objective, training time), per sense of similarity, depth third "
                                               "and measure, with "
                                               "intervals and verdicts; cross-seed similarity over training",
                         (senses_section, controls_section, universality_statement, universality_section,
                          convergence_section),
                         ("universality", "universality_statement", "universality_figure")),
    "pairs": Page("Similarity per model pair",
                  "every measure between every pair of layers of every model pair (heatmaps), the summary per "
                  "pair as a table with warnings, localization",
                  (pair_details, token_section), ("heatmaps", "localization_figure", "token_tables")),
    "models": Page("Fine-tuned models", "truncation, skipping blocks and CKA between layers, per fine-tuned model",
                   (finetuned,), ("truncation_figures", "skip_figures", "layer_view_figures", "layer_blocks")),
    "alignment": Page("Aligners", "maps between the models' representation spaces (Ren et al. 2023): synthetic "
                                  "recovery, aligners between models, layer injection",
                      (aligners,), ("aligner_tables", "aligner_figures", "synthetic_tables", "injection_tables")),
    "attention": Page("Attention", "attention similarity between layers and heads (Wu et al. 2020): along depth, "
                                   "every layer pair, head by head",
                      (attention_section,), ("attention",)),
    "stitching": Page("Stitching", "model stitching (Bansal et al. 2021; Brown et al. 2023): penalties per model "
                                   "pair and layer, identity stitching beside CKA, the asymmetry between directions",
                      (stitching_section,), ("stitching", "stitch_figures", "stitching_figures")),
    "measures": Page("Which measure?", "each measure's scores on tests of sensitivity and specificity (Ding et al. "
                                       "2021; ReSi): which measures to believe on these models; how far the "
                                       "measures agree, and the model pairs they order oppositely",
                     (which_measure, agreement_section), ("measure_tests", "measure_agreement")),
}


def _navigation(inputs: ReportInputs, current: str) -> list[dict]:
    """The links between the pages (the current page's title without one); none for a one-page report."""
    if len(inputs.pages) < 2:
        return []
    return [{"title": page.title, "link": None if name == current else _link(inputs, name, page.title)}
            for name, page in PAGES.items() if name in inputs.pages]


def has_content(inputs: ReportInputs, page: str) -> bool:
    """Whether `page` has anything to show for these inputs."""
    return page == "index" or any(getattr(inputs, name) for name in PAGES[page].inputs)


def render(inputs: ReportInputs, page: str = "index") -> str:
    """One page of the report: its sections' data, each under its section's name, in templates/<page>.html."""
    return render_page(page, {
        "document_title": inputs.title if page == "index" else f"{inputs.title}: {PAGES[page].title}",
        "report_title": inputs.title, "page_title": PAGES[page].title, "navigation": _navigation(inputs, page),
        **{section.__name__: section(inputs) for section in PAGES[page].sections}})


def build_report(pages: Mapping[str, str | Path], inputs: ReportInputs) -> None:
    """Write the report's pages atomically (each a temporary file beside it, then renamed).

    `pages` maps page names (keys of PAGES) to output paths, all in one folder so that the pages
    link to each other by file name. A page with something
    to show that is not asked for is an error, and so is one asked for with nothing to show: the
    report rule's outputs and the inputs disagree.
    """
    pages = dict(pages)
    unknown = sorted(set(pages) - set(PAGES))
    if unknown or "index" not in pages:
        raise ValueError(f"report pages {sorted(pages)}: the main page 'index' is required and only "
                         f"{sorted(PAGES)} exist")
    folders = {Path(p).parent.resolve() for p in pages.values()}
    if len(folders) != 1:
        raise ValueError(f"report pages must share one folder (they link by file name); "
                         f"got {sorted(map(str, folders))}")
    wanted = {name for name in PAGES if has_content(inputs, name)}
    if wanted != set(pages):
        missing, empty = sorted(wanted - set(pages)), sorted(set(pages) - wanted)
        raise ValueError(f"the report rule's pages and inputs disagree: pages with content but no output "
                         f"{missing}, outputs with nothing to show {empty} (rules/report.smk REPORT_PAGES)")
    inputs = dataclasses.replace(inputs, pages={name: Path(path).name for name, path in pages.items()})
    for name, path in pages.items():
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, render(inputs, name))
