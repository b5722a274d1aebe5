"""Fit aligners on train rows, select on validation rows, score on held-out rows: tidy result rows.

Only `transform` ever sees a scored split's rows (docs/numerics.md, Aligners: test scores are the
headline); the train split is scored too, for reference, as in Ren et al. (2023, Table 4).
"""

from __future__ import annotations

import json
import time
from typing import Any, Mapping

import numpy as np

from reprsim.aligners.linear import mean_l2, relative_error
from reprsim.aligners.registry import PARAMETERS, SHARING, make
from reprsim.metrics.sample_size import RATIO

Splits = Mapping[str, np.ndarray]
AlignerSpecs = Mapping[str, tuple[str, dict]]


def seeded_params(name: str, params: dict, seed: int) -> dict:
    """`params` with `seed` filled in for the aligners that take one and were not given one."""
    return {"seed": seed, **params} if "seed" in PARAMETERS[name] else dict(params)


def sample_size(meta: dict, n_fit: int, d_source: int) -> dict:
    """Fit rows against the dimensions the map is fit on: k_x + k_y for the canonical maps (after
    their reduction), else the source's input dimensions (after the INN's PCA, when it reduced the
    source). A warning when n_fit / k < 5: the fit is then loose and the held-out error high."""
    if "dims_x" in meta:
        k = int(meta["dims_x"]) + int(meta["dims_y"])
    elif meta.get("reduced_side") == "x":  # the INN projected the wider source by PCA
        k = int(meta["reduced_dim"])
    else:
        k = int(d_source)
    notes = {"n_fit": int(n_fit), "k": k}
    if n_fit < RATIO * k:
        notes["warning"] = (f"n/k = {n_fit}/{k} = {n_fit / k:.2f} < {RATIO} fit rows per compared "
                            "dimension: the map is loosely determined; read its error against the others'")
    return notes


def fit_and_score(label: str, name: str, params: dict, source: Splits, target: Splits,
                  scored: tuple[str, ...], row_errors: bool = False,
                  shared: tuple[dict, dict] | None = None) -> list[dict[str, Any]]:
    """One aligner fit on source["train"] → target["train"] (selected on "val" when given); one row per
    split in `scored`. `shared`: (source's, target's) dicts that the caller keeps across the fits on these
    train rows; the aligners in registry.SHARING keep each side's decomposition there (the others ignore it).

    With `row_errors`, each row also carries the per-example squared errors ‖y_i − g(x_i)‖²
    (`row_sq_errors`) and squared target norms ‖y_i‖² (`row_target_sq`), float64 arrays in the
    split's row order: rel_error = sqrt(Σ row_sq_errors / Σ row_target_sq), so an interval over
    resampled rows can recompute it exactly (the findings stage does).
    """
    for splits, side in ((source, "source"), (target, "target")):
        missing = {"train", *scored} - set(splits)
        if missing:
            raise ValueError(f"{side} splits lack {sorted(missing)}; given: {sorted(splits)}")
    aligner = make(name, **params)
    started = time.perf_counter()
    options = {"shared": shared} if shared is not None and name in SHARING else {}
    aligner.fit(source["train"], target["train"], source.get("val"), target.get("val"), **options)
    seconds = time.perf_counter() - started
    notes = sample_size(aligner.meta, len(source["train"]), np.shape(source["train"])[1])
    rows = []
    for split in scored:
        prediction = aligner.transform(source[split])
        rows.append({"aligner": label, "method": name, "split": split, "n": len(prediction),
                     "rel_error": relative_error(target[split], prediction),
                     "mean_l2": mean_l2(target[split], prediction), "fit_seconds": seconds,
                     "params": json.dumps(params, sort_keys=True, default=str),
                     "meta": json.dumps({**aligner.meta, **notes}, sort_keys=True, default=str),
                     "warning": notes.get("warning", "")})
        if row_errors:
            Y, Y_hat = np.asarray(target[split], dtype=np.float64), np.asarray(prediction, dtype=np.float64)
            rows[-1]["row_sq_errors"] = ((Y - Y_hat) ** 2).sum(axis=1)
            rows[-1]["row_target_sq"] = (Y ** 2).sum(axis=1)
    return rows


def align_pair(splits_x: Splits, splits_y: Splits, aligners: AlignerSpecs, seed: int = 0,
               scored: tuple[str, ...] = ("train", "test"), row_errors: bool = False) -> list[dict[str, Any]]:
    """Every aligner (label → (name, params)) in both directions, x->y and y->x, on one pair of
    representations given as {"train", "val" (optional), "test"} row blocks with matching rows
    (`row_errors`: see :func:`fit_and_score`)."""
    for split in splits_x:
        if split in splits_y and len(splits_x[split]) != len(splits_y[split]):
            raise ValueError(f"split {split!r} has {len(splits_x[split])} rows of X but {len(splits_y[split])} of Y")
    rows = []
    kept_x, kept_y = {}, {}  # each side's train rows' decomposition, for every aligner and both directions
    for label, (name, params) in aligners.items():
        params = seeded_params(name, params, seed)
        for direction, source, target, shared in (("x->y", splits_x, splits_y, (kept_x, kept_y)),
                                                  ("y->x", splits_y, splits_x, (kept_y, kept_x))):
            rows += [{**row, "direction": direction}
                     for row in fit_and_score(label, name, params, source, target, scored, row_errors, shared)]
    return rows
