"""A small universality study on synthetic representations, run through the universality stage's own functions
(reprsim.stages.universality.study), so that the report's tests and figures read tables as the stage writes them.

Every model's layer l carries a shared signal's layer (through a random orthogonal map) at some strength, plus the
model's own noise: the reference's three seeds at full strength, the floor none; a width level keeps it all (u ≈ 1),
another less of it; a depth level with half the blocks; a data level that keeps the lower layers and loses the upper
ones; an objective level that keeps little of it; checkpoints of the reference seeds at two steps with less of it.
Linear CKA and SVCCA are grounded; Procrustes fails a grounding test (its rows leave the statement and the figure
marks its panel)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reprsim.design.conditioning import parse as parse_conditioning
from reprsim.design.relations import study_pairs
from reprsim.inference.resampling import half_samples
from reprsim.measure_registry import MEASURES
from reprsim.metrics.api import compute_layers, replicate_layers
from reprsim.metrics.conditioners import condition_stack
from reprsim.stages.universality.statement import statement
from reprsim.stages.universality.study import Study
from reprsim.stages.universality.tables import universality_tables

N, D, DEPTH, RESAMPLES = 200, 10, 4, 12
MEASURE_SPECS = {"linear_cka": ("cka", {"kernel": "linear", "estimator": "biased"}), "svcca": ("svcca", {}),
                 "procrustes": ("procrustes", {})}
REFERENCE = ["ref-s0", "ref-s1", "ref-s2"]
FACTORS = {
    "width": {"n_embd 24": ["wide-s3"], "n_embd 6": ["narrow-s3"]},
    "depth": {"2 blocks": ["shallow-s3"]},
    "data": {"other corpus": ["other-s3"]},
    "objective": {"masked LM": ["masked-s3"]},
    "training_time": {"step 25": [f"ref-s{s}@25" for s in range(3)], "step 100": [f"ref-s{s}@100" for s in range(3)]},
}
GROUNDING = [{"measure": "procrustes", "test": "monotonicity", "variant": "spearman", "decision": "fail",
              "score": 0.1, "beyond_chance": False},
             {"measure": "linear_cka", "test": "monotonicity", "variant": "spearman", "decision": "pass",
              "score": 0.9, "beyond_chance": True}]


def _model(signal: np.ndarray, rng: np.random.Generator, strength, layers=None) -> np.ndarray:
    """(len(layers), N, D): the signal's `layers` (all by default) at `strength` (one per layer, or one for all)
    through a random orthogonal map each, plus this model's own noise."""
    layers = list(range(signal.shape[0])) if layers is None else layers
    strength = np.broadcast_to(np.asarray(strength, dtype=float), (len(layers),))
    out = []
    for k, layer in enumerate(layers):
        rotation = np.linalg.qr(rng.normal(size=(D, D)))[0]
        shared = signal[layer] @ rotation
        own = rng.normal(size=(N, D))
        out.append(strength[k] * shared + np.sqrt(max(0.0, 1 - strength[k] ** 2)) * own + 0.5 * rng.normal(size=(N, D)))
    return np.stack(out).astype(np.float32)


