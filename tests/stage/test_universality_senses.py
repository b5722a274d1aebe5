"""The universality study per sense of similarity (reprsim.design.senses, the stage's sense table) on constructed
representations whose answer is known: the reference seeds share units (a signal in the units' own basis, each seed
with its own noise), and a rotated copy of a seed-like model keeps every rotation-invariant relation while mixing
every unit. It is as similar as seeds in the geometric and the linear senses, and not in the units sense; the
statement's words per sense agree with the table's verdicts."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from universality_study import pair_tables

from reprsim.design.senses import AGAINST_IDENTITY, ANSWER_TOPICS, SEEDS_ROW, SENSES
from reprsim.inference.resampling import half_samples
from reprsim.stages.universality.shares import Terms, pooled, share
from reprsim.stages.universality.statement import statement
from reprsim.stages.universality.study import Study
from reprsim.stages.universality.tables import universality_tables
from reprsim.tables.universality import FACTOR_PHRASES, THIRDS

N, D, LAYERS, RESAMPLES, NOISE = 400, 8, 2, 20, 0.5
MEASURES = {"linear_cka": ("cka", {"kernel": "linear", "estimator": "biased"}), "procrustes": ("procrustes", {}),
            "cca": ("cca", {}), "neuronsim": ("neuronsim", {}), "hard_match": ("hard_correlation_match", {})}
SENSE = {"linear_cka": "geometry", "procrustes": "geometry", "cca": "linear", "neuronsim": "units",
         "hard_match": "units"}


def _model(signal: np.ndarray, rng: np.random.Generator, *, shared: bool = True, rotate: bool = False) -> np.ndarray:
    """(LAYERS + 1, N, D): each layer the signal in the units' basis (or fresh noise, for the floor) plus this
    model's own noise; `rotate`: the whole layer through a random orthogonal map, which mixes every unit."""
    out = []
    for layer in range(LAYERS + 1):
        base = signal[layer] if shared else rng.normal(size=(N, D))
        x = base + NOISE * rng.normal(size=(N, D))
        if rotate:
            x = x @ np.linalg.qr(rng.normal(size=(D, D)))[0]
        out.append(x)
    return np.stack(out).astype(np.float32)


@pytest.fixture(scope="module")
def tables():
    rng = np.random.default_rng(1)
    # units of unequal variance: a rotation then mixes units of different roles, not merely equal ones
    signal = rng.normal(size=(LAYERS + 1, N, D)) * np.linspace(0.5, 2.0, D)
    models = {f"ref-s{s}": _model(signal, rng) for s in range(3)}
    models["rotated-s3"] = _model(signal, rng, rotate=True)
    models["floor-s9"] = _model(signal, rng, shared=False)
    models["floor-s10"] = _model(signal, rng, shared=False)
    names = sorted(models)
    pairs, replicates = pair_tables(models, [(a, b) for i, a in enumerate(names) for b in names[i + 1:]], MEASURES,
                                    resamples=RESAMPLES)
    specs = {name: {"source": "init", "seed": int(name.rsplit("s", 1)[1])} for name in models}
    study = Study(reference=["ref-s0", "ref-s1", "ref-s2"], floor=["floor-s9", "floor-s10"],
                  factors={"width": {"rotated": ["rotated-s3"]}}, margin=0.1, confidence=0.95, specs=specs,
                  measures={label: name for label, (name, _) in MEASURES.items()},
                  params={label: params for label, (_, params) in MEASURES.items()})
    return universality_tables(pairs, replicates, study, metas={})


def test_the_table_has_every_sense_for_every_level_and_third(tables):
    senses = tables.senses
    assert set(senses["sense"]) == set(SENSES)
    levels = {(SEEDS_ROW[0], SEEDS_ROW[1]), ("placebo", "another reference seed"), ("width", "rotated")}
    assert set(zip(senses["factor"], senses["level"])) == levels
    assert len(senses) == len(levels) * len(SENSES) * 3
    for sense, expected in (("units", {"neuronsim", "hard_match"}), ("geometry", {"linear_cka", "procrustes"}),
                            ("linear", {"cca"})):
        used = senses.loc[senses["sense"] == sense, "measures"]
        assert all(set(value.split(", ")) == expected for value in used), (sense, used.tolist())
    unmeasured = senses[senses["sense"].isin(["ranks", "neighbourhoods", "function"])]
    assert (unmeasured["verdict"] == "not measured").all() and unmeasured["u"].isna().all()
    assert unmeasured["left_out"].str.len().gt(0).all()  # each says why


def test_a_rotated_copy_is_as_similar_as_seeds_in_geometry_and_linear_but_not_in_units(tables):
    cells = tables.senses[tables.senses["level"] == "rotated"].set_index(["sense", "depth"])
    for third in ("lower third", "middle third", "upper third"):
        for sense in ("geometry", "linear"):
            cell = cells.loc[(sense, third)]
            assert cell["verdict"] == "as similar as seeds", (sense, third, cell[["u", "ci_low", "ci_high"]].tolist())
        units = cells.loc[("units", third)]
        assert units["verdict"] in ("less similar", "no more similar than the floor"), units.tolist()
        assert units["ci_high"] < 0.9


