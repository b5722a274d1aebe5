"""What the report's pages share: their captions (captions/*.rst), the `Figure`s and `Link`s their sections hand the
templates, and how a page writes numbers, intervals, measures, model pairs and anchors."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from reprsim.io.tables import read_tables
from reprsim.measure_registry import DISPLAY_NAMES
from reprsim.stages.report.inputs import ReportInputs
from reprsim.stages.report.labels import representation_text


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
