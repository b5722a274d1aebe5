"""The report's similarity figures from Python: :func:`plot_layers` (one model pair's layer × layer heatmap of one
measure) and :func:`plot_models` (the model × model summary of one measure), drawn from a pair table of
reprsim.compare or reprsim.compare_many (or the workflow's pairs.parquet, one dataset and representation).

Both draw through reprsim.plotting.drawing, the code that draws the workflow report's heatmaps and model summary
(reprsim.stages.report.figures), so a figure made here marks chance and intervals exactly as the report does:
each value in its cell, cells whose interval does not exclude the chance level hatched, the chance level (the
permutation null mean) in the panel's title, undefined cells "n/a". Each returns the matplotlib Figure (created
with pyplot, never shown: save it with ``fig.savefig``, close it with ``plt.close(fig)``); any backend works,
Agg included.
"""

from __future__ import annotations

import difflib
import json
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reprsim.inference.resampling import beyond_chance, interval
from reprsim.plotting import drawing
from reprsim.tables.layers import layer_pairs, model_depths

# what both plots read of a pair table; null_mean (chance), beyond_chance or null_p (the marks), ci_low/ci_high,
# warning, n and meta are read when present
COLUMNS = ("model_a", "model_b", "layer_a", "layer_b", "measure", "kind", "direction", "value")
REPLICATE_COLUMNS = ("model_a", "model_b", "layer_a", "layer_b", "measure", "direction", "replicate", "value", "n",
                     "m")
CELL = ["model_a", "model_b", "layer_a", "layer_b"]
GROUP = ["model_a", "model_b", "measure", "direction"]
# a pair table's columns that name where its rows come from: None for arrays, one value each in a plot
BLOCK = ("dataset", "representation", "split")


def plot_layers(table: pd.DataFrame, measure: str | None = None, *, models: tuple[str, str] | None = None,
                direction: str | None = None, ax=None):
    """The layer × layer heatmap of one model pair and one measure, as the workflow report draws it.

    ``table`` is a pair table (reprsim.compare or compare_many; columns model_a, model_b, layer_a, layer_b,
    measure, kind, direction, value, and null_mean, beyond_chance, warning, n when present). ``measure`` is a
    label of its measure column, ``models`` a pair (model_a, model_b) of it (given the other way round, the
    heatmap is transposed: rows are the first model's layers), ``direction`` one of symmetric, a->b and b->a; each
    may be left None when the table (or the chosen pair and measure) holds only one, and a ValueError lists the
    choices otherwise.

    Rows of the image are model_a's layers (bottom = layer 0), columns model_b's; each cell shows its value (n/a
    when undefined); cells whose interval does not exclude chance (beyond_chance False; a table without intervals:
    permutation p > 0.05) are hatched; the title gives the measure, the direction of an asymmetric measure, whether
    it is a similarity or a distance and the chance level (the permutation null mean, or its range over the cells).
    A figure of its own (``ax`` None) carries a caption saying so, with n. Returns the Figure (``ax``'s when
    given).
    """
    table = _checked(table, "plot_layers")
    pairs = list(dict.fromkeys(zip(table["model_a"], table["model_b"])))
    if models is None:
        if len(pairs) > 1:
            raise ValueError(f"plot_layers: the table holds {len(pairs)} model pairs ({_listed(pairs)}); choose one "
                             "with models=(model_a, model_b)")
        model_a, model_b = pairs[0]
    else:
        model_a, model_b = _pair_argument(models, pairs)
    swapped = (model_a, model_b) not in pairs
    rows = table[(table["model_a"] == (model_b if swapped else model_a))
                 & (table["model_b"] == (model_a if swapped else model_b))]
    if swapped:
        rows = _swapped(rows)
    label = _choose("plot_layers", "measure", measure, list(dict.fromkeys(rows["measure"])), f" of {model_a} vs "
                    f"{model_b}")
    rows = rows[rows["measure"] == label]
    way = _choose("plot_layers", "direction", direction, list(dict.fromkeys(rows["direction"])),
                  f" of {label!r} for {model_a} vs {model_b}")
    rows = rows[rows["direction"] == way]
    repeated = rows.duplicated(["layer_a", "layer_b"])
    if repeated.any():
        raise ValueError(f"plot_layers: layer pair {tuple(rows.loc[repeated, ['layer_a', 'layer_b']].iloc[0])} of "
                         f"{label!r} appears {int(repeated.sum()) + 1} or more times; select one row per layer pair "
                         "(a table concatenated from several comparisons of the same models?)")
    own = ax is None
    if own:
        width = max(4.0, 1.6 + 0.32 * rows["layer_b"].nunique())
        height = max(3.4, 1.3 + 0.32 * rows["layer_a"].nunique()) + 0.6
        fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    title = drawing.heatmap_title(label, way, model_a, model_b, rows["kind"].iloc[0])
    drawing.heatmap_panel(ax, rows, title, model_a, model_b, _registry_name(rows, label))
    if own:
        caption = (f"{model_a} vs {model_b}, every layer pair{_where(rows)}, n = {_n(rows)} rows; chance = the "
                   f"permutation null mean; {drawing.CHANCE_NOTE}")
        _caption(fig, caption)
    return ax.figure


