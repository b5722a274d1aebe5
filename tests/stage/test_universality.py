"""The universality stage's arithmetic on synthetic representations with known answers (numerics.md §13c): a
variant that is an orthogonal map of the shared signal plus a seed's own noise keeps u ≈ 1 under rotation-invariant
measures, one of fresh noise u ≈ 0; the seed placebo is 1 with an interval around it; a level whose seeds differ far
more than the reference's is "as similar as seeds" on its rows and inconclusive once its seeds are resampled;
verdicts are tests at and across the margin; every term on the same rows; depths meet without ties."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from universality_study import pair_tables

from reprsim.design.relations import study_errors, study_pairs
from reprsim.guide import recorded_run
from reprsim.stages.universality.shares import check_same_rows, depth_groups, verdict
from reprsim.stages.universality.statement import statement
from reprsim.stages.universality.study import PLACEBO, Study
from reprsim.stages.universality.tables import universality_tables
from reprsim.tables.layers import matching_weights

N, D, LAYERS, RESAMPLES = 240, 12, 3, 20


def _layers(signal: np.ndarray, rng: np.random.Generator, fresh: bool = False, noise: float = 0.6) -> np.ndarray:
    """(LAYERS + 1, N, D): layer l carries the shared signal through a random orthogonal map plus this model's own
    noise (a model of `fresh` noise carries no signal)."""
    out = []
    for layer in range(LAYERS + 1):
        rotation = np.linalg.qr(rng.normal(size=(D, D)))[0]
        base = rng.normal(size=(N, D)) if fresh else signal[layer] @ rotation
        out.append(base + noise * rng.normal(size=(N, D)))
    return np.stack(out).astype(np.float32)


def _tables(models: dict[str, np.ndarray], measures: dict[str, tuple[str, dict]], rows=None):
    """Every pair's table and replicates, each model with itself too."""
    names = sorted(models)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i:]]
    return pair_tables(models, pairs, measures, resamples=RESAMPLES, rows=rows)


@pytest.fixture(scope="module")
def synthetic():
    rng = np.random.default_rng(0)
    signal = rng.normal(size=(LAYERS + 1, N, D))
    models = {f"ref-s{s}": _layers(signal, rng) for s in range(3)}
    models["same-s3"] = _layers(signal, rng)  # an orthogonal map of the signal plus a seed's own noise
    models["noise-s4"] = _layers(signal, rng, fresh=True)
    models["floor-s9"] = _layers(signal, rng, fresh=True)
    models["floor-s10"] = _layers(signal, rng, fresh=True)
    specs = {name: {"source": "init", "seed": int(name.rsplit("s", 1)[1])} for name in models}
    for name in ("same-s3", "noise-s4"):
        specs[name]["config"] = {"n_embd": 24}
    measures = {"linear_cka": ("cka", {"kernel": "linear", "estimator": "biased"}),
                "procrustes": ("procrustes", {})}
    pairs, replicates = _tables(models, measures)
    study = Study(reference=["ref-s0", "ref-s1", "ref-s2"], floor=["floor-s9", "floor-s10"],
                  factors={"width": {"rotated": ["same-s3"], "noise": ["noise-s4"]}}, margin=0.1, confidence=0.95,
                  specs=specs, measures={"linear_cka": "cka", "procrustes": "procrustes"})
    return pairs, replicates, study, models, measures


