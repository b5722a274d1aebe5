"""Claims from model stitching (Brown et al. 2023; Bansal et al. 2021), read from the stitching table and
its half-sample replicates: identity-stitching penalties between differently fine-tuned models grow with
depth; stitching penalties are asymmetric between models of different kinds. Both statistics are linear in
the cells' penalties and get their intervals from the replicates (reprsim.tables.stitching)."""

from __future__ import annotations

import json
from itertools import combinations
from typing import Mapping

from reprsim.stages.findings.context import Setup, Tables
from reprsim.stages.findings.table import Claim, judged, not_applicable
from reprsim.tables.layers import matching_layer
from reprsim.tables.stitching import Cell, Penalties, difference_weights, learned_phi, main_metric, matched_cells, \
    penalties, phis, summary_phi

DEPTH = Claim(
    "stitching_penalty_grows_with_depth",
    "Identity-stitching penalties between differently fine-tuned models grow with depth",
    "Brown et al. 2023, §4 (Figure 2); Bansal et al. 2021",
    "mean over directed pairs f → g of two distinct fine-tuned models of [mean excess penalty over f's upper "
    "layers (l > L_f/2) − mean over its lower layers (l ≤ L_f/2)]; excess penalty = penalty(f → g) − "
    "penalty(f → f) at layer l, g entered at the same relative depth, identity stitching (else the first "
    "learned map), the task's metric")
ASYMMETRY = Claim(
    "stitching_asymmetric_between_kinds", "Stitching penalties are asymmetric between models of different kinds",
    "Brown et al. 2023, §3 (Figure 1)",
    "mean over model pairs (a of kind K1, b of kind K2) of the mean over matched cells of penalty(a → b at "
    "(l, m)) − penalty(b → a at (m, l)), the learned map (identity if it is the only one), the task's metric; "
    "K1 and K2 oriented so that the estimate is ≥ 0 (two-sided: the claim holds when the interval excludes 0)")
NO_TABLE = "no stitching table (stitching is not configured)"


def _missing(tables: Tables) -> str | None:
    """Why the stitching claims cannot be tested at all, or None."""
    if tables.stitching is None or tables.stitching.empty:
        return NO_TABLE
    if tables.stitching_replicates is None or tables.stitching_replicates.empty:
        return "no stitching replicates (results/tables/stitching_resamples.parquet): no interval can be made"
    return None


def _depths(rows) -> dict[str, int]:
    depths = dict(zip(rows["model_a"], rows["n_layers_a"]))
    depths.update(zip(rows["model_b"], rows["n_layers_b"]))
    return {m: int(d) for m, d in depths.items()}


def _upper_minus_lower(pens: Penalties, f: str, g: str, depth: dict[str, int]) -> dict[Cell, float] | None:
    """Weights of [mean excess penalty over l > L_f/2 − mean over l ≤ L_f/2] of f → g (None when a half has no
    layer with both f → g at the matching layer of g and f's self-stitch)."""
    lower, upper = [], []
    for layer in range(1, depth[f] + 1):
        cell, own = (f, g, layer, matching_layer(layer, depth[f], depth[g])), (f, f, layer, layer)
        if cell in pens and own in pens:
            (upper if layer > depth[f] / 2 else lower).append((cell, own))
    if not lower or not upper:
        return None
    weights = difference_weights(upper)  # mean over upper of penalty − self penalty
    for cell, value in difference_weights(lower, -1.0).items():
        weights[cell] = weights.get(cell, 0.0) + value
    return weights


def stitching_penalty_grows_with_depth(tables: Tables, setup: Setup) -> list[dict]:
    if _missing(tables):
        return [not_applicable(DEPTH, _missing(tables))]
    tuned = {name for name, spec in setup.models.items() if spec.get("source") == "finetune"}
    rows_out = []
    for dataset, rows in tables.stitching.groupby("dataset", sort=True):
        directed = sorted({(f, g) for f, g in zip(rows["model_a"], rows["model_b"])
                           if f != g and f in tuned and g in tuned})
        if not directed:
            rows_out.append(not_applicable(DEPTH, "no two distinct fine-tuned models (source: finetune) were "
                                           "stitched into each other", dataset))
            continue
        pair_rows = rows[[(f, g) in set(directed) or f == g for f, g in zip(rows["model_a"], rows["model_b"])]]
        available = phis(pair_rows)
        phi = summary_phi(available)
        metric = main_metric(rows)
        pens = penalties(tables.stitching, tables.stitching_replicates, dataset, phi, metric)
        depth = _depths(rows)
        units = {}
        for f, g in directed:
            weights = _upper_minus_lower(pens, f, g, depth)
            if weights is not None:
                units[(f, g)] = weights
        if not units:
            rows_out.append(not_applicable(DEPTH, "no directed pair of fine-tuned models has stitched layers in both "
                                           "halves of f together with f's self-stitch (a model needs 2 blocks or "
                                           "more)", dataset))
            continue
        weights: dict[Cell, float] = {}
        for unit in units.values():
            for cell, value in unit.items():
                weights[cell] = weights.get(cell, 0.0) + value / len(units)
        estimate, replicates = pens.weighted(weights)
        low, high = pens.interval(estimate, replicates, setup.confidence)
        map_text = ("identity stitching" if phi == "identity"
                    else f"φ = {phi} (no identity stitching among these pairs: the first learned map)")
        method = (f"{len(units)} directed pairs, {map_text}, {metric}; the self-stitch penalty subtracted per layer "
                  f"and replicate; " + pens.method())
        rows_out.append(judged(DEPTH, estimate=estimate, low=low, high=high, n=pens.n,
                               models="; ".join(f"{f} → {g}" for f, g in units),
                               measure=f"excess penalty, {metric}, φ = {phi}", method=method,
                               confidence=setup.confidence, dataset=dataset))
    return rows_out