def plot_models(table: pd.DataFrame, measure: str | None = None, *, models: list[str] | None = None,
                replicates: pd.DataFrame | None = None, confidence: float | None = None, ax=None):
    """The model × model summary of one measure, as the workflow report draws it: each cell is the mean over
    matching layers (the layers at the same relative depth, reprsim.tables.layers; all layers of two models of the same
    depth pair up diagonally) between two distinct models, the report's pair summary (:func:`model_summary`).

    ``table`` is a pair table of several models (reprsim.compare_many, or compare tables concatenated: every pair
    of models once), ``measure`` a label of its measure column (None when it holds one), ``models`` the models to
    show in that order (None: all, in the order they first appear). With ``replicates`` (the half-sample
    replicates' long table, ``compare(..., replicates=True)``, concatenated like the table) each cell also shows its
    ``confidence`` interval (None: the table's own, from its meta, else 0.95), and cells whose interval does not
    exclude the mean null are hatched; without, a cell is hatched when any of its matching layers has a permutation
    p above 0.05 (the report's rule for tables without intervals). An asymmetric measure's cell (row x, column y)
    is the direction in which x's layer is X. The diagonal (a model with itself) is blank; the title gives the
    measure, its kind and the chance level (the mean null mean). A figure of its own (``ax`` None) carries a
    caption saying what a cell is. Returns the Figure (``ax``'s when given).
    """
    table = _checked(table, "plot_models")
    label = _choose("plot_models", "measure", measure, list(dict.fromkeys(table["measure"])), "")
    appearing = list(dict.fromkeys(m for pair in zip(table["model_a"], table["model_b"]) for m in pair))
    if models is None:
        models = appearing
    else:
        if isinstance(models, str):
            raise ValueError(f"plot_models: models must be a list of model names; got the string {models!r}")
        models = list(models)
        for name in models:
            if name not in appearing:
                raise ValueError(f"plot_models: unknown model {name!r}{_hint(name, appearing)}; the table holds "
                                 f"{', '.join(map(repr, appearing))}")
        if len(set(models)) != len(models):
            raise ValueError(f"plot_models: models lists a model twice: {models!r}")
    if len(models) < 2:
        raise ValueError(f"plot_models: a model × model summary needs two models or more; got {models!r}")
    kept = table[table["model_a"].isin(models) & table["model_b"].isin(models)]
    if replicates is not None:
        replicates = replicates[replicates["model_a"].isin(models) & replicates["model_b"].isin(models)] \
            if {"model_a", "model_b"} <= set(replicates.columns) else replicates
    if confidence is None:
        confidence = _table_confidence(kept)
    summary = model_summary(kept, replicates, confidence)
    summary = summary[summary["measure"] == label]
    if summary.empty:
        raise ValueError(f"plot_models: no rows of {label!r} compare two distinct models of {models!r}")
    own = ax is None
    if own:
        side = 1.1 + 0.62 * len(models)
        fig, ax = plt.subplots(figsize=(max(5.2, side * 1.12 + 0.8), max(4.0, side) + 0.9), layout="constrained")
    name = _registry_name(kept[kept["measure"] == label], label)
    family = drawing.FAMILIES.get(name, "other")
    drawing.summary_panel(ax, ax.figure, summary, models, f"{family} · {drawing.MEASURE_LABELS.get(label, label)}",
                          measure=name)
    if own:
        if replicates is not None:
            cell = f"cell: mean, below it its {confidence:.0%} interval (low–high); {drawing.CHANCE_NOTE}"
        else:
            cell = ("cell: mean (pass replicates= for its interval); hatched: a matching layer's permutation "
                    "p > 0.05")
        caption = (f"Mean over matching layers (same relative depth) between distinct models{_where(kept)}, "
                   f"n = {_n(kept)} rows; chance = the mean permutation null mean\n{cell}; diagonal (a model with "
                   "itself) left blank")
        _caption(fig, caption)
    return ax.figure


