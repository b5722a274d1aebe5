"""The HTML report: one self-contained page (figures embedded) with provenance tables."""

from __future__ import annotations

import base64
import html
import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from reprsim.data import read_meta
from reprsim.layer_views import block_summary
from reprsim.store import open_store
from reprsim.provenance import versions


def _image(path: str | Path, caption: str, wide: bool = False) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return (
        f'<figure{" class=wide" if wide else ""}><img src="data:image/png;base64,{data}" alt="{html.escape(caption)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _figure_grid(heading: str, text: str, figures: list[str]) -> list[str]:
    """A report section: heading, one paragraph, one figure per model (captioned by its directory)."""
    return [f"<h2>{html.escape(heading)}</h2>", f"<p>{html.escape(text)}</p>", "<div class='grid'>",
            *[_image(p, Path(p).parent.name) for p in figures], "</div>"]


def _table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, classes="data", na_rep="–", float_format=lambda v: f"{v:.4g}")


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "–"


def models_table(model_dirs: list[str]) -> pd.DataFrame:
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


def datasets_table(dataset_dirs: list[str]) -> pd.DataFrame:
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


def stores_table(store_paths: list[str]) -> pd.DataFrame:
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


def _read_all(paths: list[str]) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)


def _aligner_sections(align_tables: list[str], align_figures: list[str], synthetic_tables: list[str],
                      injection_tables: list[str]) -> list[str]:
    """Ren et al. (2023): synthetic recovery (Table 3), real alignment (Table 4, Figure 3), injection (Table 5)."""
    parts = []
    if synthetic_tables:
        synthetic = _read_all(synthetic_tables)
        wide = synthetic.pivot_table(index=["model", "layer", "map_seed"], columns="aligner", values="rel_error")
        parts += [
            "<h2>Aligners: synthetic recovery (Ren et al. 2023, Table 3)</h2>",
            "<p>X is a real layer (standardised), Y = f(X) for a randomly initialised invertible network of affine "
            "coupling layers the aligners never see; each aligner is fit on train rows, selected on validation rows, "
            "and its relative error ||Y − g(X)||_F / ||Y||_F on test rows is shown (lower is better).</p>",
            _table(wide.reset_index()),
        ]
    if align_tables:
        aligned = _read_all(align_tables)
        scored = aligned[aligned["role"] == "score"]
        summary = scored.groupby(["dataset", "model_a", "model_b", "direction", "aligner"])["rel_error"].agg(
            ["mean", "min", "max"]).reset_index()
        wide = summary.pivot_table(index=["dataset", "model_a", "model_b", "direction"], columns="aligner",
                                   values="mean")
        parts += [
            "<h2>Aligners between models (Ren et al. 2023, Table 4)</h2>",
            "<p>Every aligner maps each layer of one model onto the layer at the same relative depth of the other "
            "(a->b: model_a's layer is X), fit on train rows, selected on validation rows; the table gives the mean "
            "test relative error over layers. INN: stacked affine coupling layers (a bijection); mlp: the "
            "non-bijective sanity bound.</p>",
            _table(wide.reset_index()),
            *[_image(path, Path(path).stem.replace("__", " vs "), wide=True) for path in align_figures],
        ]
    if injection_tables:
        injected = _read_all(injection_tables)
        accuracy = injected[injected["metric"] == "accuracy"]
        wide = accuracy.pivot_table(index=["dataset", "source", "target"], columns="method", values="value",
                                    sort=False)
        parts += [
            "<h2>Layer injection (Ren et al. 2023, Table 5)</h2>",
            "<p>The source model's last-layer representation, mapped into the target model's space by each aligner, "
            "feeds the target's own classifier head; test accuracy. 'target model': the head on the target's own "
            "representation; 'random embedding': a randomly initialised head on the base model's representation; "
            "'random label': uniformly random predictions.</p>",
            _table(wide.reset_index()),
        ]
    return parts


def _by_model(paths: list[str]) -> dict[str, str]:
    return {Path(p).parent.name: p for p in paths}


def _finetune_sections(truncation_tables: list[str], truncation_figures: list[str], layer_views: list[str],
                       layer_view_figures: list[str], task_metrics: dict[str, str]) -> list[str]:
    """Per fine-tuned model: its truncation curve next to its layer-similarity views and block structure."""
    if not truncation_figures and not layer_view_figures:
        return []
    parts = [
        "<h2>Fine-tuned models: truncation and layer similarity</h2>",
        "<p>Left, truncation (Phang et al. 2021, §4): layer l's representation feeds the fine-tuned head as it is "
        "(UNTUNED) or a fresh head trained on the frozen fine-tuned (TUNED) or base (TUNEDORIG) encoder; the "
        "star is the full model, the dotted line the majority class. Right, linear CKA of the first-token "
        "representation between layers (§3): ORIG is the model fine-tuning started from, FT[a]–FT[b] compares "
        "seeds. The dashed lines mark the two-block split that maximises mean within-block minus between-block "
        "CKA (diagonal left out).</p>",
    ]
    truncation, views = _by_model(truncation_figures), _by_model(layer_view_figures)
    for model in sorted(set(truncation) | set(views)):
        figures = [_image(truncation[model], f"{model}: truncation")] if model in truncation else []
        if model in views:
            figures.append(_image(views[model], f"{model}: CKA between layers", wide=True))
        parts += [f"<h3>{html.escape(model)}</h3>", "<div class='grid'>", *figures, "</div>"]
    if layer_views:
        blocks = block_summary(pd.concat([pd.read_parquet(p) for p in layer_views], ignore_index=True))
        parts += ["<h3>Block structure</h3>",
                  "<p>Split: the first layer of the upper block; contrast = within − between.</p>", _table(blocks)]
    if truncation_tables:
        full = pd.concat([pd.read_parquet(p) for p in truncation_tables], ignore_index=True)
        full = full[full["metric"] == full["model"].map(lambda m: task_metrics.get(m, "accuracy"))]
        wide = full.pivot_table(index=["model", "metric", "mode"], columns="layer", values="value")
        wide.columns = ["majority" if layer < 0 else f"layer {layer}" for layer in wide.columns]
        parts += ["<h3>Truncation scores</h3>", _table(wide.reset_index())]
    return parts


