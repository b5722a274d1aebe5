"""The findings stage on constructed tables: each claim's verdict (supported, contradicted,
inconclusive) comes from where its interval lies, a claim the configuration cannot test is "not
applicable" with a reason, and the parquet and CSV say the same."""

from __future__ import annotations

import dataclasses

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
import yaml

from reprsim.config import validate_config
from reprsim.design.relations import finetuned_from, groups, seed_pairs
from reprsim.inference.resampling import interval
from reprsim.stages.findings.accuracy import finetuned_layers_carry_the_task, skip_upper_cheaper
from reprsim.stages.findings.alignment import inn_aligns_better
from reprsim.stages.findings.cells import cell, mean_of_units, select, weighted
from reprsim.stages.findings.claims import CLAIMS, findings
from reprsim.stages.findings.context import Setup, Tables
from reprsim.stages.findings.groups import groups_closer_within
from reprsim.stages.findings.intervals import newcombe, t_interval, wilson
from reprsim.stages.findings.profiles import (finetuning_changes_upper_attention,
                                              adjacent_layers, finetuning_changes_upper_layers, halves,
                                              lower_layers_across_seeds)
from reprsim.stages.findings.stitching import (kind_labels, kinds, stitching_asymmetric_between_kinds,
                                               stitching_penalty_grows_with_depth)
from reprsim.stages.findings.table import COLUMNS, verdict, write_findings
from reprsim.stages.findings.two_blocks import two_block_structure
from reprsim.tables.layers import matching_layer

REPO = Path(__file__).resolve().parents[2]
N, R = 40, 20  # rows of the similarity split, replicates per cell
LABEL = "linear_cka"


def init(seed, layers=4):
    return {"source": "init", "architecture": "bert", "tokenizer": "orig", "seed": seed,
            "config": {"hidden_size": 8, "num_hidden_layers": layers}}


def finetuned(seed, base="orig"):
    return {"source": "finetune", "base": base, "dataset": "d", "seed": seed, "steps": 5, "batch_size": 8}


ORIG = {"source": "package", "package": "some_model", "subdir": None}


def setup(models, **kwargs):
    return Setup(models=models, measure=LABEL, aligners={"linear": "linear", "inn": "inn"}, confidence=0.95,
                 resamples=R, seed=0, **kwargs)


def pair_tables(depths: dict[str, int], value, noise=0.005, seed=0) -> Tables:
    """pairs and pair_resamples as the compare stage writes them: every unordered pair (self pairs
    too), every layer pair; replicate r = value + Gaussian noise (sd `noise`)."""
    rng = np.random.default_rng(seed)
    names = sorted(depths)
    rows = [(a, b, la, lb, float(value(a, b, la, lb)))
            for i, a in enumerate(names) for b in names[i:]
            for la in range(depths[a] + 1) for lb in range(depths[b] + 1)]
    pairs = pd.DataFrame(rows, columns=["model_a", "model_b", "layer_a", "layer_b", "value"]).assign(
        dataset="d", representation="mean", measure=LABEL, kind="similarity", direction="symmetric", n=N)
    reps = pairs.loc[pairs.index.repeat(R), ["dataset", "representation", "model_a", "model_b", "layer_a", "layer_b",
                                              "measure", "direction", "value"]].reset_index(drop=True)
    reps["replicate"] = np.tile(np.arange(R), len(pairs))
    reps["value"] = reps["value"] + noise * rng.normal(size=len(reps))
    return Tables(pairs=pairs, replicates=reps.assign(n=N, m=N // 2))


def only(rows):
    assert len(rows) == 1, rows
    row = rows[0]
    assert set(row) == set(COLUMNS) and row["reason"]
    if row["verdict"] != "not applicable":
        assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
    return row


# ----------------------------------------------------------------- shared pieces
def test_verdict_comes_from_the_interval_only():
    assert verdict(0.01, 0.2, 0.0) == "supported"
    assert verdict(-0.3, -0.01, 0.0) == "contradicted"
    assert verdict(-0.1, 0.2, 0.0) == "inconclusive"
    assert verdict(0.0, 0.2, 0.0) == "inconclusive"  # touching the reference is not enough
    assert verdict(0.01, 0.2, 0.0, side=-1) == "contradicted"
    assert verdict(math.nan, 0.2, 0.0) == "inconclusive"


def test_newcombe_reproduces_the_published_example():
    """Newcombe (1998), Table II, example (a): 56/70 − 48/80, method 10: 0.2 [0.0524, 0.3339]."""
    difference, low, high = newcombe(56, 70, 48, 80, 0.95)
    assert difference == pytest.approx(0.2)
    assert (low, high) == pytest.approx((0.0524, 0.3339), abs=1e-4)


def test_t_interval_over_units():
    mean, low, high = t_interval([1.0, 2.0, 3.0], 0.95)
    assert mean == 2.0 and high - mean == pytest.approx(4.302653 * 1.0 / math.sqrt(3), rel=1e-6)
    values = [0.3, 0.9, 0.4, 0.7]
    half = stats.t.ppf(0.95, 3) * np.std(values, ddof=1) / 2
    assert t_interval(values, 0.9)[2] - np.mean(values) == pytest.approx(half, rel=1e-12)


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (423, 500), (1, 1)])
@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_wilson_interval_is_scipys(k, n, confidence):
    expected = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert wilson(k, n, confidence) == pytest.approx((expected.low, expected.high), rel=1e-12, abs=1e-15)


