"""The universality study written out: the answers (the seed placebo's resolution, each sense's question, the
artefact controls, the convergence over training time), then one quotable sentence per factor level."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from reprsim.design.senses import AGAINST_IDENTITY, SEEDS_ROW, SENSES
from reprsim.stages.universality.study import PLACEBO, Study
from reprsim.tables.universality import FACTOR_PHRASES


def _format(value: float, low: float, high: float) -> str:
    return f"{value:.2f} [{low:.2f}, {high:.2f}]" if np.isfinite(value) else "undefined"


def _thirds_said(rows: pd.DataFrame, words: Mapping[str, str] | None = None) -> str:
    """A sense's verdicts over the thirds in words ("as similar as seeds in every third", or third by third), with
    the middle third's u and interval; `words` renames verdicts."""
    verdicts = [(words or {}).get(v, v) for v in rows["verdict"]]
    said = (f"{verdicts[0]} in every third" if len(set(verdicts)) == 1 else
            ", ".join(f"{v} in the {d.replace(' third', '')}" for d, v in zip(rows["depth"], verdicts)))
    middle = rows[rows["depth"] == "middle third"]
    if len(middle):
        r = middle.iloc[0]
        said += f" (middle: u = {_format(r.u, r.ci_low, r.ci_high)})"
    return said


def sense_sentence(senses: pd.DataFrame, factor: str, level: str) -> str:
    """A level's answer per sense of similarity, each sense's precise question with its verdicts over the thirds
    (the senses without a measure are left to the table); "" without a measured sense."""
    mine = senses[(senses["factor"] == factor) & (senses["level"] == level) & (senses["verdict"] != "not measured")
                  & senses["depth"].str.endswith("third")]
    words = AGAINST_IDENTITY if (factor, level) == SEEDS_ROW else None
    parts = [f"{SENSES[sense]} ({sense}): {_thirds_said(rows, words)}"
             for sense, rows in mine.groupby("sense", sort=False)]
    return f"In which sense: {'; '.join(parts)}." if parts else ""


def sense_answer(senses: pd.DataFrame, sense: str) -> str:
    """One sense's answer over the factor levels (the seed placebo and the seed row aside): the precise question
    and the verdicts over the thirds of each level measured in that sense in some third; "" where none is."""
    rows = senses[(senses["sense"] == sense) & senses["depth"].str.endswith("third")
                  & ~senses["factor"].isin([SEEDS_ROW[0], PLACEBO[0]])]
    parts = [f"{_level_words(factor, level)}: {_thirds_said(cells)}"
             for (factor, level), cells in rows.groupby(["factor", "level"], sort=False)
             if (cells["verdict"] != "not measured").any()]
    if not parts:
        return ""
    return (f"Does a change of one factor keep {SENSES[sense]} ({sense}; u = 1: as alike as another seed, 0: as the "
            f"floor)? " + "; ".join(parts) + ".")


def _level_words(factor: str, level: str) -> str:
    return f"{FACTOR_PHRASES.get(factor, factor)} {level}"


def controls_sentence(controls: pd.DataFrame) -> str:
    """What the artefact controls did to the verdicts: each changed verdict, or that none changed."""
    named = ", ".join(f"{r.control} ({r.measure}, {r.change})"
                      for r in controls.drop_duplicates("control").itertuples())
    changed = controls[controls["changed"]]
    text = f"Artefact controls ({named}): "
    if changed.empty:
        return text + f"none of their {len(controls)} verdicts differs from their twins' on the stored features."
    parts = [f"{r.control} on {FACTOR_PHRASES.get(r.factor, r.factor)} {r.level} in the {r.depth}: {r.verdict} "
             f"→ {r.control_verdict} ({_format(r.control_u, r.control_ci_low, r.control_ci_high)})"
             for r in changed.itertuples()]
    verb = "differs" if len(changed) == 1 else "differ"
    return text + f"{len(changed)} of {len(controls)} verdicts {verb} from their twins': " + "; ".join(parts) + "."


def convergence_sentence(claims: pd.DataFrame, lead: str) -> str:
    """How cross-seed similarity under the lead measure changes over training time, per third, with Spearman's ρ
    against the validation loss and against competence on the shared probe; "" without the claims."""
    mine = claims[(claims["measure"] == lead) & claims["depth"].str.endswith("third")]
    rises = mine[mine["statistic"] == "last minus first"]
    if rises.empty:
        return ""
    parts = [f"{_format(r.estimate, r.ci_low, r.ci_high)} in the {r.depth} ({r.verdict})" for r in rises.itertuples()]
    text = (f"Over training time (step {int(rises['first_step'].iloc[0])} to {int(rises['last_step'].iloc[0])}), "
            f"cross-seed similarity ({lead}) changes by {'; '.join(parts)}")
    for statistic, against in (("spearman_rho_loss", "the validation loss falling"),
                               ("spearman_rho_competence", "the shared probe's accuracy rising")):
        rhos = mine[mine["statistic"] == statistic]
        if not rhos.empty:
            text += f"; Spearman ρ with {against}: " + "; ".join(
                f"{_format(r.estimate, r.ci_low, r.ci_high)} in the {r.depth}" for r in rhos.itertuples())
    return text + "."


