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
from reprsim.aligners.registry import PARAMETERS, make

Splits = Mapping[str, np.ndarray]
AlignerSpecs = Mapping[str, tuple[str, dict]]


def seeded_params(name: str, params: dict, seed: int) -> dict:
    """`params` with `seed` filled in for the aligners that take one and were not given one."""
    return {"seed": seed, **params} if "seed" in PARAMETERS[name] else dict(params)


def fit_and_score(label: str, name: str, params: dict, source: Splits, target: Splits,
                  scored: tuple[str, ...]) -> list[dict[str, Any]]:
    """One aligner fit on source["train"] → target["train"] (selected on "val" when given); one row per
    split in `scored`."""
    for splits, side in ((source, "source"), (target, "target")):
        missing = {"train", *scored} - set(splits)
        if missing:
            raise ValueError(f"{side} splits lack {sorted(missing)}; given: {sorted(splits)}")
    aligner = make(name, **params)
    started = time.perf_counter()
    aligner.fit(source["train"], target["train"], source.get("val"), target.get("val"))
    seconds = time.perf_counter() - started
    rows = []
    for split in scored:
        prediction = aligner.transform(source[split])
        rows.append({"aligner": label, "method": name, "split": split, "n": len(prediction),
                     "rel_error": relative_error(target[split], prediction),
                     "mean_l2": mean_l2(target[split], prediction), "fit_seconds": seconds,
                     "params": json.dumps(params, sort_keys=True, default=str),
                     "meta": json.dumps(aligner.meta, sort_keys=True, default=str)})
    return rows


def align_pair(splits_x: Splits, splits_y: Splits, aligners: AlignerSpecs, seed: int = 0,
               scored: tuple[str, ...] = ("train", "test")) -> list[dict[str, Any]]:
    """Every aligner (label → (name, params)) in both directions, x->y and y->x, on one pair of
    representations given as {"train", "val" (optional), "test"} row blocks with matching rows."""
    for split in splits_x:
        if split in splits_y and len(splits_x[split]) != len(splits_y[split]):
            raise ValueError(f"split {split!r} has {len(splits_x[split])} rows of X but {len(splits_y[split])} of Y")
    rows = []
    for label, (name, params) in aligners.items():
        params = seeded_params(name, params, seed)
        for direction, source, target in (("x->y", splits_x, splits_y), ("y->x", splits_y, splits_x)):
            rows += [{**row, "direction": direction}
                     for row in fit_and_score(label, name, params, source, target, scored)]
    return rows