def model_summary(table: pd.DataFrame, replicates: pd.DataFrame | None = None,
                  confidence: float = 0.95) -> pd.DataFrame:
    """The pair summary :func:`plot_models` draws, the workflow's (reprsim.stages.compare.summaries.pair_summary)
    on one dataset and representation: per pair of distinct models, measure and direction, the mean over matching
    layers (mean_over_matching_layers; undefined layers left out), n_layers, the mean of the layers' null means
    (null_mean), the largest permutation p (largest_null_p), n and the first warning; with ``replicates``
    (columns model_a, model_b, layer_a, layer_b, measure, direction, replicate, value, n, m) its half-sample
    interval (ci_low, ci_high: the mean taken in every replicate) and beyond_chance (the interval excludes
    null_mean on the side of agreement). Without replicates, ``null_p`` repeats largest_null_p: the permutation p
    the drawing's marks fall back to."""
    table = _checked(table, "model_summary")
    distinct = table[table["model_a"] != table["model_b"]]
    depths = model_depths(table)
    matched = pd.DataFrame([(a, b, la, lb) for a, b in distinct[["model_a", "model_b"]].drop_duplicates()
                            .itertuples(index=False) for la, lb in layer_pairs(depths[a], depths[b], "matching")],
                           columns=CELL)
    matched = distinct.merge(matched, on=CELL)
    optional = {"null_mean": ("null_mean", "mean"), "largest_null_p": ("null_p", "max"), "n": ("n", "first"),
                "warning": ("warning", lambda w: next((x for x in w if isinstance(x, str) and x), ""))}
    summary = matched.groupby(GROUP, sort=False).agg(
        kind=("kind", "first"), n_layers=("value", "size"), mean_over_matching_layers=("value", "mean"),
        **{name: spec for name, spec in optional.items() if spec[0] in matched}).reset_index()
    if replicates is None:
        if "largest_null_p" in summary:
            summary["null_p"] = summary["largest_null_p"]
        return summary
    missing = [column for column in REPLICATE_COLUMNS if column not in replicates.columns]
    if missing:
        raise ValueError(f"model_summary: the replicates table has no column {', '.join(map(repr, missing))}; pass "
                         "the long table of compare(..., replicates=True)")
    per_replicate = (replicates.merge(matched[[*GROUP, "layer_a", "layer_b"]], on=[*GROUP, "layer_a", "layer_b"])
                     .groupby([*GROUP, "replicate"]).agg(value=("value", "mean"), n=("n", "first"), m=("m", "first"))
                     .reset_index())
    estimates = summary.set_index(GROUP)["mean_over_matching_layers"]
    bounds = [(*key, *interval(estimates.loc[key], rows["value"].to_numpy(), int(rows["n"].iloc[0]),
                               int(rows["m"].iloc[0]), confidence))
              for key, rows in per_replicate.groupby(GROUP)]
    summary = summary.merge(pd.DataFrame(bounds, columns=[*GROUP, "ci_low", "ci_high"]), on=GROUP, how="left")
    null_mean = summary["null_mean"] if "null_mean" in summary else np.nan
    summary["beyond_chance"] = beyond_chance(summary["kind"], summary["ci_low"], summary["ci_high"], null_mean)
    return summary