def statement(table: pd.DataFrame, claims: pd.DataFrame, study: Study,
              senses: pd.DataFrame | None = None, controls: pd.DataFrame | None = None) -> pd.DataFrame:
    """The study written out. First the answers (reprsim.design.senses.ANSWER_TOPICS, at most ten sentences): the
    resolution the seed placebo gives; how near to identical the seed siblings come in each sense; per sense of
    similarity, the question and each level's verdicts over the thirds; which artefact controls changed a verdict;
    convergence over training time. Then one quotable sentence per factor level: u with its interval in each third
    under the lead measure (the first grounded one in the configuration's order), in how many grounded measures each
    verdict holds, its verdicts per sense, its fit and competence; last, the measures that failed a grounding test,
    left out."""
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
    seeds = sense_sentence(senses, *SEEDS_ROW) if senses is not None and len(senses) else ""
    if seeds:
        sentences.append({"topic": SEEDS_ROW[0], "level": SEEDS_ROW[1], "text": (
            f"Seed siblings of the reference recipe against identical copies (u = 1: identical, 0: the floor). "
            f"{seeds}")})
    for sense in SENSES if senses is not None and len(senses) else ():
        answer = sense_answer(senses, sense)
        if answer:
            sentences.append({"topic": "sense", "level": sense, "text": answer})
    if controls is not None and len(controls):
        sentences.append({"topic": "controls", "level": "", "text": controls_sentence(controls)})
    converging = convergence_sentence(claims, lead) if not claims.empty and lead is not None else ""
    if converging:
        sentences.append({"topic": "convergence", "level": "", "text": converging})
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
        if factor == "dimension":  # nothing learned differently: what the width alone does to the measure
            text = (f"The dimension placebo, the reference seeds reduced by {level} and scored as a level "
                    f"({rows['models'].iloc[0]}), keeps {shares} of the similarity seed siblings share ({lead}; 0 = "
                    f"the floor, 1 = another seed; {basis}): what the width alone does to this measure.")
        else:
            text = (f"Changing {FACTOR_PHRASES.get(factor, factor)} to {level} ({rows['models'].iloc[0]}) keeps "
                    f"{shares} of the similarity seed siblings share ({lead}; 0 = the floor, 1 = another seed; "
                    f"{basis}).")
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
        if senses is not None and len(senses):
            by_sense = sense_sentence(senses, factor, level)
            text += f" {by_sense}" if by_sense else ""
        match = rows["competence_match"].iloc[0]
        if match:  # the level at the checkpoint nearest the reference's competence (or the note that it is final)
            text += f" Competence {match}."
        confound = rows["also_changes"].iloc[0]
        if confound:  # a declared confound (reprsim.design.relations.CONFOUNDS): the level is not one change
            text += (f" This level changes {confound} as well: its u is that of both changes together, not of the "
                     f"{FACTOR_PHRASES.get(factor, factor)} alone.")
        note = rows["quality_note"].iloc[0]
        if note.startswith(("better", "worse")):
            text += f" Its fit ({rows['quality_metric'].iloc[0]}) is {note}."
        first = rows.iloc[0]
        if np.isfinite(first["probe_accuracy"]):  # the shared yardstick: comparable across objectives and data
            text += (f" On the shared probe its best layer decodes the labels at {first['probe_accuracy']:.2f} (the "
                     f"seeds {first['probe_reference_low']:.2f}–{first['probe_reference_high']:.2f}, chance "
                     f"{first['probe_chance']:.2f}): {first['probe_note']}.")
        sentences.append({"topic": factor, "level": level, "text": text})
    left_out = table.loc[table["grounding_failed"] != "", ["measure", "grounding_failed"]].drop_duplicates()
    if not left_out.empty:
        sentences.append({"topic": "grounding", "level": "", "text": "Left out of these statements, having failed a "
                          "grounding test on these models: " + "; ".join(
                              f"{r.measure} ({r.grounding_failed})" for r in left_out.itertuples()) + "."})
    return pd.DataFrame(sentences, columns=["topic", "level", "text"])