def test_a_rotated_copy_with_a_seeds_own_noise_keeps_u_near_one_and_fresh_noise_near_zero(synthetic):
    pairs, replicates, study, _, _ = synthetic
    table, *_ = universality_tables(pairs, replicates, study, metas={})
    thirds = table[table["depth"].str.endswith("third")]
    rotated = thirds[thirds["level"] == "rotated"]
    noise = thirds[thirds["level"] == "noise"]
    assert np.allclose(rotated["u"], 1, atol=0.12), rotated[["measure", "depth", "u"]]
    assert np.allclose(noise["u"], 0, atol=0.12), noise[["measure", "depth", "u"]]
    assert (noise["verdict"] == "no more similar than the floor").all()
    assert (rotated["ci_low"] <= rotated["u"]).all() and (rotated["u"] <= rotated["ci_high"]).all()
    assert set(table["depth"]) == {"lower third", "middle third", "upper third", *(f"layer {l}" for l in range(4))}
    levels = table[table["factor"] != PLACEBO[0]]
    assert (table["n"] == N).all() and (table["n_seed_pairs"] == 3).all() and (levels["n_variant_pairs"] == 3).all()
    assert (levels["interval_basis"] == "rows only").all()  # one model per level: its verdict rests on the rows
    sentences = statement(table, pd.DataFrame(), study).set_index("topic")
    assert sentences.loc["width", "text"].str.contains("keeps").all()
    assert sentences.loc["width", "text"].str.contains("rows only: one model").all()


def test_the_seed_placebo_is_one_and_its_seeds_and_rows_interval_contains_it(synthetic):
    pairs, replicates, study, _, _ = synthetic
    table, *_ = universality_tables(pairs, replicates, study, metas={})
    placebo = table[table["factor"] == PLACEBO[0]]
    assert len(placebo) == len(depth_groups(LAYERS)) * 2 and (placebo["n_variant_pairs"] == 6).all()
    assert np.allclose(placebo["u"], 1, atol=1e-12)  # its variant term is the seed term: the same couples
    assert (placebo["interval_basis"] == "seeds and rows").all()
    assert ((placebo["ci_low"] < 1) & (1 < placebo["ci_high"])).all()
    # seeds add variance: never narrower than the rows alone
    for frame in (placebo, table[table["factor"] != PLACEBO[0]]):
        assert ((frame["seeds_ci_high"] - frame["seeds_ci_low"]) >= (frame["rows_ci_high"] - frame["rows_ci_low"])
                ).all()
    sentences = statement(table, pd.DataFrame(), study)
    assert "resolves u to about ±" in sentences.set_index("topic").loc[PLACEBO[0], "text"]
    # what the guide quotes of a recorded study: the same checks, counted from the table
    checks = recorded_run.universality_summary(table, sentences)["checks"]
    assert checks["placebo_contains_one"] == checks["placebo_cells"] == 2 * 3
    assert checks["seeds_at_least_as_wide"] == checks["cells_with_seeds"] > 0
    assert checks["floor_within_margin"] == checks["floor_verdicts"]


def test_seeds_that_differ_far_more_than_the_references_leave_a_rows_only_verdict_inconclusive():
    """Three level seeds: one with little noise (more alike the reference than its seeds are), one with much,
    one as the reference's; their mean is the seeds' similarity, so on the rows u ≈ 1 is "as similar as seeds",
    but another three seeds of that recipe could land anywhere between: resampled, inconclusive."""
    rng = np.random.default_rng(3)
    signal = rng.normal(size=(LAYERS + 1, N, D))
    models = {f"ref-s{s}": _layers(signal, rng) for s in range(3)}
    for seed, noise in zip((3, 4, 5), (0.25, 0.6, 0.97)):
        models[f"spread-s{seed}"] = _layers(signal, rng, noise=noise)
    models["floor-s9"], models["floor-s10"] = _layers(signal, rng, fresh=True), _layers(signal, rng, fresh=True)
    specs = {name: {"source": "init", "seed": int(name.rsplit("s", 1)[1])} for name in models}
    measures = {"linear_cka": ("cka", {"kernel": "linear", "estimator": "biased"})}
    pairs, replicates = _tables(models, measures)
    study = Study(reference=["ref-s0", "ref-s1", "ref-s2"], floor=["floor-s9", "floor-s10"],
                  factors={"width": {"spread": ["spread-s3", "spread-s4", "spread-s5"]}}, margin=0.1,
                  confidence=0.95, specs=specs, measures={"linear_cka": "cka"})
    table, *_ = universality_tables(pairs, replicates, study, metas={})
    middle = table[(table["level"] == "spread") & (table["depth"] == "middle third")].iloc[0]
    assert verdict(middle["rows_ci_low"], middle["rows_ci_high"], 0.1) == "as similar as seeds", middle
    assert middle["interval_basis"] == "seeds and rows" and middle["verdict"] == "inconclusive", middle


