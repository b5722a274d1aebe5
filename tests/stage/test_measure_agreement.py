"""Agreement between measures, discordant orderings and every finding under every measure, on constructed pair
tables: perfectly concordant, reversed and independent measures; discordance found only where both intervals
exclude 0; the k-of-K count and its sentence; a distance measure turned into a similarity; the grounding mark."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reprsim.stages.findings.agreement import measure_agreement, oriented, rank_agreement
from reprsim.stages.findings.by_measure import failed_grounding, findings_by_measure, summary, with_summary
from reprsim.stages.findings.claims import findings
from reprsim.stages.findings.context import Setup, Tables

N, R = 400, 30
KEYS = ["dataset", "representation", "model_a", "model_b", "layer_a", "layer_b"]


def init(seed, layers=4):
    return {"source": "init", "architecture": "bert", "tokenizer": "orig", "seed": seed,
            "config": {"hidden_size": 8, "num_hidden_layers": layers}}


def tables(measures: dict, depths: dict[str, int], noise: float = 0.002, seed: int = 0) -> Tables:
    """Pair tables of several measures: measures maps label -> (kind, direction(s), value(a, b, la, lb, direction)).
    Replicate r adds the same standard-normal draw z_r × noise to every cell (shared rows move every cell alike)
    plus an independent draw per cell."""
    rng = np.random.default_rng(seed)
    names = sorted(depths)
    shared = rng.normal(size=R)
    pair_rows, replicate_rows = [], []
    for label, (kind, directions, value) in measures.items():
        for i, a in enumerate(names):
            for b in names[i:]:
                for la in range(depths[a] + 1):
                    for lb in range(depths[b] + 1):
                        for direction in directions:
                            v = float(value(a, b, la, lb, direction))
                            key = {"dataset": "d", "representation": "mean", "model_a": a, "model_b": b,
                                   "layer_a": la, "layer_b": lb, "measure": label, "direction": direction}
                            pair_rows.append({**key, "kind": kind, "value": v, "n": N})
                            draws = v + noise * shared + noise * rng.normal(size=R)
                            replicate_rows += [{**key, "replicate": r, "value": draws[r], "n": N, "m": N // 2}
                                               for r in range(R)]
    return Tables(pairs=pd.DataFrame(pair_rows), replicates=pd.DataFrame(replicate_rows))


def closeness(a, b, la, lb, direction="symmetric"):
    """A similarity that falls with layer distance and is higher within the s-models than across."""
    base = 0.9 if (a[0] == b[0]) else 0.5
    return base - 0.1 * abs(la - lb)


DEPTHS = {"s0": 3, "s1": 3, "t0": 3}


# ------------------------------------------------------------------------------------------- rank agreement

def test_rank_agreement_of_concordant_reversed_and_independent_values():
    rng = np.random.default_rng(1)
    x = rng.normal(size=200)
    for statistic in ("kendall_tau_b", "spearman_rho"):
        assert rank_agreement(x, np.exp(x), statistic) == pytest.approx(1.0)
        assert rank_agreement(x, -x ** 3, statistic) == pytest.approx(-1.0)
        assert abs(rank_agreement(x, rng.normal(size=200), statistic)) < 0.2
    assert np.isnan(rank_agreement(x[:2], x[:2], "kendall_tau_b"))  # too few items
    assert np.isnan(rank_agreement(x, np.ones_like(x), "spearman_rho"))  # a constant side
    with pytest.raises(ValueError, match="unknown agreement statistic"):
        rank_agreement(x, x, "pearson")


def test_orientation_negates_distances_and_averages_directions():
    built = tables({
        "sim": ("similarity", ["symmetric"], closeness),
        "dist": ("distance", ["symmetric"], lambda *cell: 1 - closeness(*cell)),
        "asym": ("similarity", ["a->b", "b->a"], lambda a, b, la, lb, d: closeness(a, b, la, lb) + (0.02 if d == "a->b"
                                                                                                   else -0.02)),
    }, DEPTHS)
    series, replicate_series = oriented(built.pairs, built.replicates)
    wide = series.pivot_table(index=KEYS, columns="measure", values="value")
    assert np.allclose(wide["dist"], wide["sim"] - 1)  # −(1 − s)
    assert np.allclose(wide["asym"], wide["sim"])  # ±0.02 averaged away
    assert len(replicate_series) == len(series) * R
    # an undefined direction leaves the cell undefined (not the other direction alone)
    pairs = built.pairs.copy()
    pairs.loc[(pairs["measure"] == "asym") & (pairs["direction"] == "a->b"), "value"] = np.nan
    again, _ = oriented(pairs, built.replicates)
    assert again.loc[again["measure"] == "asym", "value"].isna().all()


def test_agreement_of_a_monotone_transform_a_reversal_and_noise():
    rng = np.random.default_rng(3)
    noise = {key: rng.normal() for key in [(a, b, la, lb) for a in DEPTHS for b in DEPTHS
                                           for la in range(4) for lb in range(4)]}
    built = tables({
        "sim": ("similarity", ["symmetric"], closeness),
        "dist": ("distance", ["symmetric"], lambda *cell: np.sqrt(2 - 2 * closeness(*cell))),  # monotone in sim
        "reversed": ("similarity", ["symmetric"], lambda *cell: -closeness(*cell) ** 3),
        "random": ("similarity", ["symmetric"], lambda a, b, la, lb, d: noise[(a, b, la, lb)]),
    }, DEPTHS)
    agreement, _ = measure_agreement(built.pairs, built.replicates, 0.95)
    cells = agreement[(agreement["scope"] == "cells") & (agreement["statistic"] == "kendall_tau_b")]
    value = {(row.measure_x, row.measure_y): row for row in cells.itertuples()}
    assert value[("sim", "dist")].estimate == pytest.approx(1.0)
    assert value[("sim", "reversed")].estimate == pytest.approx(-1.0)
    unrelated = value[("sim", "random")]
    assert abs(unrelated.estimate) < 0.25
    # every compared cell but a layer with itself: 3 model pairs × 16 layer pairs, 3 self pairs × 12
    assert unrelated.n_items == 3 * 16 + 3 * 12
    assert set(agreement["scope"]) == {"cells", "model pairs"}
    pairs_scope = agreement[agreement["scope"] == "model pairs"]
    assert set(pairs_scope["n_items"]) == {3}  # s0–s1, s0–t0, s1–t0
    assert (agreement["ci_low"] <= agreement["estimate"] + 1e-12).all()
    assert (agreement["estimate"] <= agreement["ci_high"] + 1e-12).all()


# ------------------------------------------------------------------------------------------- discordance

def _two_orderings(gap_x: float, gap_y: float, noise: float) -> Tables:
    """Measure x puts s0–s1 above s0–t0 by gap_x; measure y puts it below by gap_y."""
    def x(a, b, la, lb, d):
        return 0.5 + (gap_x if (a, b) == ("s0", "s1") else 0.0) - 0.05 * abs(la - lb)

    def y(a, b, la, lb, d):
        return 0.5 - (gap_y if (a, b) == ("s0", "s1") else 0.0) - 0.05 * abs(la - lb)
    depths = {"s0": 2, "s1": 2, "t0": 2}
    return tables({"x": ("similarity", ["symmetric"], x), "y": ("similarity", ["symmetric"], y)}, depths,
                  noise=noise)


def test_discordance_is_found_when_both_intervals_exclude_zero():
    built = _two_orderings(0.2, 0.3, noise=0.002)
    _, discordant = measure_agreement(built.pairs, built.replicates, 0.95)
    found = discordant[(discordant["pair_1"] == "s0 vs s1") & (discordant["pair_2"] == "s0 vs t0")]
    assert len(found) == 1
    row = found.iloc[0]
    assert row["difference_x"] == pytest.approx(0.2) and row["difference_y"] == pytest.approx(-0.3)
    assert row["x_low"] > 0 and row["y_high"] < 0 and row["strength"] > 1
    assert list(discordant["strength"]) == sorted(discordant["strength"], reverse=True)


def test_no_discordance_when_an_interval_contains_zero():
    built = _two_orderings(0.2, 0.0005, noise=0.05)  # y's difference is drowned by its replicates' spread
    _, discordant = measure_agreement(built.pairs, built.replicates, 0.95)
    assert discordant[(discordant["pair_1"] == "s0 vs s1") & (discordant["pair_2"] == "s0 vs t0")].empty


def test_concordant_measures_have_no_discordance():
    built = tables({"a": ("similarity", ["symmetric"], closeness),
                    "b": ("distance", ["symmetric"], lambda *cell: 2 - 3 * closeness(*cell))}, DEPTHS)
    _, discordant = measure_agreement(built.pairs, built.replicates, 0.95)
    assert discordant.empty


# ------------------------------------------------------------------------------------------- by measure

MODELS = {"s0": init(0), "s1": init(1), "t0": {**init(0), "config": {"hidden_size": 16, "num_hidden_layers": 4}}}


def _by_measure(built: Tables, measures: dict[str, str], grounding=None):
    setup = Setup(models={k: v for k, v in MODELS.items()}, measure="cka_a", confidence=0.95, resamples=R)
    main = findings(built, setup)
    return main, findings_by_measure(built, setup, measures, main, grounding)


def _depth_profiles() -> Tables:
    """Three measures on seed siblings s0, s1 (4 blocks): 'cka_a' and 'proc' (a distance) say adjacent layers are
    more alike than distant ones; 'flat' says the opposite."""
    def cka(a, b, la, lb, d):
        return 0.9 - 0.1 * abs(la - lb) - (0.05 if a != b else 0.0)

    def flat(a, b, la, lb, d):
        return 0.5 + 0.05 * abs(la - lb)
    return tables({"cka_a": ("similarity", ["symmetric"], cka),
                   "proc": ("distance", ["a->b", "b->a"], lambda *cell: 1.5 - cka(*cell)),
                   "flat": ("similarity", ["symmetric"], flat)}, {"s0": 4, "s1": 4})


def test_every_pair_claim_under_every_measure_and_the_k_of_k_count():
    measures = {"cka_a": "cka", "proc": "procrustes", "flat": "mutual_knn"}
    main, by_measure = _by_measure(_depth_profiles(), measures)
    adjacent = by_measure[by_measure["claim_id"] == "adjacent_layers"].set_index("measure")
    assert adjacent.loc["cka_a", "verdict"] == "supported" and adjacent.loc["proc", "verdict"] == "supported"
    assert adjacent.loc["flat", "verdict"] == "contradicted"
    assert adjacent.loc["proc", "estimate"] == pytest.approx(adjacent.loc["cka_a", "estimate"])  # 1.5 − cka, negated
    # the configured CKA reads the same numbers as the findings table
    first = main[main["claim_id"] == "adjacent_layers"].iloc[0]
    assert adjacent.loc["cka_a", "estimate"] == pytest.approx(first["estimate"])
    assert adjacent.loc["cka_a", "verdict"] == first["verdict"]
    assert adjacent.loc["proc", "family"] == "alignment" and adjacent.loc["flat", "family"] == "neighbourhood"
    table = with_summary(main, by_measure, measures)
    row = table[table["claim_id"] == "adjacent_layers"].iloc[0]
    assert row["holds_under"] == "2 of 3"
    assert row["across_measures"].startswith("supported under cka_a, proc; contradicted under flat")
    # a claim about function keeps its own statistic, not applicable claims have no count
    skip = table[table["claim_id"] == "skip_upper_cheaper"].iloc[0]
    assert skip["verdict"] == "not applicable" and skip["holds_under"] == ""


def test_a_whole_family_is_named_as_one_and_grounding_failures_are_marked():
    measures = {"cka_a": "cka", "cka_b": "cka", "flat": "mutual_knn"}
    built = _depth_profiles()
    extra = built.pairs[built.pairs["measure"] == "cka_a"].assign(measure="cka_b")
    extra_reps = built.replicates[built.replicates["measure"] == "cka_a"].assign(measure="cka_b")
    built = Tables(pairs=pd.concat([built.pairs, extra]), replicates=pd.concat([built.replicates, extra_reps]))
    grounding = pd.DataFrame([
        {"measure": "flat", "test": "monotonicity", "variant": "spearman", "score": -0.2, "beyond_chance": False},
        {"measure": "cka_a", "test": "monotonicity", "variant": "spearman", "score": 0.8, "beyond_chance": True},
        {"measure": "cka_b", "test": "deletion", "variant": "spearman", "score": float("nan"), "beyond_chance": False},
    ])
    _, by_measure = _by_measure(built, measures, grounding)
    assert set(by_measure.loc[by_measure["measure"] == "flat", "grounding_failed"]) == {"monotonicity:spearman"}
    assert set(by_measure.loc[by_measure["measure"] == "cka_b", "grounding_failed"]) == {""}  # no score: no failure
    sentences = summary(by_measure, measures).set_index("claim_id")["across_measures"]
    assert sentences["adjacent_layers"] == ("supported under every CKA measure (cka_a, cka_b); contradicted under "
                                            "flat (failed a grounding test here: flat)")


def test_a_grounding_failure_is_a_failed_decision_not_an_interval_at_chance():
    """Only decision "fail" fails a measure: a descriptive row, a test with too few items or one that cannot rank
    says nothing against it, whatever its interval; a pass needs the item-level null too."""
    rows = [("cka_a", "monotonicity", "spearman", 0.8, True, "fail"),  # interval above chance, null not cleared
            ("cka_a", "seeds", "d_prime", -0.5, False, "descriptive"),
            ("cka_a", "prediction", "accuracy", -0.2, False, "too few items"),
            ("cka_a", "deletion", "spearman", float("nan"), False, "cannot rank"),
            ("flat", "monotonicity", "spearman", 0.9, True, "pass"),
            ("flat", "seeds", "auprc", 0.3, False, "fail")]
    grounding = pd.DataFrame(rows, columns=["measure", "test", "variant", "score", "beyond_chance", "decision"])
    assert failed_grounding(grounding) == {"cka_a": ["monotonicity:spearman"], "flat": ["seeds:auprc"]}
    # a table from before the decisions: the interval alone
    assert failed_grounding(grounding.drop(columns="decision")) == {
        "cka_a": ["prediction:accuracy", "seeds:d_prime"], "flat": ["seeds:auprc"]}


def test_the_group_claim_uses_the_arccos_distance_for_cka_only():
    def value(a, b, la, lb, d):
        return 0.95 if a[0] == b[0] else 0.6
    built = tables({"cka_a": ("similarity", ["symmetric"], value),
                    "proc": ("distance", ["symmetric"], lambda *cell: 1 - value(*cell))}, DEPTHS)
    main, by_measure = _by_measure(built, {"cka_a": "cka", "proc": "procrustes"})
    groups = by_measure[by_measure["claim_id"] == "groups_closer_within"].set_index("measure")
    assert groups.loc["cka_a", "estimate"] == pytest.approx(np.arccos(0.6) - np.arccos(0.95))
    assert groups.loc["proc", "estimate"] == pytest.approx(0.95 - 0.6)
    assert "not the arccos" in groups.loc["proc", "reason"] and "not the arccos" not in groups.loc["cka_a", "reason"]
    assert (groups["verdict"] == "supported").all()


def test_one_measure_and_a_claim_about_function_are_worded_as_such():
    built = _depth_profiles()
    one = Tables(pairs=built.pairs[built.pairs["measure"] == "cka_a"],
                 replicates=built.replicates[built.replicates["measure"] == "cka_a"])
    main, by_measure = _by_measure(one, {"cka_a": "cka"})
    sentences = summary(by_measure, {"cka_a": "cka"}).set_index("claim_id")["across_measures"]
    assert sentences["adjacent_layers"] == "supported under cka_a, the one measure computed here"
    functional = by_measure.iloc[[0]].assign(claim_id="skip_upper_cheaper", measure="accuracy", family="",
                                             verdict="contradicted", grounding_failed="")
    sentence = summary(functional, {"cka_a": "cka"})["across_measures"].iloc[0]
    assert sentence == "contradicted under its own statistic (accuracy), which the similarity measures do not express"