def build_report(
    out_path: str | Path,
    *,
    title: str,
    dataset_dirs: list[str],
    model_dirs: list[str],
    store_paths: list[str],
    pairs_table: str | Path,
    heatmaps: list[str],
    alignment_figure: str | None,
    summary_figures: list[str],
    truncation_tables: list[str],
    truncation_figures: list[str],
    skip_figures: list[str],
    align_tables: list[str] = (),
    align_figures: list[str] = (),
    synthetic_tables: list[str] = (),
    injection_tables: list[str] = (),
    layer_views: list[str] = (),
    layer_view_figures: list[str] = (),
    task_metrics: dict[str, str] | None = None,
) -> None:
    """Write the report page to `out_path`."""
    pairs = pd.read_parquet(pairs_table)
    parts = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='meta'>Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} by reprsim; "
        f"versions: {html.escape(json.dumps(versions()))}</p>",
        "<h2>Datasets</h2>", _table(datasets_table(dataset_dirs)),
        "<h2>Models</h2>", _table(models_table(model_dirs)),
        "<h2>Activation stores</h2>", _table(stores_table(store_paths)),
        "<h2>Layer-by-layer similarity</h2>",
        "<p>Every configured measure between every layer of two models, computed on held-out rows; asymmetric "
        "measures in both directions. Similarities share the colour scale 0–1, the Procrustes distance 0–π/2; "
        "layer 0 is the embedding output.</p>",
        *[_image(path, Path(path).stem.replace("__", " vs "), wide=True) for path in heatmaps],
    ]
    measured = pairs[~pairs["measure"].str.startswith("linear_map_") & (pairs["model_a"] != pairs["model_b"])]
    if not measured.empty:
        same_layer = measured[measured["layer_a"] == measured["layer_b"]]
        summary = same_layer.groupby(["model_a", "model_b", "measure", "direction"]).agg(
            mean_over_matching_layers=("value", "mean"), null_mean=("null_mean", "mean"),
            largest_null_p=("null_p", "max")).reset_index()
        parts += [
            "<h3>Summary per model pair (layers with the same index)</h3>",
            "<p>null_mean: the measure with the rows of one model permuted (no correspondence); "
            "largest_null_p: the weakest permutation p-value among those layers (– where no null was asked for).</p>",
            _table(summary),
        ]
    for path in summary_figures:
        name = Path(path).stem
        caption = {"model_distance": "Model distance sqrt(Σ_l arccos(CKA_l)²) between models of equal depth "
                                     "(Brown et al. 2023), with an average-linkage dendrogram",
                   "localization": "Localization score per layer (Wu et al. 2020): mean neuronsim minus mean "
                                   "SVCCA to all other layers"}.get(name, name)
        parts += [f"<h3>{html.escape(caption.split(' (')[0])}</h3>", _image(path, caption, wide=True)]
    if alignment_figure:
        errors = pairs[(pairs["measure"] == "linear_map_rel_error") & (pairs["model_a"] != pairs["model_b"])]
        parts += [
            "<h2>Alignment: linear maps between representation spaces</h2>",
            "<p>A least-squares affine map from each layer of one model to the layer at the same relative depth "
            "of the other, fit on train rows and scored on test rows as ||Y − g(X)||_F / ||Y||_F.</p>",
            _image(alignment_figure, "relative error of the linear map per layer", wide=True),
        ]
        if not errors.empty:
            summary = errors.groupby(["model_a", "model_b", "direction"])["value"].agg(["mean", "min", "max"])
            parts.append(_table(summary.reset_index()))
    parts += _aligner_sections(align_tables, align_figures, synthetic_tables, injection_tables)
    parts += _finetune_sections(truncation_tables, truncation_figures, layer_views, layer_view_figures,
                                task_metrics or {})
    if skip_figures:
        parts += _figure_grid(
            "Fine-tuned models: skipping blocks",
            "Phang et al. (2021, §4.1): the task score when each contiguous span of blocks is replaced by the identity, "
            "with no further training.",
            skip_figures,
        )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }}
table.data {{ border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0 1.5rem; }}
table.data th, table.data td {{ padding: 0.25rem 0.6rem; border-bottom: 1px solid #ddd; text-align: right; }}
.grid {{ display: flex; flex-wrap: wrap; gap: 1rem; }}
figure {{ margin: 0; }} figure img {{ max-width: 560px; }} figure.wide img {{ max-width: 100%; }} figcaption {{ font-size: 0.8rem; color: #555; }}
.meta {{ font-size: 0.8rem; color: #666; }}
</style></head><body>
{"".join(parts)}
</body></html>
"""
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(page)