def test_depths_meet_without_ties():
    """Reference layer 1 of 4 meets a 2-block model half at its embeddings, half at its first block (rounding
    half to even met the embeddings alone); whole relative depths meet one layer; weights sum to 1."""
    assert matching_weights(1, 4, 2) == [(0, 0.5), (1, 0.5)]
    assert matching_weights(2, 4, 2) == [(1, 1.0)]
    assert matching_weights(3, 4, 8) == [(6, 1.0)]
    assert matching_weights(1, 5, 2) == [(0, 0.6), (1, 0.4)]
    for depth_from, depth_to in ((4, 2), (5, 3), (6, 8)):
        for layer in range(depth_from + 1):
            weights = matching_weights(layer, depth_from, depth_to)
            assert sum(w for _, w in weights) == pytest.approx(1)
            assert sum(l * w for l, w in weights) == pytest.approx(layer * depth_to / depth_from)
    assert [len(layers) for name, layers in depth_groups(5).items() if name.endswith("third")] == [2, 2, 2]


@pytest.mark.parametrize("low, high, expected", [
    (0.9, 1.1, "as similar as seeds"),  # at the margin's ends
    (0.89, 1.05, "inconclusive"),  # across 1 − δ
    (0.5, 0.899, "less similar"),
    (0.101, 0.5, "less similar"),  # clear of δ
    (-0.1, 0.1, "no more similar than the floor"),  # an equivalence test: within [−δ, δ]
    (-0.05, 0.3, "inconclusive"),  # contains 0 but reaches past δ: absence of evidence is not a verdict
    (0.01, 0.1, "no more similar than the floor"),
    (0.05, 0.5, "inconclusive"),  # below 1 − δ, not clear of δ
    (-0.5, -0.11, "less similar than the floor"),
    (1.11, 1.3, "more similar than seeds"),
    (np.nan, 1.0, "undefined"),
])
def test_verdicts_at_and_across_each_margin(low, high, expected):
    assert verdict(low, high, 0.1) == expected


def test_terms_on_different_rows_are_refused(synthetic):
    _, _, study, models, measures = synthetic
    pairs, replicates = _tables({k: models[k] for k in ("ref-s0", "ref-s1")}, {"linear_cka": measures["linear_cka"]},
                                rows={("ref-s0", "ref-s1"): N - 40})
    with pytest.raises(ValueError, match="different rows"):
        check_same_rows(pairs, replicates, "measure 'linear_cka'")


def test_a_variant_differing_in_two_factors_is_refused_naming_both():
    base = {"source": "pretrain", "dataset": "sst2", "tokenizer": "floor", "config": {"n_embd": 64, "n_layer": 2},
            "steps": 100}
    specs = {"floor": {"source": "init", "tokenizer": {"train": {"dataset": "sst2"}}, "seed": 9},
             "r0": {**base, "seed": 0}, "r1": {**base, "seed": 1},
             "wide": {**base, "config": {"n_embd": 128, "n_layer": 2}, "seed": 2},
             "wide_deep": {**base, "config": {"n_embd": 128, "n_layer": 3}, "learning_rate": 1e-3, "seed": 3}}
    study = {"reference": ["r0", "r1"], "floor": ["floor"],
             "factors": {"width": {"128": ["wide"], "128 and deeper": ["wide_deep"]}}}
    problems = study_errors(specs, study)
    assert len(problems) == 1
    assert "wide_deep" in problems[0] and "config.n_layer (depth" in problems[0] and "learning_rate" in problems[0]
    assert ("r0", "wide") in study_pairs(specs, study) and ("r1", "r0") not in study_pairs(specs, study)