def test_a_pooled_sense_is_the_mean_of_its_measures_u(tables):
    per_measure = tables.universality
    senses = tables.senses
    for third in ("lower third", "upper third"):
        mine = per_measure[(per_measure["level"] == "rotated") & (per_measure["depth"] == third)].set_index("measure")
        for sense in ("geometry", "units"):
            labels = [label for label, s in SENSE.items() if s == sense]
            cell = senses[(senses["level"] == "rotated") & (senses["sense"] == sense) & (senses["depth"] == third)]
            assert cell["u"].iloc[0] == pytest.approx(mine.loc[labels, "u"].mean(), rel=1e-9, abs=1e-12)


def test_seed_siblings_are_near_identical_in_the_units_sense_and_short_of_it_by_their_noise(tables):
    seeds = tables.senses[tables.senses["factor"] == SEEDS_ROW[0]].set_index(["sense", "depth"])
    units = seeds.loc[("units", "middle third")]
    assert units["interval_basis"] == "seeds and rows"
    # every seed carries noise of its own: not identical, yet far above the floor
    assert 0.3 < units["ci_low"] and units["ci_high"] < 1


def test_pooling_one_measure_is_that_measure():
    rng = np.random.default_rng(0)
    layers = np.array([0, 1])

    def term(level: float) -> tuple[np.ndarray, np.ndarray]:
        return level + 0.01 * rng.normal(size=3), level + 0.01 * rng.normal(size=(30, 3))

    groups = [((0.5 + 0.05 * rng.normal(size=(50, 3)), 0.9 + 0.05 * rng.normal(size=(50, 3)),
                0.1 + 0.05 * rng.normal(size=(50, 3))), 3, True)]
    one = Terms(term(0.5), term(0.9), term(0.1), groups)
    alone = share(one.variant, one.seeds, one.floor, layers, 200, 100, 0.95, 0.1, one.seed_draws)
    together = pooled([one], layers)
    scaled = share(together.variant, together.seeds, together.floor, layers, 200, 100, 0.95, 0.1,
                   together.seed_draws)
    for key in ("u", "ci_low", "ci_high", "rows_ci_low", "rows_ci_high", "seeds_ci_low", "seeds_ci_high"):
        assert scaled[key] == pytest.approx(alone[key], rel=1e-9), key
    assert scaled["verdict"] == alone["verdict"] and np.isfinite(alone["ci_low"])
    # measures with fewer replicates pool over their common first ones: the same half-samples at any count
    assert np.array_equal(half_samples(100, 30)[:20], half_samples(100, 20))


def contradictions(sentences: pd.DataFrame, senses: pd.DataFrame) -> list[str]:
    """Every claim of a sentence's "In which sense:" part that the sense table does not bear out: for each sense it
    names, the verdict it gives each third (one for every third, or third by third) against the table's."""
    found = []
    words = {value: key for key, value in AGAINST_IDENTITY.items()}
    for sentence in sentences.itertuples():
        if "In which sense: " not in sentence.text:
            continue
        cells = senses[(senses["factor"] == sentence.topic) & (senses["level"] == sentence.level)]
        said = sentence.text.split("In which sense: ", 1)[1].split(". ")[0].rstrip(".")
        for part in said.split("; "):
            sense = re.search(r"\((\w+)\): ", part).group(1)
            claim = re.sub(r" \(middle: u = [^)]*\)", "", part.split("): ", 1)[1])
            claimed = ({d: claim.removesuffix(" in every third") for d in THIRDS} if claim.endswith("every third")
                       else {f"{d} third": v for v, d in re.findall(r"(.+?) in the (\w+)(?:, |$)", claim)})
            for depth, verdict in claimed.items():
                actual = cells[(cells["sense"] == sense) & (cells["depth"] == depth)]["verdict"]
                if actual.empty or words.get(verdict, verdict) != actual.iloc[0]:
                    found.append(f"{sentence.topic}: {sentence.level}, {sense}, {depth}: says {verdict!r}, the table "
                                 f"{actual.iloc[0] if len(actual) else 'nothing'!r}")
    return found


def _claimed(claim: str) -> dict[str, str]:
    """third -> verdict of a claim written as "v in every third" or "v in the lower, w in the middle, ..." (its
    middle third's u in parentheses dropped)."""
    claim = re.sub(r" \(middle: u = [^)]*\)", "", claim)
    if claim.endswith("every third"):
        return {d: claim.removesuffix(" in every third") for d in THIRDS}
    return {f"{d} third": v for v, d in re.findall(r"(.+?) in the (\w+)(?:, |$)", claim)}