def _checked(table, function: str) -> pd.DataFrame:
    """The table, once it is a non-empty pair table of one dataset, representation and split."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"{function}: table must be a pandas DataFrame (a pair table of reprsim.compare); got "
                        f"{type(table).__name__}")
    missing = [column for column in COLUMNS if column not in table.columns]
    if missing:
        raise ValueError(f"{function}: the table has no column {', '.join(map(repr, missing))}; it needs a pair "
                         f"table's columns {', '.join(COLUMNS)} (reprsim.compare returns one)")
    if table.empty:
        raise ValueError(f"{function}: the table has no rows")
    for column in BLOCK:
        if column in table.columns:
            values = list(dict.fromkeys(table[column].dropna()))
            if len(values) > 1:
                raise ValueError(f"{function}: the table holds {len(values)} values of {column!r} "
                                 f"({', '.join(map(repr, values))}); select one, e.g. table[table[{column!r}] == "
                                 f"{values[0]!r}]")
    return table


def _choose(function: str, what: str, value, available: list, where: str):
    """`value` when the table holds it; the only one when `value` is None; else a ValueError listing the choices."""
    listed = ", ".join(map(repr, available))
    if value is None:
        if len(available) == 1:
            return available[0]
        raise ValueError(f"{function}: the table holds {len(available)} {what}s{where} ({listed}); choose one with "
                         f"{what}=")
    if value not in available:
        raise ValueError(f"{function}: unknown {what} {value!r}{_hint(value, available)}; the table holds {listed}"
                         f"{where}")
    return value


def _pair_argument(models, pairs: list[tuple[str, str]]) -> tuple[str, str]:
    if isinstance(models, str) or len(tuple(models)) != 2:
        raise ValueError(f"plot_layers: models must be a pair (model_a, model_b); got {models!r}")
    model_a, model_b = tuple(models)
    known = list(dict.fromkeys(m for pair in pairs for m in pair))
    for name in (model_a, model_b):
        if name not in known:
            raise ValueError(f"plot_layers: unknown model {name!r}{_hint(name, known)}; the table holds "
                             f"{', '.join(map(repr, known))}")
    if (model_a, model_b) not in pairs and (model_b, model_a) not in pairs:
        raise ValueError(f"plot_layers: no rows compare {model_a!r} with {model_b!r}; the table's pairs: "
                         f"{_listed(pairs)}")
    return model_a, model_b


def _swapped(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows as model_b's comparison with model_a: sides exchanged, an asymmetric direction with them."""
    return rows.rename(columns={"model_a": "model_b", "model_b": "model_a", "layer_a": "layer_b",
                                "layer_b": "layer_a"}).assign(
        direction=rows["direction"].map({"a->b": "b->a", "b->a": "a->b"}).fillna(rows["direction"]))


def _registry_name(rows: pd.DataFrame, label: str) -> str:
    """The registry name behind a measure label (the rows' meta says it), for its colour scale and family."""
    return _from_meta(rows, lambda meta: meta.get("measure"), lambda name: isinstance(name, str) and name) or label


def _table_confidence(rows: pd.DataFrame) -> float:
    """The interval's confidence the rows were computed with (their meta), else 0.95."""
    found = _from_meta(rows, lambda meta: meta.get("interval", {}).get("confidence"),
                       lambda value: isinstance(value, (int, float)) and 0 < value < 1)
    return 0.95 if found is None else float(found)


def _from_meta(rows: pd.DataFrame, read, valid):
    """The first value `read` finds in the rows' meta (JSON) that is `valid`, or None."""
    for meta in rows["meta"] if "meta" in rows else ():
        try:
            found = read(json.loads(meta)) if isinstance(meta, str) and meta else None
        except (ValueError, AttributeError):
            found = None
        if valid(found):
            return found
    return None


def _where(rows: pd.DataFrame) -> str:
    """The dataset, split and representation when the table names them (a workflow table), else ''."""
    said = [str(rows[column].dropna().iloc[0]) for column in ("dataset", "split", "representation")
            if column in rows and rows[column].notna().any()]
    return f" ({', '.join(said)})" if said else ""


def _n(rows: pd.DataFrame) -> str:
    return str(int(rows["n"].iloc[0])) if "n" in rows and pd.notna(rows["n"].iloc[0]) else "?"


def _listed(pairs) -> str:
    return ", ".join(f"({a!r}, {b!r})" for a, b in pairs)


def _hint(value, available) -> str:
    close = difflib.get_close_matches(str(value), [str(a) for a in available], n=2)
    return f" (did you mean {', '.join(map(repr, close))}?)" if close else ""


def _caption(fig, text: str) -> None:
    """The figure's caption as its suptitle, wrapped to its width (the constrained layout keeps the panel below)."""
    width = max(40, int(fig.get_figwidth() * 15))
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in text.split("\n")), fontsize=8)