def test_a_berts_masked_lm_is_an_objective_level_that_says_it_changes_the_architecture_too():
    """A masked LM in the causal model's own blocks changes the objective only; a BERT's (blocks bert) is accepted
    as an objective level only, and its cells and sentence say that it changes the architecture as well."""
    from universality_study import MEASURE_SPECS, REFERENCE, models_and_specs

    models, specs = models_and_specs()
    specs["gpt-mlm-s3"] = {**specs["masked-s3"], "objective": "masked"}
    specs["masked-s3"] = {**specs["masked-s3"], "objective": "masked", "blocks": "bert"}
    factors = {"objective": {"masked LM": ["gpt-mlm-s3"], "masked LM (BERT)": ["masked-s3"]}}
    raw = {"reference": REFERENCE, "floor": ["floor-s9"], "factors": factors}
    assert study_errors(specs, raw) == []
    refused = study_errors(specs, {**raw, "factors": {"data": {"BERT": ["masked-s3"]}}})
    assert len(refused) == 1 and "blocks (allowed with objective only: None -> \"bert\")" in refused[0]
    study = Study(reference=REFERENCE, floor=["floor-s9"], factors=factors, margin=0.1, confidence=0.95, specs=specs,
                  measures={"linear_cka": "cka"})
    models["gpt-mlm-s3"] = models["masked-s3"]
    table, replicates = pair_tables(models, study_pairs(specs, raw), {"linear_cka": MEASURE_SPECS["linear_cka"]})
    tables = universality_tables(table, replicates, study, metas={})
    said = tables.universality.drop_duplicates("level").set_index("level")["also_changes"]
    assert said["masked LM"] == "" and said["masked LM (BERT)"] == (
        "the architecture (a BERT's blocks: post-LayerNorm, token types): blocks gpt2 -> bert")
    sentences = statement(tables.universality, tables.claims, study).set_index("level")["text"]
    assert "This level changes the architecture" in sentences["masked LM (BERT)"]
    assert "not of the objective alone" in sentences["masked LM (BERT)"]
    assert "architecture" not in sentences["masked LM"]


def test_a_level_with_checkpoints_is_also_compared_where_its_competence_matches_the_references():
    """A width level that saved checkpoints at steps 100 and 200 is compared again at the one whose probe accuracy
    is nearest the reference seeds' (step 200: 0.79 against 0.80; the final model decodes 0.90): its pairs are
    planned, it is a level of its own (appended after every level), the sentences say what was matched, and its
    functional cell says why it is not stitched. Where the final model is nearest, no level is added."""
    from universality_study import MEASURE_SPECS, REFERENCE, _model, models_and_specs

    models, specs = models_and_specs()
    rng = np.random.default_rng(7)
    signal = np.random.default_rng(0).normal(size=models["ref-s0"].shape)  # models_and_specs's shared signal
    specs["wide-s3"] = {**specs["wide-s3"], "checkpoints": [100, 200]}
    for step, strength in ((100, 0.5), (200, 0.8)):
        models[f"wide-s3@{step}"] = _model(signal, rng, strength)
        specs[f"wide-s3@{step}"] = {**specs["ref-s0"], "seed": 3, "checkpoint": step}
    factors = {"width": {"n_embd 24": ["wide-s3"]}}
    raw = {"reference": REFERENCE, "floor": ["floor-s9"], "factors": factors}
    planned = study_pairs(specs, raw)
    assert {("ref-s0", "wide-s3@200"), ("ref-s2", "wide-s3@100")} <= set(planned)
    study = Study(reference=REFERENCE, floor=["floor-s9"], factors=factors, margin=0.1, confidence=0.95, specs=specs,
                  measures={"linear_cka": "cka"})
    table, replicates = pair_tables(models, planned, {"linear_cka": MEASURE_SPECS["linear_cka"]})
    accuracy = {**{r: 0.80 for r in REFERENCE}, "floor-s9": 0.5, "wide-s3": 0.90, "wide-s3@100": 0.60,
                "wide-s3@200": 0.79}
    competence = {m: {"accuracy": a, "chance": 0.5} for m, a in accuracy.items()}
    tables = universality_tables(table, replicates, study, metas={}, competence=competence)
    matched = "n_embd 24, step 200 (competence matched)"
    levels = list(dict.fromkeys(tables.universality["level"]))
    assert levels[-1] == matched and "n_embd 24" in levels
    row = tables.universality[tables.universality["level"] == matched].iloc[0]
    assert row["models"] == "wide-s3@200" and row["factor"] == "width" and row["probe_accuracy"] == 0.79
    assert row["competence_match"] == ("matched on the shared probe's accuracy: at step 200 of 400 0.790, the "
                                       "reference seeds 0.800, the final models 0.900")
    sentences = statement(tables.universality, tables.claims, study).set_index("level")["text"]
    assert f"compared there as level '{matched}'" in sentences["n_embd 24"]
    function = tables.senses[(tables.senses["level"] == matched) & (tables.senses["sense"] == "function")]
    assert (function["verdict"] == "not measured").all()
    competence["wide-s3"] = {"accuracy": 0.80, "chance": 0.5}
    again = universality_tables(table, replicates, study, metas={}, competence=competence)
    assert matched not in set(again.universality["level"])
    assert again.universality["competence_match"].str.endswith("the final models are the nearest").any()