def answer_contradictions(sentences: pd.DataFrame, senses: pd.DataFrame) -> list[str]:
    """Every claim of an answer per sense (topic "sense") that the sense table does not bear out: each level it
    names, the verdict it gives each third, against the table's; and every level measured in that sense that it
    leaves out."""
    names = {f"{FACTOR_PHRASES.get(f, f)} {level}": (f, level) for f, level in zip(senses["factor"], senses["level"])}
    found = []
    for sentence in sentences[sentences["topic"] == "sense"].itertuples():
        sense, said = sentence.level, sentence.text.split(")? ", 1)[1].rstrip(".")
        named = set()
        for part in [part for part in said.split("; ") if part]:
            name, claim = part.split(": ", 1)
            factor, level = names[name]
            named.add((factor, level))
            cells = senses[(senses["factor"] == factor) & (senses["level"] == level) & (senses["sense"] == sense)]
            for depth, verdict in _claimed(claim).items():
                actual = cells.loc[cells["depth"] == depth, "verdict"]
                if actual.empty or verdict != actual.iloc[0]:
                    found.append(f"{sense}: {name}, {depth}: says {verdict!r}, the table "
                                 f"{actual.iloc[0] if len(actual) else 'nothing'!r}")
        measured = senses[(senses["sense"] == sense) & (senses["verdict"] != "not measured")
                          & ~senses["factor"].isin([SEEDS_ROW[0], "placebo"])]
        found += [f"{sense}: {factor} {level} measured but not said" for factor, level in
                  dict.fromkeys(zip(measured["factor"], measured["level"])) if (factor, level) not in named]
    return found


def test_the_answer_is_at_most_ten_sentences_and_none_contradicts_the_table(tables):
    study = Study(reference=["ref-s0", "ref-s1", "ref-s2"], floor=["floor-s9", "floor-s10"],
                  factors={"width": {"rotated": ["rotated-s3"]}}, margin=0.1, confidence=0.95, specs={},
                  measures={label: name for label, (name, _) in MEASURES.items()})
    sentences = statement(tables.universality, tables.claims, study, tables.senses, tables.controls)
    answers = sentences[sentences["topic"].isin(ANSWER_TOPICS)]
    assert 1 <= len(answers) <= 10 and list(sentences.index[:len(answers)]) == list(answers.index)  # they lead
    assert set(answers.loc[answers["topic"] == "sense", "level"]) == {"units", "geometry", "linear"}
    geometry = answers.set_index(["topic", "level"]).loc[("sense", "geometry"), "text"]
    assert geometry.startswith("Does a change of one factor keep the same geometry, up to a rotation (geometry; ")
    assert "width rotated: as similar as seeds in every third" in geometry
    assert not answer_contradictions(sentences, tables.senses)
    # the check can fail: a changed verdict, and a level left out of the sentence, are both caught
    tampered = tables.senses.copy()
    cell = (tampered["level"] == "rotated") & (tampered["sense"] == "units") & (tampered["depth"] == "lower third")
    actual = tampered.loc[cell, "verdict"].iloc[0]
    tampered.loc[cell, "verdict"] = "more similar than seeds"
    assert answer_contradictions(sentences, tampered) == [
        f"units: width rotated, lower third: says {actual!r}, the table 'more similar than seeds'"]
    dropped = sentences.copy()
    dropped.loc[(dropped["topic"] == "sense") & (dropped["level"] == "linear"), "text"] = (
        "Does a change of one factor keep the same linearly decodable information (linear; u = 1)? .")
    assert answer_contradictions(dropped, tables.senses) == ["linear: width rotated measured but not said"]


def test_no_sentence_contradicts_a_verdict_of_the_sense_table(tables):
    study = Study(reference=["ref-s0", "ref-s1", "ref-s2"], floor=["floor-s9", "floor-s10"],
                  factors={"width": {"rotated": ["rotated-s3"]}}, margin=0.1, confidence=0.95, specs={},
                  measures={label: name for label, (name, _) in MEASURES.items()})
    sentences = statement(tables.universality, tables.claims, study, tables.senses)
    by_sense = sentences[sentences["text"].str.contains("In which sense: ")]
    assert set(by_sense["topic"]) == {SEEDS_ROW[0], "width"}
    assert not contradictions(sentences, tables.senses)
    rotated = by_sense.set_index("topic").loc["width", "text"]
    assert "the same geometry, up to a rotation (geometry): as similar as seeds in every third" in rotated
    # the check can fail: a table whose verdict differs from the sentence's is caught
    tampered = tables.senses.copy()
    cell = (tampered["level"] == "rotated") & (tampered["sense"] == "linear") & (tampered["depth"] == "upper third")
    tampered.loc[cell, "verdict"] = "inconclusive"
    assert contradictions(sentences, tampered) == [
        "width: rotated, linear, upper third: says 'as similar as seeds', the table 'inconclusive'"]
