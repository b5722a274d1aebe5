"""A factor level's fit and competence beside the reference seeds': how well its models fit their data, how well
they decode the shared probe's labels, and, for a level with checkpoints, the checkpoint whose competence is nearest
the reference seeds'."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from reprsim.stages.universality.study import Study


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


def _competence(models: Sequence[str], reference: Sequence[str], competence: Mapping[str, Mapping]) -> dict:
    """A level's competence on the shared probe (reprsim.stages.grounding.competence): its models' mean best-layer
    accuracy beside the reference seeds' range and the chance level; NaN and a note where a model was not probed
    (a dimension placebo's reduced copies, a dataset without labels)."""
    accuracy = [competence[m]["accuracy"] for m in models if m in competence]
    seeds = [competence[m]["accuracy"] for m in reference if m in competence]
    if len(accuracy) < len(models) or not seeds:
        return {"probe_accuracy": np.nan, "probe_reference_low": np.nan, "probe_reference_high": np.nan,
                "probe_chance": np.nan, "probe_note": "not probed"}
    value, low, high = float(np.mean(accuracy)), float(np.min(seeds)), float(np.max(seeds))
    # beyond the seeds' range only by more than the probe's own uncertainty (its interval's half-width over rows)
    half = float(np.mean([(competence[m]["ci_high"] - competence[m]["ci_low"]) / 2 for m in models
                          if "ci_low" in competence[m]] or [0.0]))
    note = ("within the seed siblings' spread" if low - half <= value <= high + half else
            f"{'better' if value > high else 'worse'} than every seed sibling")
    if half and note.startswith("within") and not low <= value <= high:
        note += f" (outside their range by less than the probe's ±{half:.3f} over rows)"
    return {"probe_accuracy": value, "probe_reference_low": low, "probe_reference_high": high,
            "probe_chance": float(competence[models[0]]["chance"]), "probe_note": note}


def _matched_step(factor: str, level: str, steps: Mapping[int, list[str]], study: Study,
                  metas: Mapping[str, Mapping], competence: Mapping[str, Mapping]):
    """(label, the level's models at the checkpoint whose competence is nearest the reference seeds', what was
    matched) for a level with checkpoints (reprsim.design.relations.competence_checkpoints): on the shared probe's accuracy
    where every candidate and reference model was probed, else, where the level keeps the reference's objective, on
    the fit (nats below the unigram reference); the models None where the final ones are nearest, None where
    nothing compares."""
    models = list(study.factors[factor][level])
    final = int(study.specs[models[0]].get("steps", 0))
    candidates = {**steps, final: list(models)}
    everyone = [*study.reference, *(m for named in candidates.values() for m in named)]
    if all(m in competence for m in everyone):
        what = "the shared probe's accuracy"

        def value(named):
            return float(np.mean([competence[m]["accuracy"] for m in named]))
    elif (factor != "objective" and all(np.isfinite(quality(metas.get(m, {}))[1]) for m in everyone)):
        what = quality(metas[study.reference[0]])[0]

        def value(named):
            return float(np.mean([quality(metas[m])[1] for m in named]))
    else:
        return None
    target = value(study.reference)
    step = min(candidates, key=lambda s: (abs(value(candidates[s]) - target), -s))
    note = (f"matched on {what}: at step {step} of {final} {value(candidates[step]):.3f}, the reference seeds "
            f"{target:.3f}, the final models {value(models):.3f}")
    if step == final:
        return level, None, note
    return f"{level}, step {step} (competence matched)", candidates[step], note