def test_convergence_is_stated_against_competence_on_the_shared_probe():
    """Cross-seed similarity rises over the checkpoints (the signal at strength 0.5, 0.8, then 1), so its Spearman ρ
    with the shared probe's accuracy is +1 in every third where accuracy rises with it, −1 where it falls; a stage
    whose models were not probed leaves the claim out."""
    from universality_study import FACTORS, MEASURE_SPECS, REFERENCE, models_and_specs

    models, specs = models_and_specs()
    factors = {"training_time": FACTORS["training_time"]}
    study = Study(reference=REFERENCE, floor=["floor-s9"], factors=factors, margin=0.1, confidence=0.95, specs=specs,
                  measures={"linear_cka": "cka"})
    pairs = study_pairs(specs, {"reference": REFERENCE, "floor": ["floor-s9"], "factors": factors})
    table, replicates = pair_tables(models, pairs, {"linear_cka": MEASURE_SPECS["linear_cka"]})
    stages = {25: 0.55, 100: 0.60, 400: 0.62}  # each stage's probe accuracy, rising with the step
    rising = {(f"ref-s{s}@{step}" if step != 400 else f"ref-s{s}"): {"accuracy": accuracy, "chance": 0.5}
              for step, accuracy in stages.items() for s in range(3)}
    falling = {model: {**entry, "accuracy": 1.2 - entry["accuracy"]} for model, entry in rising.items()}
    for competence, expected in ((rising, 1.0), (falling, -1.0)):
        tables = universality_tables(table, replicates, study, metas={}, competence=competence)
        claims = tables.claims[tables.claims["depth"].str.endswith("third")]
        rho = claims[claims["statistic"] == "spearman_rho_competence"]
        assert len(rho) == 3 and (rho["estimate"] == expected).all()
        thirds = tables.convergence[tables.convergence["depth"].str.endswith("third")]
        assert sorted(set(thirds["probe_accuracy"].round(2))) == sorted({round(a if expected > 0 else 1.2 - a, 2)
                                                                          for a in stages.values()})
    text = statement(tables.universality, tables.claims, study)["text"].str.cat(sep=" ")
    assert "Spearman ρ with the shared probe's accuracy rising: -1.00" in text
    unprobed = {model: entry for model, entry in rising.items() if not model.endswith("@25")}
    claims = universality_tables(table, replicates, study, metas={}, competence=unprobed).claims
    assert "spearman_rho_competence" not in set(claims["statistic"])