def models_and_specs(seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    rng = np.random.default_rng(seed)
    signal = rng.normal(size=(DEPTH + 1, N, D))
    models = {name: _model(signal, rng, 1.0) for name in REFERENCE}
    models["floor-s9"] = _model(signal, rng, 0.0)
    models["wide-s3"] = _model(signal, rng, 1.0)
    models["narrow-s3"] = _model(signal, rng, 0.7)
    models["shallow-s3"] = _model(signal, rng, 0.9, layers=[0, 2, 4])
    models["other-s3"] = _model(signal, rng, [1.0, 0.95, 0.7, 0.4, 0.3])
    models["masked-s3"] = _model(signal, rng, [0.3, 0.1, 0.0, 0.0, 0.0])
    for step, strength in ((25, 0.5), (100, 0.8)):
        for s in range(3):
            models[f"ref-s{s}@{step}"] = _model(signal, rng, strength)
    base = {"source": "pretrain", "dataset": "corpus", "config": {"n_embd": 12, "n_layer": DEPTH}, "steps": 400}
    specs = {name: {**base, "seed": int(name.split("-s")[1].split("@")[0])} for name in models}
    specs["floor-s9"] = {"source": "init", "seed": 9}
    for name in models:
        if "@" in name:
            specs[name]["checkpoint"] = int(name.split("@")[1])
    return models, specs


def pair_tables(models: dict[str, np.ndarray], pairs, measures=MEASURE_SPECS, resamples: int = RESAMPLES,
                rows: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pair table and replicates of `pairs`, as aggregate_pairs writes them (one dataset, mean pooling); `rows`
    compares a pair on its first rows only (pair -> n), as a table from another split would be. A measure given as
    (name, params, conditioning) sees both stacks conditioned so (reprsim.design.conditioning), as a pair job's."""
    table, reps = [], []
    for a, b in pairs:
        n = (rows or {}).get((a, b), models[a].shape[1])
        indices = half_samples(n, resamples, seed=0)
        for label, (name, params, *how) in measures.items():
            X, Y = models[a][:, :n], models[b][:, :n]
            if how:
                X, Y = (condition_stack(torch.from_numpy(np.asarray(Z, dtype=np.float64)),
                                        parse_conditioning(how[0])).numpy() for Z in (X, Y))
            values = compute_layers(name, X, Y, **params).values
            draws, _ = replicate_layers(name, X, Y, indices, **params)
            for la in range(values.shape[0]):
                for lb in range(values.shape[1]):
                    common = {"dataset": "corpus", "representation": "mean", "model_a": a, "model_b": b,
                              "layer_a": la, "layer_b": lb, "measure": label, "direction": "symmetric"}
                    table.append({**common, "kind": MEASURES[name].kind, "value": float(values[la, lb]), "n": n})
                    reps += [{**common, "replicate": r, "value": float(draws[r, la, lb]), "n": n,
                              "m": indices.shape[1]} for r in range(resamples)]
    return pd.DataFrame(table), pd.DataFrame(reps)


def study_tables() -> dict[str, pd.DataFrame]:
    """universality, convergence, claims and statement tables of the synthetic study."""
    models, specs = models_and_specs()
    study = Study(reference=REFERENCE, floor=["floor-s9"], factors=FACTORS, margin=0.1, confidence=0.95, specs=specs,
                  measures={label: name for label, (name, _) in MEASURE_SPECS.items()})
    pairs = study_pairs(specs, {"reference": REFERENCE, "floor": ["floor-s9"], "factors": FACTORS})
    table, replicates = pair_tables(models, pairs)
    cross_entropy = {"ref-s0": 4.02, "ref-s1": 4.05, "ref-s2": 4.08, "wide-s3": 3.7, "narrow-s3": 4.3,
                     "shallow-s3": 4.06, "other-s3": 4.04, "masked-s3": 2.1, "floor-s9": 7.6}
    cross_entropy.update({f"ref-s{s}@25": 5.9 + 0.02 * s for s in range(3)})
    cross_entropy.update({f"ref-s{s}@100": 4.7 + 0.02 * s for s in range(3)})
    metas = {name: {"validation_cross_entropy": value, "unigram_cross_entropy": 6.5} for name, value in cross_entropy.items()}
    tables = universality_tables(table, replicates, study, metas, grounding=pd.DataFrame(GROUNDING))
    return {"universality": tables.universality, "senses": tables.senses, "controls": tables.controls,
            "convergence": tables.convergence, "claims": tables.claims,
            "statement": statement(tables.universality, tables.claims, study, tables.senses, tables.controls)}


def write_study(folder: Path, tables: dict[str, pd.DataFrame] | None = None) -> dict[str, str]:
    """The study's tables as Parquet files under `folder` (the stage's file names); name -> path."""
    tables = tables if tables is not None else study_tables()
    folder.mkdir(parents=True, exist_ok=True)
    files = {"universality": "universality.parquet", "senses": "universality_senses.parquet",
             "controls": "universality_controls.parquet",
             "convergence": "universality_convergence.parquet",
             "claims": "universality_claims.parquet", "statement": "universality_statement.parquet"}
    written = {}
    for name, file in files.items():
        tables[name].to_parquet(folder / file, index=False)
        written[name] = str(folder / file)
    return written
