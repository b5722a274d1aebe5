"""The universality study's tables: for each factor level, measure and depth the share u of seed-level
similarity that survives (reprsim.stages.universality.shares), beside each level's quality; the convergence of
cross-seed similarity over training time (Huh et al. 2024); and the statement written out from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from reprsim.grounding_failures import failed_grounding
from reprsim.layers import model_depths
from reprsim.measure_registry import MEASURES
from reprsim.pair_series import oriented
from reprsim.relations import cross_seed
from reprsim.resampling import interval
from reprsim.stages.universality.shares import SEED_DRAWS, depth_groups, null_share, pair_arrays, share, term

COLUMNS = ["dataset", "representation", "factor", "level", "models", "measure", "family", "depth", "layer",
           "relative_depth", "u", "ci_low", "ci_high", "interval_basis", "verdict", "margin", "rows_ci_low",
           "rows_ci_high", "seeds_ci_low", "seeds_ci_high", "fieller_g", "denominator_near_zero", "u_null_zero",
           "u_null_zero_low", "u_null_zero_high", "seeds_above_floor", "n_variant_models", "n_reference_models",
           "n_floor_models",
           "s_variant", "s_variant_low", "s_variant_high", "s_seeds", "s_seeds_low", "s_seeds_high",
           "s_floor", "s_floor_low", "s_floor_high", "n_variant_pairs", "n_seed_pairs", "n_floor_pairs",
           "grounding_failed", "headline", "quality_metric", "quality", "reference_quality_low",
           "reference_quality_high", "quality_note", "n", "m", "n_resamples"]
CONVERGENCE_COLUMNS = ["dataset", "representation", "measure", "family", "depth", "layer", "level", "step",
                       "similarity", "ci_low", "ci_high", "validation_cross_entropy", "n_seed_pairs", "n", "m"]
CLAIM_COLUMNS = ["dataset", "representation", "measure", "family", "depth", "statistic", "estimate", "ci_low",
                 "ci_high", "verdict", "first_step", "last_step", "n_checkpoints", "headline", "n", "m"]
FACTOR_NAMES = {"width": "width", "depth": "depth", "data": "training data", "objective": "objective",
                "training_time": "training time", "placebo": "nothing (the seed placebo)"}
PLACEBO = ("placebo", "another reference seed")  # (factor, level) of the reference seeds scored as a level


@dataclass(frozen=True)
class Study:
    """The configuration's `universality` section, with what the stage needs of the rest."""

    reference: list[str]
    floor: list[str]
    factors: Mapping[str, Mapping[str, list[str]]]
    margin: float
    confidence: float
    specs: Mapping[str, Mapping]
    measures: Mapping[str, str]  # label -> registry name, in the configuration's order
    seed_draws: int = SEED_DRAWS
    seed: int = 0

    def family(self, label: str) -> str:
        return MEASURES[self.measures[label]].family


def quality(meta: Mapping) -> tuple[str, float]:
    """(what, value) of a model's fit, higher = better: for a language model the nats per token its validation
    cross-entropy lies below the unigram reference (the same tokens under the train split's token frequencies),
    which puts models scored on different text (the data factor) on one scale; for a fine-tuned model its validation
    accuracy; ("", NaN) without either."""
    if meta.get("validation_cross_entropy") is not None and meta.get("unigram_cross_entropy") is not None:
        return ("nats below the unigram reference",
                float(meta["unigram_cross_entropy"]) - float(meta["validation_cross_entropy"]))
    for key in ("validation_accuracy", "accuracy", "eval_accuracy"):
        if meta.get(key) is not None:
            return "validation accuracy", float(meta[key])
    return "", float("nan")


