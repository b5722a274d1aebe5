"""The HTML report: one self-contained page (figures embedded) assembled from sections.

Every section is `section(inputs: ReportInputs) -> list[str]`: the HTML fragments of the tidy
tables and figures it is given, and an empty list when it has nothing to show. Sections only
show: whatever a table holds was computed by the stage that wrote it; a section may reshape a
table for display (pivot to a wide table, filter to the task metric), nothing more. Captions
live once, in the `captions/*.rst` files next to this module, shared with `snakemake --report`.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

import pandas as pd

from reprsim.io.datasets import read_meta
from reprsim.io.outputs import write_text
from reprsim.io.provenance import versions
from reprsim.io.store import open_store

Paths = tuple[str, ...]


@dataclass(frozen=True)
class ReportInputs:
    """The report rule's named inputs (rules/common.smk TARGETS), each a tuple of paths, plus its params."""

    title: str = "reprsim report"
    task_metrics: Mapping[str, str] = field(default_factory=dict)
    datasets: Paths = ()
    models: Paths = ()
    stores: Paths = ()
    pair_summary: Paths = ()
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

    @classmethod
    def from_named(cls, inputs: Mapping[str, str | Iterable[str]], title: str,
                   task_metrics: Mapping[str, str] | None = None) -> ReportInputs:
        """From named inputs as the rule passes them: a single path or a list of paths per name."""
        known = {f.name for f in dataclasses.fields(cls)} - {"title", "task_metrics"}
        unknown = sorted(set(inputs) - known)
        if unknown:
            raise ValueError(f"the report has no section for input(s) {unknown}; add one to "
                             f"reprsim.stages.report.html (it knows {sorted(known)})")
        paths = {name: (str(value),) if isinstance(value, (str, os.PathLike)) else tuple(map(str, value))
                 for name, value in inputs.items()}
        return cls(title=title, task_metrics=dict(task_metrics or {}), **paths)


# ----------------------------------------------------------------- captions

CAPTION_PLACEHOLDER = re.compile(r"\{\{\s*(?:snakemake\.wildcards\.)?(\w+)[^}]*\}\}")
NEUTRAL = {"model_a": "model A", "model_b": "model B", "model": "the model", "dataset": "the dataset",
           "representation": "the chosen"}


def _caption_blocks(name: str, wildcards: Mapping[str, str]) -> list[str]:
    """The paragraphs of captions/<name>.rst, Jinja placeholders filled from `wildcards` or with a neutral word."""
    text = (resources.files("reprsim.stages.report") / "captions" / f"{name}.rst").read_text(encoding="utf-8")
    text = re.sub(r"\{%.*?%\}", "", text)
    text = CAPTION_PLACEHOLDER.sub(
        lambda m: wildcards.get(m.group(1), NEUTRAL.get(m.group(1), m.group(1).replace("_", " "))), text)
    return [" ".join(block.split()) for block in re.split(r"\n\s*\n", text) if block.strip()]


def caption(name: str, **wildcards: str) -> str:
    """The text of captions/<name>.rst as one line (see :func:`_caption_blocks`)."""
    return " ".join(_caption_blocks(name, wildcards))


def _paragraphs(name: str, **wildcards: str) -> list[str]:
    """A caption file as HTML paragraphs (a blank line in the .rst starts a new one)."""
    return [f"<p>{html.escape(block)}</p>" for block in _caption_blocks(name, wildcards)]


# ----------------------------------------------------------------- HTML helpers


def _image(path: str | Path, label: str, wide: bool = False) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return (
        f'<figure{" class=wide" if wide else ""}><img src="data:image/png;base64,{data}" alt="{html.escape(label)}">'
        f"<figcaption>{html.escape(label)}</figcaption></figure>"
    )


def _table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, classes="data", na_rep="–", float_format=lambda v: f"{v:.4g}")


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "–"


def _read_all(paths: Iterable[str]) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)


def _pair_label(path: str) -> str:
    """'A: a · B: b — pooling, dataset' from a per-pair path .../{representation}/{dataset}/{a}__{b}.png."""
    path = Path(path)
    a, _, b = path.stem.partition("__")
    return f"A: {a} · B: {b} — {path.parent.parent.name} pooling, {path.parent.name}"


def _task_metric_rows(frame: pd.DataFrame, model_column: str, task_metrics: Mapping[str, str]) -> pd.DataFrame:
    """The rows scoring each fine-tuned model (in `model_column`) by its task's metric (accuracy by default)."""
    return frame[frame["metric"] == frame[model_column].map(lambda m: task_metrics.get(m, "accuracy"))]