def test_relations_of_the_default_and_tiny_configs():
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    validate_config(default)
    specs = default["models"]
    assert seed_pairs(specs) == [("bert-small-s0", "bert-small-s1"), ("minilm-ft-s1", "minilm-ft-s2")]
    assert finetuned_from(specs) == {"minilm-ft-s1": "minilm", "minilm-ft-s2": "minilm"}
    assert groups(specs)["minilm-ft-s2"] == {"minilm", "minilm-ft-s1", "minilm-ft-s2"}
    assert groups(specs)["bert-small-s0"] == {"bert-small-s0", "bert-small-s1"}
    tiny = yaml.safe_load((REPO / "tests" / "config" / "tiny.yaml").read_text())
    validate_config(tiny)
    assert seed_pairs(tiny["models"]) == [("tiny-ft-s1", "tiny-ft-s2")]
    assert groups(tiny["models"])["tiny-gpt2"] == {"tiny-gpt2"}  # same seed, other architecture: alone
    assert halves(6) == ([1, 2, 3], [4, 5, 6]) and halves(3) == ([1], [3])


def test_pooled_statistic_is_computed_on_each_replicate():
    """Few units: the interval of the mean over units is the replicates' interval of the pooled statistic."""
    tables = pair_tables({"a": 1, "b": 1}, lambda a, b, i, j: 0.5 + 0.1 * i, noise=0.02)
    cells = select(tables.pairs, tables.replicates, [cell("a", "b", 0, 0), cell("a", "b", 1, 1)], LABEL)
    assert cells.estimate == pytest.approx([0.5, 0.6]) and cells.replicates.shape == (R, 2)
    units = {"ab": weighted(cells, {cell("a", "b", 1, 1): 1.0, cell("a", "b", 0, 0): -1.0})}
    estimate, low, high, method = mean_of_units(cells, units, 0.95, "pairs")
    differences = cells.replicates[:, 1] - cells.replicates[:, 0]
    assert estimate == pytest.approx(0.1)
    assert (low, high) == pytest.approx(interval(estimate, differences, N, N // 2, 0.95))
    assert "half-sample" in method


# ----------------------------------------------------------------- 1. adjacent vs distant layers
def profile(kind):
    """Self-pair CKA as a function of the layer distance: falling, rising or flat."""
    return {"supported": lambda d: 1 - 0.1 * d, "contradicted": lambda d: 0.4 + 0.05 * d,
            "inconclusive": lambda d: 1.0 if d == 0 else 0.8}[kind]


@pytest.mark.parametrize("kind", ["supported", "contradicted", "inconclusive"])
def test_adjacent_layers(kind):
    shape = profile(kind)
    tables = pair_tables({"a": 4, "b": 3}, lambda a, b, i, j: shape(abs(i - j)) if a == b else 0.3,
                         noise=0.05 if kind == "inconclusive" else 0.005)
    row = only(adjacent_layers(tables, setup({"a": ORIG, "b": ORIG})))
    assert row["verdict"] == kind and row["models"] == "a, b" and row["n"] == N


def test_adjacent_layers_not_applicable():
    tables = pair_tables({"a": 1}, lambda *_: 0.5)
    assert only(adjacent_layers(tables, setup({"a": ORIG})))["verdict"] == "not applicable"
    row = only(adjacent_layers(tables, Setup(models={"a": ORIG}, measure=None)))
    assert row["verdict"] == "not applicable" and "CKA" in row["reason"]


# ----------------------------------------------------------------- 2. lower layers across seeds
def diagonal(kind, low_value=0.9, high_value=0.5):
    """Matching-layer CKA of two distinct models: lower blocks above, below or equal to upper ones."""
    if kind == "inconclusive":
        return lambda layer: 0.7
    first, second = (low_value, high_value) if kind == "supported" else (high_value, low_value)
    return lambda layer: first if layer <= 2 else second


@pytest.mark.parametrize("kind", ["supported", "contradicted", "inconclusive"])
def test_lower_layers_across_seeds(kind):
    shape = diagonal(kind)
    specs = {"s0": init(0), "s1": init(1), "other": ORIG}
    tables = pair_tables({"s0": 4, "s1": 4, "other": 4},
                         lambda a, b, i, j: shape(i) if {a, b} == {"s0", "s1"} and i == j else 0.2,
                         noise=0.05 if kind == "inconclusive" else 0.005)
    row = only(lower_layers_across_seeds(tables, setup(specs)))
    assert row["verdict"] == kind and row["models"] == "s0 vs s1"
    assert "half-sample" in row["reason"]


def test_three_seed_pairs_are_the_units_of_a_t_interval():
    specs = {f"s{k}": init(k) for k in range(3)}
    tables = pair_tables({name: 4 for name in specs},
                         lambda a, b, i, j: (0.9 if i <= 2 else 0.5) + 0.01 * int(a[1]) if a != b and i == j else 0.2)
    row = only(lower_layers_across_seeds(tables, setup(specs)))
    assert row["verdict"] == "supported" and "t interval over the 3 seed pairs" in row["reason"]
    # unit values 0.4 each (the seed offset cancels): zero spread
    assert row["estimate"] == pytest.approx(0.4) and row["ci_high"] - row["ci_low"] == pytest.approx(0, abs=1e-12)


def test_lower_layers_across_seeds_not_applicable_without_seed_siblings():
    specs = {"a": ORIG, "b": init(0, layers=3)}
    row = only(lower_layers_across_seeds(pair_tables({"a": 4, "b": 4}, lambda *_: 0.5), setup(specs)))
    assert row["verdict"] == "not applicable" and "seed" in row["reason"]


# ----------------------------------------------------------------- 3. fine-tuning changes upper layers
@pytest.mark.parametrize("kind", ["supported", "contradicted", "inconclusive"])
def test_finetuning_changes_upper_layers(kind):
    shape = diagonal(kind, 0.95, 0.4)
    tables = pair_tables({"orig": 4, "ft": 4}, lambda a, b, i, j: shape(i) if a != b and i == j else 0.3,
                         noise=0.05 if kind == "inconclusive" else 0.005)
    row = only(finetuning_changes_upper_layers(tables, setup({"orig": ORIG, "ft": finetuned(1)})))
    assert row["verdict"] == kind and row["models"] == "ft vs orig"


@pytest.mark.parametrize("kind", ["supported", "contradicted", "inconclusive"])
def test_finetuning_changes_upper_attention(kind):
    """The same statistic on the attention tables (blocks 1..L, the distributed attention CKA label)."""
    shape = diagonal(kind, 0.95, 0.4)
    made = pair_tables({"orig": 4, "ft": 4}, lambda a, b, i, j: shape(i) if a != b and i == j else 0.3,
                       noise=0.05 if kind == "inconclusive" else 0.005)
    tables = Tables(attention=made.pairs.assign(measure="attn_cka", representation="attention"),
                    attention_replicates=made.replicates.assign(measure="attn_cka", representation="attention"))
    specs = {"orig": ORIG, "ft": finetuned(1)}
    row = only(finetuning_changes_upper_attention(tables, setup(specs, attention_measure="attn_cka")))
    assert row["verdict"] == kind and row["models"] == "ft vs orig" and row["representation"] == "attention"
    assert row["measure"] == "attn_cka"
    absent = only(finetuning_changes_upper_attention(Tables(), setup(specs)))
    assert absent["verdict"] == "not applicable" and "similarity.attention" in absent["reason"]


def test_finetuning_claims_not_applicable_without_a_finetuned_model():
    tables = pair_tables({"a": 4}, lambda *_: 0.5)
    for claim in (finetuning_changes_upper_layers, two_block_structure):
        row = only(claim(tables, setup({"a": ORIG})))
        assert row["verdict"] == "not applicable" and "fine-tuned" in row["reason"]


# ----------------------------------------------------------------- 4. skipping upper blocks
def skip_table(model, accuracies, depth=4, n=500):
    """Single-block skips with the given {block: accuracy}, the full model and one longer span."""
    rows = [(0, 0, 0.9)] + [(b, b, accuracies.get(b, 0.8)) for b in range(1, depth + 1)] + [(1, depth, 0.5)]
    return pd.DataFrame([{"start": s, "end": e, "blocks_skipped": 0 if s == 0 else e - s + 1, "metric": metric,
                          "value": v if metric == "accuracy" else 0.1, "split": "validation", "n": n,
                          "model": model} for s, e, v in rows for metric in ("accuracy", "matthews_correlation")])


@pytest.mark.parametrize("kind, first, last", [("supported", 0.60, 0.85), ("contradicted", 0.86, 0.70),
                                               ("inconclusive", 0.80, 0.81)])
def test_skip_upper_cheaper(kind, first, last):
    specs = {"orig": ORIG, "ft-s1": finetuned(1), "ft-s2": finetuned(2)}
    skip = pd.concat([skip_table(m, {1: first, 4: last}) for m in ("ft-s1", "ft-s2")])
    row = only(skip_upper_cheaper(Tables(skip=skip), setup(specs)))
    assert row["verdict"] == kind and row["estimate"] == pytest.approx(last - first)
    assert row["n"] == 1000 and "Newcombe" in row["reason"] and "conservative" in row["reason"]


def test_skip_not_applicable():
    assert only(skip_upper_cheaper(Tables(), setup({"orig": ORIG, "ft": finetuned(1)})))["verdict"] == "not applicable"
    assert "fine-tuned" in only(skip_upper_cheaper(Tables(), setup({"orig": ORIG})))["reason"]


# ----------------------------------------------------------------- 8. TUNED vs TUNEDORIG (truncation)
def truncation_table(model, tuned, orig, depth=4, n=500):
    rows = [(layer, mode, tuned if mode == "TUNED" else orig) for layer in range(depth + 1)
            for mode in ("TUNED", "TUNEDORIG")] + [(depth, "FULL", 0.9), (-1, "MAJORITY", 0.5)]
    return pd.DataFrame([{"layer": l, "mode": mode, "metric": "accuracy", "value": v, "split": "validation", "n": n,
                          "model": model} for l, mode, v in rows])


@pytest.mark.parametrize("kind, tuned, orig", [("supported", 0.85, 0.70), ("contradicted", 0.70, 0.85),
                                               ("inconclusive", 0.80, 0.79)])
def test_finetuned_layers_carry_the_task(kind, tuned, orig):
    table = truncation_table("ft", tuned, orig)
    row = only(finetuned_layers_carry_the_task(Tables(truncation=table), setup({"orig": ORIG, "ft": finetuned(1)})))
    assert row["verdict"] == kind and "layer 2" in row["reason"]


def test_truncation_claim_not_applicable_without_fresh_heads():
    table = truncation_table("ft", 0.8, 0.7)
    table = table[~table["mode"].isin(["TUNED", "TUNEDORIG"])]
    row = only(finetuned_layers_carry_the_task(Tables(truncation=table), setup({"orig": ORIG, "ft": finetuned(1)})))
    assert row["verdict"] == "not applicable" and "heads" in row["reason"]


# ----------------------------------------------------------------- 5. INN vs linear on held-out rows
def aligner_outputs(delta_linear, delta_inn, depth=2, n=60, shuffle_inn=False, seed=0):
    """Per-example errors with the given relative errors, and the aligner table they imply."""
    rng = np.random.default_rng(seed)
    target = rng.uniform(1.0, 2.0, size=n)
    base = rng.uniform(0.5, 1.5, size=n)  # per-example error profile
    frames, table = [], []
    for layer in range(depth + 1):
        for direction in ("a->b", "b->a"):
            for label, delta in (("linear", delta_linear), ("inn", delta_inn), ("cca", 0.5)):
                errors = base * target * delta ** 2 / (base * target).sum() * target.sum()
                if label == "inn" and shuffle_inn:
                    errors = rng.permutation(errors)
                frames.append(pd.DataFrame({"layer_a": layer, "layer_b": layer, "direction": direction,
                                            "aligner": label, "method": label, "split": "test", "row": np.arange(n),
                                            "sq_error": errors, "target_sq": target}))
                table.append({"layer_a": layer, "layer_b": layer, "direction": direction, "aligner": label,
                              "method": label, "split": "test", "role": "score", "n": n,
                              "rel_error": float(np.sqrt(errors.sum() / target.sum()))})
    common = {"role": "score", "pooling": "mean", "dataset": "d", "model_a": "a", "model_b": "b"}
    rows = pd.concat(frames, ignore_index=True).assign(**common)
    table = pd.DataFrame(table).assign(**{k: v for k, v in common.items() if k != "role"})
    return Tables(aligners=table, aligner_rows=rows)


@pytest.mark.parametrize("kind, linear, inn, shuffle", [("supported", 0.4, 0.2, False), ("contradicted", 0.2, 0.4, False),
                                                        ("inconclusive", 0.3, 0.3, True)])
def test_inn_aligns_better(kind, linear, inn, shuffle):
    row = only(inn_aligns_better(aligner_outputs(linear, inn, shuffle_inn=shuffle), setup({})))
    assert row["verdict"] == kind and row["estimate"] == pytest.approx(linear - inn)
    assert row["n"] == 60 and row["models"] == "a vs b"


def test_inn_claim_checks_the_aligner_table_and_applicability():
    tables = aligner_outputs(0.4, 0.2)
    tables.aligners.loc[tables.aligners["aligner"] == "inn", "rel_error"] *= 1.01
    with pytest.raises(ValueError, match="out of step"):
        inn_aligns_better(tables, setup({}))
    assert only(inn_aligns_better(Tables(), setup({})))["verdict"] == "not applicable"
    row = only(inn_aligns_better(aligner_outputs(0.4, 0.2), Setup(models={}, aligners={"linear": "linear"})))
    assert row["verdict"] == "not applicable" and "inn" in row["reason"]


# ----------------------------------------------------------------- 6. two-block structure
def smooth(i, j):
    return 1 - 0.1 * abs(i - j)


def blocky(i, j):
    return 1.0 if i == j else 0.9 if (i < 3) == (j < 3) else 0.2


@pytest.mark.parametrize("kind, tuned, base", [("supported", blocky, smooth), ("contradicted", smooth, blocky),
                                               ("inconclusive", smooth, smooth)])
def test_two_block_structure(kind, tuned, base):
    shapes = {"ft": tuned, "orig": base}
    tables = pair_tables({"orig": 5, "ft": 5}, lambda a, b, i, j: shapes[a](i, j) if a == b else 0.3,
                         noise=0.03 if kind == "inconclusive" else 0.003)
    blocks = pd.DataFrame({"model": "ft", "view": ["ORIG–ORIG", "FT–FT"], "split": 3, "contrast": [0.1, 0.6],
                           "within": 0.0, "between": 0.0})
    tables = Tables(pairs=tables.pairs, replicates=tables.replicates, layer_blocks=blocks)
    row = only(two_block_structure(tables, setup({"orig": ORIG, "ft": finetuned(1)})))
    assert row["verdict"] == kind and "ft 0.600 vs 0.100" in row["reason"]


# ----------------------------------------------------------------- 7. groups closer within
GROUP_SPECS = {"s0": init(0), "s1": init(1), "orig": ORIG, "ft": finetuned(1)}


@pytest.mark.parametrize("kind, near, far", [("supported", 0.9, 0.3), ("contradicted", 0.3, 0.9),
                                             ("inconclusive", 0.6, 0.6)])
def test_groups_closer_within(kind, near, far):
    group = {"s0": 0, "s1": 0, "orig": 1, "ft": 1}
    tables = pair_tables({"s0": 2, "s1": 2, "orig": 4, "ft": 4},
                         lambda a, b, i, j: 1.0 if a == b else near if group[a] == group[b] else far,
                         noise=0.05 if kind == "inconclusive" else 0.005)
    row = only(groups_closer_within(tables, setup(GROUP_SPECS)))
    assert row["verdict"] == kind and row["models"] == "{ft, orig} | {s0, s1}"
    if kind != "inconclusive":  # the RMS angle of a constant CKA is its arccos
        assert row["estimate"] == pytest.approx(np.arccos(far) - np.arccos(near), abs=1e-12)


def test_groups_not_applicable_with_one_group():
    tables = pair_tables({"s0": 2, "s1": 2}, lambda *_: 0.5)
    row = only(groups_closer_within(tables, setup({"s0": init(0), "s1": init(1)})))
    assert row["verdict"] == "not applicable" and "models of different groups" in row["reason"]


# ----------------------------------------------------------------- the whole table
SHAPES = {  # config -> (depth of each model, the aligned pair), as the workflow would produce them
    "config/config.yaml": ({"minilm": 6, "minilm-ft-s1": 6, "minilm-ft-s2": 6, "bert-small-s0": 4, "bert-small-s1": 4},
                           ("minilm", "minilm-ft-s1")),
    "tests/config/tiny.yaml": ({"minilm": 6, "tiny-bert-s0": 2, "tiny-gpt2": 3, "tiny-ft-s1": 2, "tiny-ft-s2": 2},
                               ("tiny-bert-s0", "tiny-gpt2")),
}


def config_like_tables(config_path="config/config.yaml", seed=0) -> tuple[Tables, Setup]:
    """Tables shaped like a configuration's run: pairs of its models (at their depths) with random CKA
    values; skip, truncation for its fine-tuned models; its aligned pair."""
    config = yaml.safe_load((REPO / config_path).read_text())
    validate_config(config)
    depth, (model_a, model_b) = SHAPES[config_path]
    assert set(depth) == set(config["models"])
    rng = np.random.default_rng(seed)
    base = pair_tables(depth, lambda a, b, i, j: 1.0 if (a, i) == (b, j) else float(rng.uniform(0.2, 0.9)),
                       noise=0.01)
    tuned = sorted(finetuned_from(config["models"]))
    align = aligner_outputs(0.3, 0.29, depth=min(depth[model_a], depth[model_b]))
    align.aligner_rows["model_a"] = align.aligners["model_a"] = model_a
    align.aligner_rows["model_b"] = align.aligners["model_b"] = model_b
    tables = Tables(pairs=base.pairs, replicates=base.replicates,
                    skip=pd.concat([skip_table(m, {1: 0.81, depth[m]: 0.76}, depth=depth[m]) for m in tuned]),
                    truncation=pd.concat([truncation_table(m, 0.81, 0.76, depth=depth[m]) for m in tuned]),
                    aligners=align.aligners, aligner_rows=align.aligner_rows)
    attention = config["similarity"]["attention"]
    if attention:  # attention tables of its pairs: blocks 1..L, the distributed attention CKA label
        pairs = sorted({tuple(sorted(p)) for p in attention["pairs"]})
        label = next(label for label, spec in attention["measures"].items() if spec["measure"] == "cka")
        attended = pair_tables({m: depth[m] for pair in pairs for m in pair},
                               lambda a, b, i, j: float(rng.uniform(0.2, 0.9)), noise=0.01)

        def keep(frame):
            return frame[[tuple(sorted(p)) in pairs for p in zip(frame["model_a"], frame["model_b"])]]

        tables = dataclasses.replace(
            tables, attention=keep(attended.pairs).assign(measure=label, representation="attention"),
            attention_replicates=keep(attended.replicates).assign(measure=label, representation="attention"))
    if config.get("stitching"):  # every stitch job of the config, small random penalties
        from reprsim.workflow.stitching import stitch_jobs

        made = stitch_tables(depth, lambda f, g, la, m, phi: 0.0 if f == g and phi == "identity"
                             else float(rng.uniform(-0.02, 0.05)), [(job.bottom, job.top) for job in stitch_jobs(config)],
                             phis=config["stitching"]["phi"])
        tables = dataclasses.replace(tables, stitching=made.stitching, stitching_replicates=made.stitching_replicates)
    aligners = {label: spec["aligner"] for label, spec in config["align"]["aligners"].items()}
    return tables, Setup(models=config["models"], measure="linear_cka", aligners=aligners, resamples=R,
                         attention_measure=label if attention else None)


@pytest.mark.parametrize("config_path", sorted(SHAPES))
def test_the_shipped_configurations_test_enough_claims(config_path):
    table = findings(*config_like_tables(config_path))
    assert list(table.columns) == COLUMNS and len(table) == len(CLAIMS) >= 6
    applicable = table[table["verdict"] != "not applicable"]
    attention = yaml.safe_load((REPO / config_path).read_text())["similarity"].get("attention")
    # both configurations stitch seeds of one recipe only: the asymmetry between kinds has nothing to compare
    not_applicable = (0 if attention else 1) + 1
    assert len(applicable) >= 4 and len(applicable) == len(table) - not_applicable
    assert table.set_index("claim_id").loc["stitching_penalty_grows_with_depth", "verdict"] != "not applicable"
    assert np.isfinite(applicable[["estimate", "ci_low", "ci_high"]]).all().all()
    assert (applicable["ci_low"] <= applicable["estimate"]).all() and (applicable["estimate"] <= applicable["ci_high"]).all()
    assert table["reason"].str.len().gt(0).all() and table["claim_id"].is_unique


def test_csv_and_parquet_agree(tmp_path):
    tables, config = config_like_tables()
    table = findings(Tables(pairs=tables.pairs, replicates=tables.replicates), config)  # some not applicable
    assert set(table["verdict"]) & {"not applicable"} and len(set(table["verdict"])) > 1
    write_findings(table, tmp_path / "findings.parquet", tmp_path / "findings.csv")
    parquet = pd.read_parquet(tmp_path / "findings.parquet")
    csv = pd.read_csv(tmp_path / "findings.csv")
    text = [c for c in COLUMNS if not pd.api.types.is_numeric_dtype(parquet[c])]
    csv[text] = csv[text].fillna("")  # the CSV writes an empty string and NaN alike
    pd.testing.assert_frame_equal(parquet, table)
    pd.testing.assert_frame_equal(csv, parquet, check_dtype=False)
    assert not list(tmp_path.glob("*.tmp-*"))


def test_claims_read_only_the_pairs_a_representation_compares():
    """Word level may compare fewer pairs (similarity.word.pairs): a claim uses those, or says it cannot."""
    specs = {"s0": init(0), "s1": init(1), "orig": ORIG, "ft": finetuned(1)}
    made = pair_tables({"s0": 4, "s1": 4, "orig": 4, "ft": 4}, lambda a, b, i, j: 1.0 if a == b and i == j else 0.5)
    kept = {("s0", "s1"), ("ft", "orig"), ("orig", "orig")}
    tables = Tables(**{name: frame[[pair in kept for pair in zip(frame["model_a"], frame["model_b"])]]
                       for name, frame in (("pairs", made.pairs), ("replicates", made.replicates))})
    assert only(adjacent_layers(tables, setup(specs)))["models"] == "orig"  # the one self pair compared
    assert only(lower_layers_across_seeds(tables, setup(specs)))["models"] == "s0 vs s1"
    assert only(finetuning_changes_upper_layers(tables, setup(specs)))["models"] == "ft vs orig"
    assert only(two_block_structure(tables, setup(specs)))["verdict"] == "not applicable"  # ft with itself: absent
    assert "models of different groups" in only(groups_closer_within(tables, setup(specs)))["reason"]


# ----------------------------------------------------------------- 9. model stitching
def stitch_tables(depths, penalty, jobs, phis=("identity", "affine"), layers="matching", metric="accuracy",
                  noise=0.004, seed=0, dataset="d") -> Tables:
    """stitching and stitching_resamples as the stitch stage writes them: one job per (f, g) of `jobs`
    (self-stitches at l = m), matching or all layer pairs, `penalty(f, g, l, m, phi)` the estimate and
    replicate r = estimate + Gaussian noise (sd `noise`) on the same N rows in every job."""
    rng = np.random.default_rng(seed)
    objective = "language_modeling" if metric == "cross_entropy" else "classification"
    higher = metric != "cross_entropy"
    rows = []
    for f, g in jobs:
        depth_f, depth_g = depths[f], depths[g]
        cells = ([(la, la) for la in range(1, depth_f + 1)] if f == g else
                 [(la, matching_layer(la, depth_f, depth_g)) for la in range(1, depth_f + 1)] if layers == "matching"
                 else [(la, m) for la in range(1, depth_f + 1) for m in range(1, depth_g + 1)])
        for la, m in cells:
            for phi in phis:
                p = float(penalty(f, g, la, m, phi))
                top = 0.8 if higher else 3.0
                rows.append({"dataset": dataset, "objective": objective, "model_a": f, "model_b": g, "layer_a": la,
                             "layer_b": m, "n_layers_a": depth_f, "n_layers_b": depth_g, "phi": phi, "seed": 0,
                             "metric": metric, "higher_is_better": higher, "value": top - p if higher else top + p,
                             "chance": 0.5 if higher else 6.0, "top_score": top, "penalty": p,
                             "penalty_low": p - 0.01, "penalty_high": p + 0.01, "split": "validation", "n": N})
    table = pd.DataFrame(rows)
    keys = ["layer_a", "phi", "seed", "metric"]
    own = table[table["model_a"] == table["model_b"]][["model_a", *keys, "penalty"]].rename(
        columns={"penalty": "self_penalty"})
    table = table.merge(own, on=["model_a", *keys], how="left")
    table["excess_penalty"] = table["penalty"] - table["self_penalty"]
    reps = table.loc[table.index.repeat(R), ["dataset", "model_a", "model_b", "layer_a", "layer_b", "phi", "seed",
                                              "metric", "penalty"]].reset_index(drop=True)
    reps["replicate"] = np.tile(np.arange(R), len(table))
    reps["penalty"] = reps["penalty"] + noise * rng.normal(size=len(reps))
    reps["value"] = 0.0
    return Tables(stitching=table, stitching_replicates=reps.assign(n=N, m=N // 2))


def replicate_penalty(tables: Tables, f, g, la, m, phi) -> np.ndarray:
    reps = tables.stitching_replicates
    chosen = reps[(reps["model_a"] == f) & (reps["model_b"] == g) & (reps["layer_a"] == la) & (reps["layer_b"] == m)
                  & (reps["phi"] == phi)].sort_values("replicate")
    return chosen["penalty"].to_numpy()


FINETUNED_SEEDS = {"orig": ORIG, "ft-s1": finetuned(1), "ft-s2": finetuned(2)}
BOTH_WAYS = [("ft-s1", "ft-s2"), ("ft-s2", "ft-s1"), ("ft-s1", "ft-s1"), ("ft-s2", "ft-s2")]


@pytest.mark.parametrize("kind, slope", [("supported", 0.02), ("contradicted", -0.02), ("inconclusive", 0.0)])
def test_stitching_penalty_grows_with_depth(kind, slope):
    """Excess penalty (f into g minus f into itself) of the upper half of f's layers minus the lower half."""
    tables = stitch_tables({"ft-s1": 4, "ft-s2": 4},
                           lambda f, g, la, m, phi: (0.0 if phi == "identity" else 0.01) + (0 if f == g else slope * la),
                           BOTH_WAYS, noise=0.03 if kind == "inconclusive" else 0.004)
    row = only(stitching_penalty_grows_with_depth(tables, setup(FINETUNED_SEEDS)))
    assert row["verdict"] == kind and row["estimate"] == pytest.approx(2 * slope, abs=1e-12)
    assert row["models"] == "ft-s1 → ft-s2; ft-s2 → ft-s1" and row["n"] == N and row["dataset"] == "d"
    assert "φ = identity" in row["measure"] and "accuracy" in row["measure"]
    # the same statistic on each replicate: upper (l = 3, 4) minus lower (1, 2) excess, mean over both directions
    excess = {(f, g, la): replicate_penalty(tables, f, g, la, la, "identity")
              - replicate_penalty(tables, f, f, la, la, "identity") for f, g in BOTH_WAYS[:2] for la in range(1, 5)}
    per_replicate = np.mean([(excess[f, g, 3] + excess[f, g, 4]) / 2 - (excess[f, g, 1] + excess[f, g, 2]) / 2
                             for f, g in BOTH_WAYS[:2]], axis=0)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(interval(row["estimate"], per_replicate, N, N // 2))


def test_stitching_depth_subtracts_the_self_stitch_and_falls_back_to_a_learned_map():
    """A penalty that grows as much in f's self-stitch has no excess; without identity, the first learned map."""
    tables = stitch_tables({"ft-s1": 4, "ft-s2": 4}, lambda f, g, la, m, phi: 0.02 * la + (0.05 if f != g else 0.0),
                           BOTH_WAYS, phis=("affine", "affine_layernorm"))
    row = only(stitching_penalty_grows_with_depth(tables, setup(FINETUNED_SEEDS)))
    assert row["estimate"] == pytest.approx(0.0, abs=1e-12) and row["verdict"] == "inconclusive"
    assert "φ = affine" in row["measure"] and "first learned map" in row["reason"]


def test_stitching_depth_not_applicable():
    assert "no stitching table" in only(stitching_penalty_grows_with_depth(Tables(), setup(FINETUNED_SEEDS)))["reason"]
    specs = {"a": init(0), "b": init(1)}  # stitched, but not fine-tuned
    tables = stitch_tables({"a": 4, "b": 4}, lambda *_: 0.1, [("a", "b"), ("b", "a"), ("a", "a"), ("b", "b")])
    row = only(stitching_penalty_grows_with_depth(tables, setup(specs)))
    assert row["verdict"] == "not applicable" and "fine-tuned" in row["reason"] and row["dataset"] == "d"


def pretrained(activation, seed, tokenizer="g0"):
    return {"source": "pretrain", "dataset": "d", "tokenizer": tokenizer, "architecture": "gpt2",
            "activation": activation, "config": {"n_embd": 16, "n_layer": 3}, "context": 16, "steps": 10,
            "batch_size": 4, "seed": seed}


LANGUAGE_MODELS = {"g0": pretrained("gelu", 0, {"train": {"dataset": "d", "vocab_size": 500}}),
                   "g1": pretrained("gelu", 1), "r0": pretrained("relu", 0), "r1": pretrained("relu", 1)}


def lm_tables(relu_into_gelu, gelu_into_relu, noise=0.004, phis=("affine_layernorm",)) -> Tables:
    """Every model into every other (and itself) at every (l, m): cross-entropy penalties by kind, plus a
    layer profile that cancels between matched cells (a → b at (l, m) against b → a at (m, l))."""
    def penalty(f, g, la, m, phi):
        kinds = (f[0], g[0])
        base = {("r", "g"): relu_into_gelu, ("g", "r"): gelu_into_relu}.get(kinds, 0.05 if f != g else 0.02)
        return base + 0.01 * la + 0.02 * m + (0.1 if phi == "identity" else 0.0)
    names = sorted(LANGUAGE_MODELS)
    return stitch_tables({m: 3 for m in names}, penalty, [(f, g) for f in names for g in names], phis=phis,
                         layers="all", metric="cross_entropy", noise=noise)


def test_kinds_are_specs_without_seed_with_borrowed_tokenizers_resolved():
    grouped = kinds(LANGUAGE_MODELS, LANGUAGE_MODELS)
    assert sorted(grouped.values()) == [("g0", "g1"), ("r0", "r1")]
    assert kind_labels(*sorted(grouped)) == ("activation=gelu", "activation=relu")
    assert len(kinds(FINETUNED_SEEDS, FINETUNED_SEEDS)) == 2  # the base, and the fine-tuned seeds


@pytest.mark.parametrize("kind, relu_into_gelu, gelu_into_relu", [
    ("supported", 0.3, 0.1), ("supported", 0.1, 0.3), ("inconclusive", 0.2, 0.2)])
def test_stitching_asymmetric_between_kinds(kind, relu_into_gelu, gelu_into_relu):
    tables = lm_tables(relu_into_gelu, gelu_into_relu, noise=0.03 if kind == "inconclusive" else 0.004,
                       phis=("identity", "affine_layernorm"))
    row = only(stitching_asymmetric_between_kinds(tables, setup(LANGUAGE_MODELS)))
    assert row["verdict"] == kind and row["n"] == N
    assert row["estimate"] == pytest.approx(abs(relu_into_gelu - gelu_into_relu), abs=1e-12)
    assert "cross_entropy" in row["measure"] and "affine_layernorm" in row["measure"]  # the learned map
    if kind == "supported":
        costlier, cheaper = ("relu", "gelu") if relu_into_gelu > gelu_into_relu else ("gelu", "relu")
        first = "r0, r1" if costlier == "relu" else "g0, g1"
        assert row["models"].startswith(f"activation={costlier} -> activation={cheaper} costs more ({first} into")
        assert "two-sided" in row["reason"]
        # per replicate: mean over the 4 model pairs and 9 matched cells of penalty(a → b) − penalty(b → a)
        sign = 1.0 if costlier == "relu" else -1.0
        differences = [replicate_penalty(tables, a, b, la, m, "affine_layernorm")
                       - replicate_penalty(tables, b, a, m, la, "affine_layernorm")
                       for a in ("r0", "r1") for b in ("g0", "g1") for la in range(1, 4) for m in range(1, 4)]
        per_replicate = sign * np.mean(differences, axis=0)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(interval(row["estimate"], per_replicate, N, N // 2))


def test_stitching_asymmetry_not_applicable():
    assert only(stitching_asymmetric_between_kinds(Tables(), setup(LANGUAGE_MODELS)))["verdict"] == "not applicable"
    seeds = stitch_tables({"ft-s1": 4, "ft-s2": 4}, lambda *_: 0.1, BOTH_WAYS)
    row = only(stitching_asymmetric_between_kinds(seeds, setup(FINETUNED_SEEDS)))
    assert row["verdict"] == "not applicable" and "one kind" in row["reason"]
    one_way = stitch_tables({"g0": 3, "r0": 3}, lambda *_: 0.1, [("g0", "r0"), ("g0", "g0"), ("r0", "r0")])
    row = only(stitching_asymmetric_between_kinds(one_way, setup(LANGUAGE_MODELS)))
    assert row["verdict"] == "not applicable" and "both ways" in row["reason"]