def _quality_note(factor: str, metric: str, value: float, low: float, high: float) -> str:
    """Where a level's quality lies beyond the seed siblings' spread: its u mixes the factor with how well the
    models fit their data (a wider model on a small corpus can overfit)."""
    if not metric or not np.isfinite(value) or not np.isfinite(low):
        return "quality unknown"
    if factor == "objective":
        return "not comparable: the objectives' cross-entropies score different predictions (masked or next tokens)"
    if low <= value <= high:
        return "within the seed siblings' spread"
    return (f"{'better' if value > high else 'worse'} than every seed sibling ({value:.3f} against "
            f"{low:.3f}–{high:.3f}): u mixes the factor with the change in fit")


def universality_tables(pairs: pd.DataFrame, replicates: pd.DataFrame, study: Study, metas: Mapping[str, Mapping],
                        grounding: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(universality, convergence curve, convergence claims) from the pair tables and replicates of one dataset
    and representation."""
    if pairs.empty:
        raise ValueError("the universality study has no pair table to read")
    (dataset, representation), = pairs[["dataset", "representation"]].drop_duplicates().itertuples(index=False)
    series, replicate_series = oriented(pairs, replicates)
    null_series = oriented(pairs.assign(value=pairs["null_mean"]), replicates.iloc[:0])[0] \
        if "null_mean" in pairs else None
    depths = model_depths(pairs)
    missing = sorted({*study.reference, *study.floor} - set(depths))
    if missing:
        raise ValueError(f"the pair tables hold no rows of {', '.join(missing)}: the study compares them")
    reference_depth = depths[study.reference[0]]
    failed = failed_grounding(grounding)
    seed_couples = cross_seed(study.specs, study.reference, study.reference)
    seed_couples = [(a, b) for a, b in seed_couples if a < b]
    floor_couples = cross_seed(study.specs, study.floor, study.reference)
    reference_quality = [quality(metas.get(m, {}))[1] for m in study.reference]
    low, high = float(np.min(reference_quality)), float(np.max(reference_quality))
    draw = _seed_draws(study)
    # each level's models, couples, seed draws and fit: the same for every measure; the placebo first
    placebo_couples = cross_seed(study.specs, study.reference, study.reference)
    levels = [(*PLACEBO, list(study.reference), placebo_couples, draw(study.reference, placebo=True), {
        "quality_metric": quality(metas.get(study.reference[0], {}))[0], "quality": float(np.mean(reference_quality)),
        "reference_quality_low": low, "reference_quality_high": high,
        "quality_note": "the reference seeds themselves"})] if len(seed_couples) >= 3 else []
    for factor, named in study.factors.items():
        for level, models in named.items():
            metric, _ = quality(metas.get(models[0], {}))
            value = float(np.mean([quality(metas.get(m, {}))[1] for m in models]))
            levels.append((factor, level, models, cross_seed(study.specs, models, study.reference), draw(models), {
                "quality_metric": metric, "quality": value, "reference_quality_low": low,
                "reference_quality_high": high, "quality_note": _quality_note(factor, metric, value, low, high)}))
    rows, curve, claims = [], [], []
    groups = depth_groups(reference_depth)
    for label in study.measures:
        if label not in set(series["measure"]):
            continue
        arrays, nulls = pair_arrays(series, replicate_series, label, null_series)
        seeds = term(arrays, seed_couples, depths, reference_depth)
        floor = term(arrays, floor_couples, depths, reference_depth)
        seeds_null = term(nulls, seed_couples, depths, reference_depth).mean()[0] if nulls else None
        common = {"dataset": dataset, "representation": representation, "measure": label,
                  "family": study.family(label), "grounding_failed": ", ".join(failed.get(label, [])),
                  "headline": label not in failed, "n": arrays.n, "m": arrays.m,
                  "n_resamples": int(seeds.draws.shape[1])}
        for factor, level, models, couples, counts, fit in levels:
            variant = term(arrays, couples, depths, reference_depth)
            variant_null = term(nulls, couples, depths, reference_depth).mean()[0] if nulls else None
            # each resampled group's draws at all rows: (variant, seeds, floor) values, the group's size
            under_draws = [((variant.drawn(first, second, study.seed_draws),
                             seeds.drawn(both, both, study.seed_draws), floor.drawn(both, both, study.seed_draws)),
                            size, group == "level") for group, first, second, both, size in counts]
            for depth, layers in groups.items():
                row = share(variant.mean(), seeds.mean(), floor.mean(), layers, arrays.n, arrays.m,
                            study.confidence, study.margin, under_draws)
                if variant_null is not None and seeds_null is not None:
                    row.update(null_share(variant.mean(), seeds.mean(), variant_null, seeds_null, layers, arrays.n,
                                          arrays.m, study.confidence))
                rows.append({**common, "factor": factor, "level": level, "models": ", ".join(models),
                             "depth": depth, "layer": int(layers[0]) if len(layers) == 1 else -1,
                             "relative_depth": float(np.mean(layers) / max(reference_depth, 1)), **row,
                             "margin": study.margin, "n_variant_pairs": len(couples),
                             "n_seed_pairs": len(seed_couples), "n_floor_pairs": len(floor_couples),
                             "n_variant_models": len(models), "n_reference_models": len(study.reference),
                             "n_floor_models": len(study.floor), **fit})
        if "training_time" in study.factors:
            points, found = _convergence(arrays, study, depths, reference_depth, metas, seeds.mean(), seed_couples,
                                         groups)
            curve += [{**common, **point} for point in points]
            claims += [{**common, **claim} for claim in found]
    table = pd.DataFrame(rows, columns=COLUMNS)
    curve_table = pd.DataFrame(curve, columns=CONVERGENCE_COLUMNS)
    claim_table = pd.DataFrame(claims, columns=CLAIM_COLUMNS)
    return table, curve_table, claim_table


def _seed_draws(study: Study):
    """A function of a level's models giving its seed draws, one group of models at a time, each drawn with
    replacement from that group alone: [(group, counts for the variant couples' first model, for their reference
    model, for both models of the seed and floor couples, the group's size)], counts being model -> (B,) times
    drawn (a model not named counts once). The reference and the floor are resampled when they have ≥ 2 models, and
    so is the level. The placebo's level is the reference seeds drawn again, for its couples' first model only, and
    its reference draw weighs its couples' reference model only. One generator: the same reference and floor draws
    for every level and measure."""
    rng = np.random.default_rng(study.seed)

    def resample(models: Sequence[str]) -> dict[str, np.ndarray]:
        picks = rng.integers(len(models), size=(study.seed_draws, len(models)))
        return {model: (picks == i).sum(axis=1).astype(float) for i, model in enumerate(models)}

    groups = {name: (resample(models), len(models)) for name, models in (("reference", study.reference),
                                                                         ("floor", study.floor)) if len(models) >= 2}

    def draw(models: Sequence[str], placebo: bool = False):
        found = []
        for name, (counts, size) in groups.items():
            first = {} if placebo and name == "reference" else counts
            found.append((name, first, counts, counts, size))
        if placebo:
            found.append(("level", resample(models), {}, {}, len(models)))
        elif len(models) >= 2:
            counts = resample(models)
            found.append(("level", counts, counts, counts, len(models)))
        return found

    return draw


def _step(spec: Mapping) -> int:
    """The optimiser steps behind a model: its checkpoint's step, else its training's steps (a hub model: its
    declared recipe.step)."""
    if "checkpoint" in spec:
        return int(spec["checkpoint"])
    if "steps" in spec:
        return int(spec["steps"])
    return int((spec.get("recipe") or {}).get("step", -1))


def _convergence(arrays, study: Study, depths, reference_depth, metas, seeds, seed_couples, groups):
    """Cross-seed similarity at each checkpoint (training_time levels) and at the end of training (the reference's
    seed siblings), and the claims that it rises: last minus first, Spearman ρ with the step and with the
    validation cross-entropy falling, each with its interval from the shared replicates."""
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
    steps = np.array([stage[1] for stage in stages], dtype=float)
    for depth, layers in groups.items():
        values = np.array([np.mean(stage[2][0][layers]) for stage in stages])
        draws = np.stack([np.mean(stage[2][1][:, layers], axis=1) for stage in stages], axis=1)  # (R, stages)
        for (level, step, _, count, _), value, draw, loss in zip(stages, values, draws.T, losses):
            low, high = interval(value, draw, n, m, study.confidence)
            points.append({"depth": depth, "layer": int(layers[0]) if len(layers) == 1 else -1, "level": level,
                           "step": step, "similarity": value, "ci_low": low, "ci_high": high,
                           "validation_cross_entropy": loss, "n_seed_pairs": count})
        if len(stages) < 2:
            continue
        base = {"depth": depth, "first_step": int(steps[0]), "last_step": int(steps[-1]),
                "n_checkpoints": len(stages)}
        rise, rise_draws = values[-1] - values[0], draws[:, -1] - draws[:, 0]
        low, high = interval(rise, rise_draws, n, m, study.confidence)
        claims.append({**base, "statistic": "last minus first", "estimate": rise, "ci_low": low, "ci_high": high,
                       "verdict": "rises" if low > 0 else "falls" if high < 0 else "no clear change"})
        for statistic, against in (("spearman_rho_step", steps), ("spearman_rho_loss", -losses)):
            if len(stages) < 3 or not np.isfinite(against).all():
                continue
            rho = float(spearmanr(values, against).statistic)
            rho_draws = np.array([spearmanr(d, against).statistic for d in draws])
            low, high = (np.clip(bound, -1, 1) for bound in interval(rho, rho_draws, n, m, study.confidence))
            claims.append({**base, "statistic": statistic, "estimate": rho, "ci_low": float(low),
                           "ci_high": float(high),
                           "verdict": "rises" if low > 0 else "falls" if high < 0 else "no clear change"})
    return points, claims


def _format(value: float, low: float, high: float) -> str:
    return f"{value:.2f} [{low:.2f}, {high:.2f}]" if np.isfinite(value) else "undefined"


def statement(table: pd.DataFrame, claims: pd.DataFrame, study: Study) -> pd.DataFrame:
    """The study written out, one quotable sentence per factor level and one for convergence: u with its
    interval in each third under the lead measure (the first grounded one in the configuration's order), and in
    how many grounded measures each verdict holds; measures that failed a grounding test are named and left out."""
    sentences = []
    headline = [label for label in study.measures if label in set(table.loc[table["headline"], "measure"])]
    lead = headline[0] if headline else None
    placebo = table[(table["factor"] == PLACEBO[0]) & (table["measure"] == lead) & table["depth"].str.endswith("third")]
    if lead is not None and not placebo.empty:
        half = float(np.nanmax((placebo["ci_high"] - placebo["ci_low"]) / 2))
        ends = ", ".join(f"[{r.ci_low:.2f}, {r.ci_high:.2f}] in the {r.depth}" for r in placebo.itertuples())
        text = (f"The seed placebo, each reference seed scored as a level against the others ({lead}; u = 1 by "
                f"construction), has seeds-and-rows intervals {ends}: with {len(study.reference)} reference seeds "
                f"and {len(study.floor)} floor models this study resolves u to about ±{half:.2f}")
        margin = study.margin
        text += (f", wider than the margin δ = {margin:g}: no level can be \"as similar as seeds\" within ±{margin:g}"
                 if half > margin else f", within the margin δ = {margin:g}") + "."
        sentences.append({"topic": PLACEBO[0], "level": PLACEBO[1], "text": text})
    for (factor, level), rows in table[table["factor"] != PLACEBO[0]].groupby(["factor", "level"], sort=False):
        thirds = rows[rows["depth"].str.endswith("third") & rows["headline"]]
        if lead is None or thirds.empty:
            continue
        mine = thirds[thirds["measure"] == lead].set_index("depth")
        shares = [f"{_format(r.u, r.ci_low, r.ci_high)} in the {depth}" if i == 0 else
                  f"{_format(r.u, r.ci_low, r.ci_high)} in the {depth.replace(' third', '')}"
                  for i, (depth, r) in enumerate(mine.iterrows())]
        shares = ", ".join(shares[:-1]) + f" and {shares[-1]}" if len(shares) > 1 else "".join(shares)
        count = int(rows["n_variant_models"].iloc[0])
        basis = (f"seeds and rows: {count} models, {len(study.reference)} reference seeds, {len(study.floor)} floor "
                 "models resampled" if rows["interval_basis"].iloc[0] == "seeds and rows"
                 else "rows only: one model, so the interval says nothing of other seeds of this recipe")
        text = (f"Changing {FACTOR_NAMES.get(factor, factor)} to {level} ({rows['models'].iloc[0]}) keeps {shares} "
                f"of the similarity seed siblings share ({lead}; 0 = the floor, 1 = another seed; {basis}).")
        if "u_null_zero" in mine and mine["u_null_zero"].notna().any():
            text += (" With the shuffled-row chance level as zero instead of the untrained floor: "
                     + ", ".join(f"{_format(r.u_null_zero, r.u_null_zero_low, r.u_null_zero_high)}"
                                 for r in mine.itertuples()) + " (lower, middle, upper).")
        verdicts = []
        for depth, group in thirds.groupby("depth", sort=False):
            counts = group["verdict"].value_counts()
            verdicts.append(f"{depth.replace(' third', '')}: "
                            + ", ".join(f"{verdict} ({count})" for verdict, count in counts.items()))
        text += f" Under the {thirds['measure'].nunique()} grounded measures, {'; '.join(verdicts)}."
        note = rows["quality_note"].iloc[0]
        if note.startswith(("better", "worse")):
            text += f" Its fit ({rows['quality_metric'].iloc[0]}) is {note}."
        sentences.append({"topic": factor, "level": level, "text": text})
    if not claims.empty and lead is not None:
        mine = claims[(claims["measure"] == lead) & claims["depth"].str.endswith("third")]
        rises = mine[mine["statistic"] == "last minus first"]
        if not rises.empty:
            parts = [f"{_format(r.estimate, r.ci_low, r.ci_high)} in the {r.depth} ({r.verdict})"
                     for r in rises.itertuples()]
            rhos = mine[mine["statistic"] == "spearman_rho_loss"]
            text = (f"Over training time (step {int(rises['first_step'].iloc[0])} to {int(rises['last_step'].iloc[0])}), "
                    f"cross-seed similarity ({lead}) changes by {'; '.join(parts)}")
            if not rhos.empty:
                text += "; Spearman ρ with the validation loss falling: " + "; ".join(
                    f"{_format(r.estimate, r.ci_low, r.ci_high)} in the {r.depth}" for r in rhos.itertuples())
            sentences.append({"topic": "convergence", "level": "", "text": text + "."})
    left_out = table.loc[~table["headline"], ["measure", "grounding_failed"]].drop_duplicates()
    if not left_out.empty:
        sentences.append({"topic": "grounding", "level": "", "text": "Left out of these statements, having failed a "
                          "grounding test on these models: " + "; ".join(
                              f"{r.measure} ({r.grounding_failed})" for r in left_out.itertuples()) + "."})
    return pd.DataFrame(sentences, columns=["topic", "level", "text"])


def select(frame: pd.DataFrame, dataset: str, representation: str, measures: Sequence[str],
           models: Sequence[str]) -> pd.DataFrame:
    """The rows of a pair table (or its replicates) the study reads."""
    keep = (frame["dataset"] == dataset) & (frame["representation"] == representation) \
        & frame["measure"].isin(measures) & frame["model_a"].isin(models) & frame["model_b"].isin(models)
    return frame[keep]