def _by_model(paths: Iterable[str]) -> dict[str, str]:
    """Per-model outputs (.../{model}/<file>) by model name."""
    return {Path(p).parent.name: p for p in paths}


# ----------------------------------------------------------------- provenance tables


def models_table(model_dirs: Iterable[str]) -> pd.DataFrame:
    rows = []
    for directory in model_dirs:
        meta = read_meta(directory)
        rows.append({
            "model": meta["name"], "source": meta["source"], "parent": meta.get("parent") or "–",
            "tokenizer from": meta.get("tokenizer_from") or "–",
            "seed": meta.get("seed"), "architecture": meta["architecture"], "layers": meta["n_layers"],
            "width": meta["hidden_size"], "parameters": f"{meta['n_parameters'] / 1e6:.1f} M",
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
            "labels": ", ".join(map(str, meta["label_names"])),
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


# ----------------------------------------------------------------- sections


def header(inputs: ReportInputs) -> list[str]:
    return [
        f"<h1>{html.escape(inputs.title)}</h1>",
        f"<p class='meta'>Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} by reprsim; "
        f"versions: {html.escape(json.dumps(versions()))}</p>",
        *_paragraphs("workflow"),
    ]


def datasets(inputs: ReportInputs) -> list[str]:
    return ["<h2>Datasets</h2>", _table(datasets_table(inputs.datasets))] if inputs.datasets else []


def models(inputs: ReportInputs) -> list[str]:
    return ["<h2>Models</h2>", _table(models_table(inputs.models))] if inputs.models else []


def stores(inputs: ReportInputs) -> list[str]:
    return ["<h2>Activation stores</h2>", _table(stores_table(inputs.stores))] if inputs.stores else []


def similarity(inputs: ReportInputs) -> list[str]:
    """Pair heatmaps, then the summary per model pair (the compare stage's pair_summary table)."""
    if not inputs.heatmaps and not inputs.pair_summary:
        return []
    parts = ["<h2>Layer-by-layer similarity</h2>"]
    if inputs.heatmaps:
        parts += [*_paragraphs("heatmap"), *[_image(p, _pair_label(p), wide=True) for p in inputs.heatmaps]]
    if inputs.pair_summary:
        summary = _read_all(inputs.pair_summary)
        if not summary.empty:
            parts += ["<h3>Summary per model pair (layers with the same index)</h3>", *_paragraphs("pair_summary"),
                      _table(summary)]
    return parts


def model_distance(inputs: ReportInputs) -> list[str]:
    """The model-distance figure, and its table as one model × model matrix per measure and depth."""
    if not inputs.model_distance_figure and not inputs.model_distances:
        return []
    parts = ["<h2>Model distance</h2>"]
    if inputs.model_distance_figure:  # the figure's caption says what the matrices below hold
        parts += [_image(p, caption("model_distance"), wide=True) for p in inputs.model_distance_figure]
    else:
        parts += _paragraphs("model_distance")
    if inputs.model_distances:
        distances = _read_all(inputs.model_distances)
        for (measure, depth), rows in distances.groupby(["measure", "depth"], sort=True):
            matrix = rows.pivot(index="model_a", columns="model_b", values="distance")
            matrix.columns.name = None
            parts += [f"<h3>Models with {int(depth)} blocks ({html.escape(str(measure))})</h3>",
                      _table(matrix.rename_axis("model").reset_index())]
    return parts


def localization(inputs: ReportInputs) -> list[str]:
    if not inputs.localization_figure:
        return []
    return ["<h2>Localization</h2>",
            *[_image(p, caption("localization"), wide=True) for p in inputs.localization_figure]]


def aligners(inputs: ReportInputs) -> list[str]:
    """Ren et al. (2023): synthetic recovery (Table 3), aligners between models (Table 4 and their
    figures), layer injection (Table 5)."""
    if not (inputs.synthetic_tables or inputs.aligner_tables or inputs.aligner_figures or inputs.injection_tables):
        return []
    parts = ["<h2>Aligners</h2>"]
    if inputs.synthetic_tables:
        synthetic = _read_all(inputs.synthetic_tables)
        synthetic = synthetic[synthetic["role"] == "score"] if "role" in synthetic else synthetic
        wide = synthetic.pivot_table(index=["dataset", "model", "layer", "map_seed"], columns="aligner",
                                     values="rel_error", sort=False)
        wide.columns.name = None
        parts += ["<h3>Synthetic recovery (Table 3)</h3>", *_paragraphs("synthetic"), _table(wide.reset_index())]
    if inputs.aligner_tables or inputs.aligner_figures:
        parts.append("<h3>Aligners between models (Table 4)</h3>")
    if inputs.aligner_tables:
        scored = _read_all(inputs.aligner_tables)
        scored = scored[scored["role"] == "score"]
        wide = scored.pivot_table(index=["dataset", "model_a", "model_b", "direction", "split"], columns="aligner",
                                  values="rel_error", aggfunc="mean", sort=False)
        wide.columns.name = None
        parts += [*_paragraphs("aligner_summary"), _table(wide.reset_index())]
    if inputs.aligner_figures:
        parts += [*_paragraphs("aligners"), *[_image(p, _pair_label(p), wide=True) for p in inputs.aligner_figures]]
    if inputs.injection_tables:
        injected = _read_all(inputs.injection_tables)
        wide = _task_metric_rows(injected, "target", inputs.task_metrics).pivot_table(index=["dataset", "source", "target", "metric"], columns="method",
                                          values="value", sort=False)
        wide.columns.name = None
        parts += ["<h3>Layer injection (Table 5)</h3>", *_paragraphs("injection"), _table(wide.reset_index())]
    return parts


def finetuned(inputs: ReportInputs) -> list[str]:
    """Per fine-tuned model its truncation curve next to its layer views; block structure; truncation scores."""
    if not (inputs.truncation_figures or inputs.layer_view_figures or inputs.layer_blocks
            or inputs.truncation_tables):
        return []
    parts = ["<h2>Fine-tuned models: truncation and layer similarity</h2>"]
    truncation, views = _by_model(inputs.truncation_figures), _by_model(inputs.layer_view_figures)
    parts += [*(_paragraphs("truncation") if truncation else []), *(_paragraphs("layer_views") if views else [])]
    for model in sorted(set(truncation) | set(views)):
        figures = [_image(truncation[model], f"{model}: truncation")] if model in truncation else []
        if model in views:
            figures.append(_image(views[model], f"{model}: CKA between layers", wide=True))
        parts += [f"<h3>{html.escape(model)}</h3>", "<div class='grid'>", *figures, "</div>"]
    if inputs.layer_blocks:
        parts += ["<h3>Block structure</h3>", *_paragraphs("layer_blocks"), _table(_read_all(inputs.layer_blocks))]
    if inputs.truncation_tables:
        scores = _read_all(inputs.truncation_tables)
        scores = _task_metric_rows(scores, "model", inputs.task_metrics)
        wide = scores.pivot_table(index=["model", "metric", "mode"], columns="layer", values="value")
        wide.columns = ["majority" if layer < 0 else f"layer {layer}" for layer in wide.columns]
        parts += ["<h3>Truncation scores</h3>", _table(wide.reset_index())]
    return parts


def skipping(inputs: ReportInputs) -> list[str]:
    if not inputs.skip_figures:
        return []
    skipped = _by_model(inputs.skip_figures)
    return ["<h2>Fine-tuned models: skipping blocks</h2>", *_paragraphs("skip"), "<div class='grid'>",
            *[_image(path, f"{model}: skipping blocks") for model, path in sorted(skipped.items())], "</div>"]


Section = Callable[[ReportInputs], list[str]]
SECTIONS: list[Section] = [header, datasets, models, stores, similarity, model_distance, localization, aligners,
                           finetuned, skipping]

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }
table.data { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0 1.5rem; }
table.data th, table.data td { padding: 0.25rem 0.6rem; border-bottom: 1px solid #ddd; text-align: right; }
.grid { display: flex; flex-wrap: wrap; gap: 1rem; }
figure { margin: 0; } figure img { max-width: 560px; } figure.wide img { max-width: 100%; } figcaption { font-size: 0.8rem; color: #555; }
.meta { font-size: 0.8rem; color: #666; }
"""


def render(inputs: ReportInputs, sections: Iterable[Section] = SECTIONS) -> str:
    """The report page: every section's fragments, in order, in one HTML document."""
    body = "".join(part for section in sections for part in section(inputs))
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(inputs.title)}'
            f"</title>\n<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n")


def build_report(out_path: str | Path, inputs: ReportInputs) -> None:
    """Write the report page to `out_path` atomically (a temporary file beside it, then renamed)."""
    out_path = Path(out_path)
    page = render(inputs)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_text(out_path, page)
