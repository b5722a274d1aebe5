"""The main page (index.html): what was compared, the findings (also under every measure), the model × model
summary, the model distances, and the provenance tables. It quotes the universality page's statement and the
measures page's discordant orderings through their modules."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.io.datasets import read_meta
from reprsim.io.provenance import versions
from reprsim.io.store import open_store
from reprsim.io.tables import read_tables
from reprsim.stages.report.common import (Figure, _link, _measure_name, _number, _rows_compared, _with_interval,
                                          paragraphs)
from reprsim.stages.report.inputs import ReportInputs
from reprsim.stages.report.labels import representation_text
from reprsim.stages.report.pages.measures import _discordance_sentence
from reprsim.stages.report.pages.universality import _statement


def header(inputs: ReportInputs) -> dict:
    """The title and, in a few lines, what was compared: models, dataset and rows, measures."""
    from reprsim.stages.report.html import PAGES  # the page table, which imports this module

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
    from reprsim.stages.report.html import PAGES  # the page table, which imports this module

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


BADGES = {"supported": "✓", "contradicted": "✗", "inconclusive": "?", "not applicable": "–"}


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


def _chance_levels(summary: pd.DataFrame, measures: Iterable[str]) -> str:
    """'linear CKA 0.035, PWCCA 0.97, …': each measure's chance level (null mean; median over pairs)."""
    if "null_mean" not in summary:
        return ""
    medians = summary.groupby("measure")["null_mean"].median()
    order = [m for m in measures if m in medians.index] + [m for m in medians.index if m not in set(measures)]
    return ", ".join(f"{_measure_name(m)} {medians[m]:.2f}" for m in order if np.isfinite(medians[m]))


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


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "–"


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
