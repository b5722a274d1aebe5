"""The convergence of cross-seed similarity over training time (Huh et al. 2024): its value at each checkpoint and
the claims that it rises, against the steps, the validation loss and competence."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from reprsim.design.relations import cross_seed
from reprsim.inference.resampling import interval
from reprsim.stages.universality.shares import term
from reprsim.stages.universality.study import Study

CONVERGENCE_COLUMNS = ["dataset", "representation", "measure", "family", "depth", "layer", "level", "step",
                       "similarity", "ci_low", "ci_high", "validation_cross_entropy", "probe_accuracy", "n_seed_pairs",
                       "n", "m"]
CLAIM_COLUMNS = ["dataset", "representation", "measure", "family", "depth", "statistic", "estimate", "ci_low",
                 "ci_high", "verdict", "first_step", "last_step", "n_checkpoints", "headline", "n", "m"]


def _step(spec: Mapping) -> int:
    """The optimiser steps behind a model: its checkpoint's step, else its training's steps (a hub model: its
    declared recipe.step)."""
    if "checkpoint" in spec:
        return int(spec["checkpoint"])
    if "steps" in spec:
        return int(spec["steps"])
    return int((spec.get("recipe") or {}).get("step", -1))


def _convergence(arrays, study: Study, depths, reference_depth, metas, seeds, seed_couples, groups,
                 competence: Mapping[str, Mapping] | None = None):
    """Cross-seed similarity at each checkpoint (training_time levels) and at the end of training (the reference's
    seed siblings), and the claims that it rises: last minus first, Spearman ρ with the step, with the validation
    cross-entropy falling and (where every stage's models were probed) with the shared probe's accuracy rising
    (convergence against competence, not only steps: Huh et al. 2024), each with its interval from the shared
    replicates."""
    from scipy.stats import spearmanr  # here: the table job needs it only for a study over training time

    stages = []
    for level, models in study.factors["training_time"].items():
        couples = [(a, b) for a, b in cross_seed(study.specs, models, models) if a < b]
        if couples:
            stages.append((level, _step(study.specs[models[0]]), term(arrays, couples, depths, reference_depth).mean(),
                           len(couples), models))
    stages.append(("end of training", _step(study.specs[study.reference[0]]), seeds, len(seed_couples),
                   study.reference))
    stages.sort(key=lambda stage: stage[1])
    points, claims = [], []
    n, m = arrays.n, arrays.m
    losses = np.array([np.mean([float(metas.get(model, {}).get("validation_cross_entropy", np.nan))
                                for model in stage[4]]) for stage in stages])
    accuracies = np.array([np.mean([float((competence or {}).get(model, {}).get("accuracy", np.nan))
                                    for model in stage[4]]) for stage in stages])
    steps = np.array([stage[1] for stage in stages], dtype=float)
    for depth, layers in groups.items():
        values = np.array([np.mean(stage[2][0][layers]) for stage in stages])
        draws = np.stack([np.mean(stage[2][1][:, layers], axis=1) for stage in stages], axis=1)  # (R, stages)
        for (level, step, _, count, _), value, draw, loss, accuracy in zip(stages, values, draws.T, losses,
                                                                           accuracies):
            low, high = interval(value, draw, n, m, study.confidence)
            points.append({"depth": depth, "layer": int(layers[0]) if len(layers) == 1 else -1, "level": level,
                           "step": step, "similarity": value, "ci_low": low, "ci_high": high,
                           "validation_cross_entropy": loss, "probe_accuracy": accuracy, "n_seed_pairs": count})
        if len(stages) < 2:
            continue
        base = {"depth": depth, "first_step": int(steps[0]), "last_step": int(steps[-1]),
                "n_checkpoints": len(stages)}
        rise, rise_draws = values[-1] - values[0], draws[:, -1] - draws[:, 0]
        low, high = interval(rise, rise_draws, n, m, study.confidence)
        claims.append({**base, "statistic": "last minus first", "estimate": rise, "ci_low": low, "ci_high": high,
                       "verdict": "rises" if low > 0 else "falls" if high < 0 else "no clear change"})
        for statistic, against in (("spearman_rho_step", steps), ("spearman_rho_loss", -losses),
                                   ("spearman_rho_competence", accuracies)):
            if len(stages) < 3 or not np.isfinite(against).all():
                continue
            rho = float(spearmanr(values, against).statistic)
            rho_draws = np.array([spearmanr(d, against).statistic for d in draws])
            low, high = (np.clip(bound, -1, 1) for bound in interval(rho, rho_draws, n, m, study.confidence))
            claims.append({**base, "statistic": statistic, "estimate": rho, "ci_low": float(low),
                           "ci_high": float(high),
                           "verdict": "rises" if low > 0 else "falls" if high < 0 else "no clear change"})
    return points, claims