# ----------------------------------------------------------------- kinds of models


def _resolved(name: str, specs: Mapping[str, Mapping], seen=()) -> Mapping:
    """A model's spec without its seed, a borrowed tokenizer (the name of another model) replaced by
    that model's own tokenizer: a model that learns the tokenizer and one that borrows it tokenise alike."""
    spec = {key: value for key, value in specs[name].items() if key not in ("seed", "seeds")}
    tokenizer = spec.get("tokenizer")
    if isinstance(tokenizer, str) and tokenizer in specs and tokenizer not in seen and tokenizer != name:
        spec["tokenizer"] = _resolved(tokenizer, specs, (*seen, name)).get("tokenizer", tokenizer)
    return spec


def _flat(spec: Mapping, prefix: str = "") -> dict[str, str]:
    flat = {}
    for key, value in spec.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = json.dumps(value, sort_keys=True).strip('"')
    return flat


def kinds(models, specs: Mapping[str, Mapping]) -> dict[str, tuple[str, ...]]:
    """Kind (canonical JSON of the spec without seed) -> its models, for the `models` that have a spec.
    Seeds of one recipe are one kind; anything else that differs makes another."""
    found: dict[str, list[str]] = {}
    for name in sorted(set(models)):
        if name in specs:
            found.setdefault(json.dumps(_resolved(name, specs), sort_keys=True, default=str), []).append(name)
    return {kind: tuple(names) for kind, names in found.items()}


def kind_labels(first: str, second: str) -> tuple[str, str]:
    """Readable names of two kinds: the spec keys in which they differ, with each kind's values."""
    a, b = _flat(json.loads(first)), _flat(json.loads(second))
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))

    def label(flat: dict[str, str]) -> str:
        return ", ".join(f"{k}={flat.get(k, '–')[:40]}" for k in keys)
    return label(a), label(b)


def stitching_asymmetric_between_kinds(tables: Tables, setup: Setup) -> list[dict]:
    if _missing(tables):
        return [not_applicable(ASYMMETRY, _missing(tables))]
    rows_out = []
    for dataset, rows in tables.stitching.groupby("dataset", sort=True):
        directed = set(zip(rows["model_a"], rows["model_b"]))
        both = {(a, b) for a, b in directed if a != b and (b, a) in directed}
        grouped = kinds(set(rows["model_a"]) | set(rows["model_b"]), setup.models)
        kind_pairs = [(k1, k2) for k1, k2 in combinations(sorted(grouped), 2)
                      if any((a, b) in both for a in grouped[k1] for b in grouped[k2])]
        if not kind_pairs:
            stitched = sorted({m for pair in both for m in pair})
            why = (f"the models stitched both ways ({', '.join(stitched)}) are of one kind (their specs differ in "
                   "seed only)" if stitched else "no two models were stitched into each other both ways")
            rows_out.append(not_applicable(ASYMMETRY, f"no two kinds of model were stitched both ways: {why}",
                                           dataset))
            continue
        metric = main_metric(rows)
        phi = learned_phi(phis(rows))
        pens = penalties(tables.stitching, tables.stitching_replicates, dataset, phi, metric)
        for k1, k2 in kind_pairs:
            model_pairs = {(a, b): matched_cells(pens, a, b) for a in grouped[k1] for b in grouped[k2]
                           if (a, b) in both}
            model_pairs = {pair: cells for pair, cells in model_pairs.items() if cells}
            label_1, label_2 = kind_labels(k1, k2)
            if not model_pairs:
                rows_out.append(not_applicable(ASYMMETRY, f"{label_1} and {label_2}: no layer pair was stitched both "
                                               f"ways with φ = {phi}", dataset))
                continue
            weights: dict[Cell, float] = {}
            for cells in model_pairs.values():
                for cell, value in difference_weights(cells, 1.0 / len(model_pairs)).items():
                    weights[cell] = weights.get(cell, 0.0) + value
            estimate, replicates = pens.weighted(weights)
            first, second = grouped[k1], grouped[k2]
            if estimate < 0:  # two-sided: orient so that feeding `first` into `second` costs more
                estimate, replicates = -estimate, -replicates
                (label_1, label_2), (first, second) = (label_2, label_1), (second, first)
            low, high = pens.interval(estimate, replicates, setup.confidence)
            cells = sorted({len(c) for c in model_pairs.values()})
            method = (f"two-sided: the kinds are oriented so that the estimate is ≥ 0, i.e. stitching {label_1} "
                      f"into {label_2} costs more than the reverse (positive penalties = worse than the top model; "
                      f"{metric}), and the claim holds when the interval excludes 0; {len(model_pairs)} model "
                      f"pairs, {'/'.join(map(str, cells))} matched cells each, φ = {phi}; " + pens.method())
            models = (f"{label_1} -> {label_2} costs more ({', '.join(first)} into {', '.join(second)})")
            rows_out.append(judged(ASYMMETRY, estimate=estimate, low=low, high=high, n=pens.n, models=models,
                                   measure=f"penalty a → b − b → a, {metric}, φ = {phi}", method=method,
                                   confidence=setup.confidence, dataset=dataset))
    return rows_out
